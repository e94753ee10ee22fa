import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration on SIGHUP (what `systemctl reload` sends) until the daemon shuts down.
struct ReloadOnHangup: Service {
    let logger: Logger
    let reload: @Sendable () async throws -> Void

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangups.cancelOnGracefulShutdown() {
            do {
                try await reload()
            } catch {
                logger.error("reload failed; keeping the running configuration", metadata: ["error": "\(error)"])
            }
        }
    }
}
