import Logging
import NIOConcurrencyHelpers

/// Says the daemon has started once every listener is bound, never before: logs "discoverd started" and
/// sends `READY=1` with a `STATUS=` line. A daemon that cannot bind (another one holds the socket) never
/// says it started. Afterwards it keeps the status line current.
final class DaemonReadiness: Sendable {
    private struct State {
        var pending: Set<String>
        /// `NAME ADDRESS` of each bound listener, in the order they were bound.
        var listening: [String] = []
        var avahi = "connecting"
        var ready = false
    }

    private let state: NIOLockedValueBox<State>
    private let notifier: SystemdNotifier?
    private let logger: Logger
    private let startedMetadata: Logger.Metadata

    /// - Parameters:
    ///   - listeners: the names of the listeners that must be bound first (`varlink`; `dns` with the stub).
    ///   - notifier: where `READY=1` and `STATUS=` go; nil outside systemd.
    ///   - startedMetadata: logged with "discoverd started" (version, upstreams).
    init(listeners: Set<String>, notifier: SystemdNotifier?, logger: Logger, startedMetadata: Logger.Metadata) {
        self.state = NIOLockedValueBox(State(pending: listeners))
        self.notifier = notifier
        self.logger = logger
        self.startedMetadata = startedMetadata
    }

    /// Records that listener `name` is bound at `address`; the last one expected makes the daemon ready.
    func listening(_ name: String, at address: String) {
        let (becameReady, status, sockets) = state.withLockedValue { state in
            state.listening.append("\(name) \(address)")
            state.pending.remove(name)
            let becameReady = !state.ready && state.pending.isEmpty
            if becameReady { state.ready = true }
            return (becameReady, Self.statusLine(state), state.listening.joined(separator: ", "))
        }
        guard becameReady else { return }
        var metadata = startedMetadata
        metadata["listening"] = "\(sockets)"
        logger.info("discoverd started", metadata: metadata)
        notifier?.ready(status: status)
    }

    /// Records the Avahi client's state for the status line.
    func avahi(_ avahiState: String) {
        let (ready, status) = state.withLockedValue { state in
            state.avahi = avahiState
            return (state.ready, Self.statusLine(state))
        }
        // Before READY=1 the status line comes with it.
        if ready { notifier?.status(status) }
    }

    /// What `systemctl status` shows, e.g. `Serving varlink /run/discoverd/io.discoverd; avahi-daemon running`.
    var statusLine: String { state.withLockedValue { Self.statusLine($0) } }

    private static func statusLine(_ state: State) -> String {
        "Serving \(state.listening.joined(separator: ", ")); avahi-daemon \(state.avahi)"
    }
}
