import DNSSDModel
import Discovery
import ServiceLifecycle

/// Keeps the service manager informed while the daemon runs: `WATCHDOG=1` every half `WatchdogSec=`, the
/// Avahi state in the status line, and `STOPPING=1` as soon as graceful shutdown begins.
///
/// Put it last in the ServiceGroup: services shut down in reverse order, so it hears of the shutdown first.
/// Without `$NOTIFY_SOCKET` it only waits for the shutdown.
struct SystemdService: Service {
    let notifier: SystemdNotifier?
    let watchdogInterval: Duration?
    let readiness: DaemonReadiness
    let avahiStates: AsyncStream<AvahiState>

    func run() async throws {
        guard let notifier else {
            try? await gracefulShutdown()
            return
        }
        let readiness = self.readiness
        let avahiStates = self.avahiStates
        await withTaskGroup(of: Void.self) { group in
            if let interval = watchdogInterval {
                // The pings run as tasks on the event loops: a stuck loop stops them and systemd restarts us.
                group.addTask {
                    while !Task.isCancelled {
                        notifier.watchdog()
                        try? await Task.sleep(for: interval)
                    }
                }
            }
            group.addTask {
                for await state in avahiStates { readiness.avahi(state.rawValue) }
            }
            try? await gracefulShutdown()
            notifier.stopping(status: "Shutting down")
            group.cancelAll()
        }
    }
}
