import NIOConcurrencyHelpers
import NIOCore

/// The open connections and live streams, shared by the listener and `Daemon.Status`, and what each uid holds of
/// them (per-uid fairness: one user cannot take every connection or every call slot).
public final class ConnectionRegistry: Sendable {
    /// What one uid holds now.
    public struct Usage: Sendable, Equatable {
        public var connections = 0
        /// Calls decoded and not yet answered (queued or running, streams included), over all its connections.
        public var calls = 0
    }

    /// Why a connection was not admitted.
    enum Refusal: Equatable {
        /// Every connection of the daemon is taken (`limit`: the cap that applied, with the reserve for privileged).
        case total(limit: Int)
        /// This uid holds its share.
        case perUID(limit: Int)
    }

    private struct State {
        var nextID: UInt64 = 1
        var channels: [UInt64: any Channel] = [:]
        var streams = 0
        var byUID: [UInt32: Usage] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// An empty registry.
    public init() {}

    /// Registers a new connection and returns its id, or nil when `limit` connections are open.
    func admit(_ channel: any Channel, limit: Int) -> UInt64? {
        switch admit(channel, uid: nil, limits: PerUIDLimits(maxConnections: .max, maxCalls: .max, reserve: 0),
            total: limit, privileged: false)
        {
        case .success(let id): id
        case .failure: nil
        }
    }

    /// Registers a new connection of `uid` when neither the total nor the uid's cap is reached. A privileged peer
    /// (root, the admin group) may also take the `reserve` above `total`, so Reload always gets through.
    func admit(
        _ channel: any Channel, uid: UInt32?, limits: PerUIDLimits, total: Int, privileged: Bool
    ) -> Result<UInt64, RefusalError> {
        state.withLockedValue { state in
            let cap = privileged ? total + limits.reserve : total
            guard state.channels.count < cap else { return .failure(RefusalError(.total(limit: cap))) }
            if let uid {
                guard state.byUID[uid, default: Usage()].connections < limits.maxConnections else {
                    return .failure(RefusalError(.perUID(limit: limits.maxConnections)))
                }
                state.byUID[uid, default: Usage()].connections += 1
            }
            let id = state.nextID
            state.nextID += 1
            state.channels[id] = channel
            return .success(id)
        }
    }

    /// A refusal as an `Error` for `Result`.
    struct RefusalError: Error {
        let refusal: Refusal
        init(_ refusal: Refusal) { self.refusal = refusal }
    }

    func remove(_ id: UInt64, uid: UInt32? = nil) {
        state.withLockedValue { state in
            guard state.channels.removeValue(forKey: id) != nil, let uid else { return }
            state.byUID[uid]?.connections -= 1
            if state.byUID[uid] == Usage() { state.byUID[uid] = nil }
        }
    }

    /// Takes one call slot of `uid`; false when it holds `limit` already.
    func takeCall(uid: UInt32, limit: Int) -> Bool {
        state.withLockedValue { state in
            guard state.byUID[uid, default: Usage()].calls < limit else { return false }
            state.byUID[uid, default: Usage()].calls += 1
            return true
        }
    }

    /// Gives back `count` call slots of `uid`.
    func releaseCalls(uid: UInt32, count: Int) {
        guard count > 0 else { return }
        state.withLockedValue { state in
            state.byUID[uid]?.calls -= count
            if state.byUID[uid] == Usage() { state.byUID[uid] = nil }
        }
    }

    func channels() -> [any Channel] { state.withLockedValue { Array($0.channels.values) } }
    func addStreams(_ delta: Int) { state.withLockedValue { $0.streams += delta } }

    /// Connections open now.
    public var connectionCount: Int { state.withLockedValue { $0.channels.count } }
    /// Streaming calls (`more`) running now.
    public var streamCount: Int { state.withLockedValue { $0.streams } }
    /// What each uid holds, for those holding anything.
    public var usageByUID: [UInt32: Usage] { state.withLockedValue { $0.byUID } }

    /// The `count` uids nearest to a cap: by the larger of their share of the connection cap and of the call cap.
    public func nearestToCaps(_ limits: PerUIDLimits, count: Int = 5) -> [(uid: UInt32, usage: Usage)] {
        let usage = usageByUID
        func share(_ entry: Usage) -> Double {
            max(Double(entry.connections) / Double(max(1, limits.maxConnections)),
                Double(entry.calls) / Double(max(1, limits.maxCalls)))
        }
        return usage.sorted { share($0.value) > share($1.value) || share($0.value) == share($1.value) && $0.key < $1.key }
            .prefix(count).map { (uid: $0.key, usage: $0.value) }
    }
}

/// Per-uid fairness on the API (discoverd.conf `[limits]`): what one user may hold of the daemon.
public struct PerUIDLimits: Sendable, Equatable {
    /// Connections one uid may have open; one more gets `TooManyConnections` (scope `uid`).
    public var maxConnections: Int
    /// Calls one uid may have queued or running over all its connections (streams included); one more gets
    /// `TooManyCalls`.
    public var maxCalls: Int
    /// Connections above `max-connections` that only root and the admin group may take, so that Reload and Status
    /// get through when everyone else's are taken.
    public var reserve: Int

    /// Creates limits; the defaults are those of discoverd.conf.
    public init(maxConnections: Int = 256, maxCalls: Int = 1024, reserve: Int = 16) {
        self.maxConnections = maxConnections
        self.maxCalls = maxCalls
        self.reserve = reserve
    }
}
