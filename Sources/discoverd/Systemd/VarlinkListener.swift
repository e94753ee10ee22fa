import DiscoverServer
import NIOCore
import ServiceLifecycle

/// Runs the varlink server and tells ``DaemonReadiness`` once its socket is bound (or adopted from socket
/// activation), so the daemon says it started only when clients can connect.
struct VarlinkListener: Service {
    let server: VarlinkServer
    /// The listening socket passed by socket activation: served as it is, its file neither created nor removed.
    let passed: CInt?
    let readiness: DaemonReadiness
    /// The socket's path, for the status line.
    let address: String

    func run() async throws {
        let channel: any Channel
        if let passed {
            channel = try await server.adopt(descriptor: passed)
        } else {
            channel = try await server.bind()
        }
        readiness.listening(ActivatedSockets.varlinkName, at: address)
        try await server.serve(channel, removingSocketFile: passed == nil)
    }
}
