import NIOConcurrencyHelpers
import NIOCore

/// The open connections and live streams, shared by the listener and `Daemon.Status`.
public final class ConnectionRegistry: Sendable {
    private struct State {
        var nextID: UInt64 = 1
        var channels: [UInt64: any Channel] = [:]
        var streams = 0
    }

    private let state = NIOLockedValueBox(State())

    /// An empty registry.
    public init() {}

    /// Registers a new connection and returns its id, or nil when `limit` connections are open.
    func admit(_ channel: any Channel, limit: Int) -> UInt64? {
        state.withLockedValue { state in
            guard state.channels.count < limit else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.channels[id] = channel
            return id
        }
    }

    func remove(_ id: UInt64) { _ = state.withLockedValue { $0.channels.removeValue(forKey: id) } }
    func channels() -> [any Channel] { state.withLockedValue { Array($0.channels.values) } }
    func addStreams(_ delta: Int) { state.withLockedValue { $0.streams += delta } }

    /// Connections open now.
    public var connectionCount: Int { state.withLockedValue { $0.channels.count } }
    /// Streaming calls (`more`) running now.
    public var streamCount: Int { state.withLockedValue { $0.streams } }
}
