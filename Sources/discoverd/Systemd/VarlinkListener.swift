import ServiceLifecycle

/// Runs the varlink server and tells ``DaemonReadiness`` once its socket is bound (or adopted from socket
/// activation), so the daemon says it started only when clients can connect.
struct VarlinkListener: ServiceLifecycle.Service {
    let server: VarlinkServer
    let readiness: DaemonReadiness
    /// The socket's path, for the status line.
    let address: String

    func run() async throws {
        let channel = try await server.bind()
        readiness.listening(ActivatedSockets.varlinkName, at: address)
        try await server.serve(channel)
    }
}
