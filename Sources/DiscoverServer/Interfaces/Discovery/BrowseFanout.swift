import DNSSDModel
import DiscoverAPI
import NIOConcurrencyHelpers

/// `Browse` streams (`more: true`) shared between calls: the calls with the same parameters follow one browse.
///
/// The browse hands each event to this fan-out as it happens (a ``BrowseSink``: for mDNS on Avahi's poll thread,
/// with no stream or task between); the event is encoded once and queued with one job per event loop, which writes
/// and flushes it on every call of that loop (``StreamFanout``); a call costs no task wake-up per event. A call
/// that joins a browse already running is first sent the ``BrowseSnapshot`` (the instances present, then
/// `allForNow` if it came), queued before any later event.
///
/// What stays per call: its order (one sender, and each event loop runs jobs in order), the `more` barrier and the
/// slow-reader rule (both in ``VarlinkConnectionHandler``: a reader past the send-buffer limit gets its stream
/// ended with `SubscriberTooSlow`, which cancels its call and so unsubscribes it; the others are not delayed, as
/// nothing here waits for a connection). The browse ends when its last call leaves (cancelled: the client went
/// away, or its reader was too slow) or when the browse itself ends, which ends every call with its error.
final class BrowseFanout: Sendable {
    /// What makes two Browse calls see the same events.
    struct Key: Hashable, Sendable {
        var type: String
        var domain: String?
        var subtype: String?
        var interface: String?
        var resolve: Bool

        init(_ parameters: BrowseParameters) {
            self.type = parameters.type
            self.domain = parameters.domain
            self.subtype = parameters.subtype
            self.interface = parameters.interface
            self.resolve = parameters.resolve ?? false
        }
    }

    /// Starts the browse a key stands for, delivering into the sink (called once per shared browse).
    typealias Source = @Sendable (BrowseSink) async throws -> BrowseSubscription

    private struct Browse {
        /// Tells this browse from a later one of the same key, after this one ended.
        let generation: UInt64
        var snapshot = BrowseSnapshot()
        var calls = StreamFanout()
        /// Starts the browse (the source is async: it may wait for Avahi's lock).
        var starter: Task<Void, Never>?
        /// The running browse, once started.
        var subscription: BrowseSubscription?
    }

    private struct Call {
        let key: Key
        let generation: UInt64
        let target: StreamSlot
        /// The call's task, waiting for the end of its stream.
        var continuation: CheckedContinuation<Void, any Error>?
        /// How the stream ended, when it did before the task waited.
        var ended: Result<Void, any Error>?
    }

    private struct State {
        var browses: [Key: Browse] = [:]
        var calls: [UInt64: Call] = [:]
        var nextID: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    init() {}

    /// Shared browses running.
    var browseCount: Int { state.withLockedValue { $0.browses.count } }

    /// Calls following the browse `key`.
    func callCount(_ key: Key) -> Int { state.withLockedValue { $0.browses[key]?.calls.count ?? 0 } }

    /// Event loops with calls following the browse `key`: the jobs each of its events costs.
    func loopCount(_ key: Key) -> Int { state.withLockedValue { $0.browses[key]?.calls.loopBatches.count ?? 0 } }

