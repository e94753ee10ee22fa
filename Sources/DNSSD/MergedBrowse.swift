import DNSSDModel
import Synchronization

/// Several browses as one stream: a Browse without a domain covers `local` and the unicast browse domains
/// (RFC 6763 §11: the configured ones and the `lb._dns-sd._udp` "legacy browse" domains).
///
/// `allForNow` comes once every source has said it. The first source (the link, through Avahi) decides how
/// the stream ends: its error ends the merged stream; a unicast domain that fails only stops contributing, so a
/// dead DNS server never takes the link's services away.
enum MergedBrowse {
    /// The sources that have not said all-for-now yet.
    private final class Waiting: Sendable {
        let sources: Mutex<Set<Int>>
        init(_ sources: Set<Int>) { self.sources = Mutex(sources) }
    }

    /// The events of every stream as one; see the type's comment for how it ends.
    static func merge(_ streams: [AsyncThrowingStream<BrowseEvent, any Error>]) -> AsyncThrowingStream<BrowseEvent, any Error> {
        guard streams.count > 1 else { return streams.first ?? AsyncThrowingStream { $0.finish() } }
        return AsyncThrowingStream { continuation in
            // Sources that have not said all-for-now yet.
            let waiting = Waiting(Set(streams.indices))
            @Sendable func reachedAllForNow(_ index: Int) {
                let done = waiting.sources.withLock { pending in
                    pending.remove(index) != nil && pending.isEmpty
                }
                if done { continuation.yield(.allForNow) }
            }
            let task = Task {
                await withTaskGroup(of: Void.self) { group in
                    for (index, stream) in streams.enumerated() {
                        group.addTask {
                            do {
                                for try await event in stream {
                                    if case .allForNow = event { reachedAllForNow(index) } else { continuation.yield(event) }
                                }
                                if index == 0 { continuation.finish() }
                            } catch {
                                if index == 0 { continuation.finish(throwing: error) } else { reachedAllForNow(index) }
                            }
                        }
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Hands the events of `stream` to `sink` from a task of its own; cancelling the subscription ends the task
    /// (and with it the browse behind the stream), without calling `sink.end`.
    static func forward(
        _ stream: AsyncThrowingStream<BrowseEvent, any Error>, to sink: BrowseSink
    ) -> BrowseSubscription {
        let task = Task {
            do {
                for try await event in stream { sink.event(event) }
                if !Task.isCancelled { sink.end(nil) }
            } catch {
                if !Task.isCancelled { sink.end(error) }
            }
        }
        return BrowseSubscription { task.cancel() }
    }

    /// Several sources delivering into one sink: `allForNow` once every source said it; the first source's end is
    /// the end; another source's end only counts as its all-for-now.
    final class Sink: Sendable {
        private let target: BrowseSink
        private let waiting: Mutex<Set<Int>>

        init(_ target: BrowseSink, sources: Int) {
            self.target = target
            self.waiting = Mutex(Set(0..<sources))
        }

        /// The sink source `index` delivers into (0 is the one whose end ends the browse).
        func sink(for index: Int) -> BrowseSink {
            BrowseSink(
                event: { [self] event in
                    if case .allForNow = event { reached(index) } else { target.event(event) }
                },
                end: { [self] error in
                    if index == 0 { target.end(error) } else { reached(index) }
                })
        }

        private func reached(_ index: Int) {
            let done = waiting.withLock { pending in pending.remove(index) != nil && pending.isEmpty }
            if done { target.event(.allForNow) }
        }
    }
}
