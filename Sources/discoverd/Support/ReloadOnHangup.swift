import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration on SIGHUP (what `systemctl reload` sends) until the daemon shuts down.
///
/// `hangups` is made (which traps SIGHUP) first thing at start-up, not when the group starts this service: a reload
/// sent as soon as the daemon is reachable met SIGHUP's default action, which terminates, while the group was still
/// starting it.
struct ReloadOnHangup: Service {
    let hangups: UnixSignalsSequence
    let logger: Logger
    let reload: @Sendable () async throws -> Void

    func run() async throws {
        for await _ in hangups.cancelOnGracefulShutdown() {
            do {
                try await reload()
            } catch {
                logger.error("reload failed; keeping the running configuration", metadata: ["error": "\(error)"])
            }
        }
    }
}