    /// Sends the events of the browse `key` to `target` until the call is cancelled (throws `CancellationError`)
    /// or the browse ends (returns when it finished, throws its error otherwise: that of `source`, too).
    ///
    /// - Parameter source: starts the browse when no call follows `key` yet.
    func follow(_ key: Key, to target: StreamSlot, source: @escaping Source) async throws {
        let id = join(key, target, source: source)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                wait(id, continuation)
            }
        } onCancel: {
            leave(id)
        }
    }

    private func join(_ key: Key, _ target: StreamSlot, source: @escaping Source) -> UInt64 {
        state.withLockedValue { state in
            state.nextID += 1
            let id = state.nextID
            if state.browses[key] == nil {
                var browse = Browse(generation: id)
                browse.starter = Task { await self.start(key, generation: id, source: source) }
                state.browses[key] = browse
            } else {
                // Under the lock: the catch-up is queued before the next event is.
                StreamFanout.send(state.browses[key]!.snapshot.replay, to: target)
            }
            state.browses[key]!.calls.add(id, target)
            state.calls[id] = Call(key: key, generation: state.browses[key]!.generation, target: target)
            return id
        }
    }

    private func wait(_ id: UInt64, _ continuation: CheckedContinuation<Void, any Error>) {
        let ended: Result<Void, any Error>? = state.withLockedValue { state in
            guard let call = state.calls[id] else { return .failure(CancellationError()) }
            if let ended = call.ended {
                state.calls[id] = nil
                return ended
            }
            state.calls[id]!.continuation = continuation
            return nil
        }
        if let ended { continuation.resume(with: ended) }
    }

    /// The call was cancelled: it stops following; the last one out stops the browse.
    private func leave(_ id: UInt64) {
        let continuation: CheckedContinuation<Void, any Error>? = state.withLockedValue { state in
            guard var call = state.calls[id] else { return nil }
            if state.browses[call.key]?.generation == call.generation {
                state.browses[call.key]!.calls.remove(id, call.target)
                if state.browses[call.key]!.calls.isEmpty, let browse = state.browses.removeValue(forKey: call.key) {
                    browse.starter?.cancel()
                    browse.subscription?.cancel()
                }
            }
            guard let continuation = call.continuation else {
                // Not waiting yet (or already ended): `wait` finds the outcome.
                if call.ended == nil { call.ended = .failure(CancellationError()) }
                state.calls[id] = call
                return nil
            }
            state.calls[id] = nil
            return continuation
        }
        continuation?.resume(throwing: CancellationError())
    }

    /// Starts the browse of `key` with `source`, delivering into this fan-out; keeps its subscription, or cancels it
    /// when every call left meanwhile.
    private func start(_ key: Key, generation: UInt64, source: Source) async {
        let sink = BrowseSink(
            event: { [self] event in deliver(event, key: key, generation: generation) },
            end: { [self] error in ended(key, generation: generation, with: error.map { .failure($0) } ?? .success(())) })
        do {
            let subscription = try await source(sink)
            let current = state.withLockedValue { state -> Bool in
                guard state.browses[key]?.generation == generation else { return false }
                state.browses[key]!.subscription = subscription
                return true
            }
            // Every call left while it started: nobody wants its events.
            if !current { subscription.cancel() }
        } catch {
            ended(key, generation: generation, with: .failure(error))
        }
    }

    /// One event of the browse: encoded once, recorded for late joiners, queued for every call.
    private func deliver(_ event: BrowseEvent, key: Key, generation: UInt64) {
        guard let encoded = try? EncodedBrowseEvent(event) else { return }
        state.withLockedValue { state in
            guard state.browses[key]?.generation == generation else { return }
            state.browses[key]!.snapshot.apply(encoded)
            state.browses[key]!.calls.send(encoded.bytes)
        }
    }

    /// The browse ended (finished, failed, or could not start): every call of it ends the same way.
    private func ended(_ key: Key, generation: UInt64, with end: Result<Void, any Error>) {
        // The calls' tasks resume after the jobs queued before, so each call's final reply comes after its events.
        let waiting: [CheckedContinuation<Void, any Error>] = state.withLockedValue { state in
            guard let browse = state.browses[key], browse.generation == generation else { return [] }
            state.browses[key] = nil
            var waiting: [CheckedContinuation<Void, any Error>] = []
            for id in browse.calls.ids {
                guard var call = state.calls[id] else { continue }
                if let continuation = call.continuation {
                    waiting.append(continuation)
                    state.calls[id] = nil
                } else {
                    call.ended = end
                    state.calls[id] = call
                }
            }
            return waiting
        }
        for continuation in waiting { continuation.resume(with: end) }
    }
}
