import DiscoverAPI
import Foundation
import Logging

/// What `io.discoverd.Daemon` needs from the program that runs the server.
public protocol DaemonControl: Sendable {
    /// The daemon's state and the settings in effect, for `Status`.
    func status() -> StatusReply
    /// Re-reads the configuration and puts it in effect (`Reload`, like SIGHUP).
    /// - Throws: a ``VarlinkErrorConvertible`` error, `InvalidConfiguration` for a bad file (nothing changed then).
    func reload() async throws
}

/// `org.varlink.service` and `io.discoverd.Daemon`.
public enum DaemonMethods {
    /// Registers every method of both interfaces.
    public static func register(into routes: inout RouteTable, control: any DaemonControl, access: AccessControl) {
        routes.register(Methods.getInfo) { _, _ in
            ServiceInfo(
                vendor: "discoverd", product: "discoverd", version: DiscoverdVersion.current,
                url: "https://github.com/discoverd/discoverd", interfaces: InterfaceDescriptions.names)
        }
        routes.register(Methods.getInterfaceDescription) { parameters, _ in
            guard let text = InterfaceDescriptions.description(of: parameters.interface) else {
                throw VarlinkError.interfaceNotFound(parameters.interface)
            }
            return InterfaceDescriptionReply(description: text)
        }
        routes.register(Methods.status) { parameters, context in
            // Names looked up on the machine (the last bogus one, an upstream's last error answer) are for root and
            // the admin group; everyone else gets the counts.
            let names = await access.isAdmin(context.peer)
            let status = { names ? control.status() : control.status().withoutLookedUpNames() }
            guard context.more else { return status() }
            let interval = max(1, parameters.intervalMs ?? 1000)
            while true {
                try context.send(status())
                try await Task.sleep(for: .milliseconds(interval))
            }
        }
        routes.register(Methods.reload) { _, context in
            try await access.requireAdmin(context.peer)
            context.logAdminAction("reload requested")
            try await control.reload()
            return VarlinkEmpty()
        }
    }
}
