import DiscoverAPI
import Foundation
import Logging
import NIOConcurrencyHelpers

/// Facts `Daemon.Status` reports that live in other components; each component fills in its part.
final class DaemonState: Sendable {
    let startedAt = ContinuousClock.now
    let registry: ConnectionRegistry
    private let mutable: NIOLockedValueBox<Mutable>

    struct Mutable {
        var configuration: DaemonConfiguration
        var configurationPath: String?
        var avahi: @Sendable () -> AvahiState = { .unavailable }
        var cache: @Sendable () -> CacheStatistics = { CacheStatistics() }
        var registrations: @Sendable () -> Int = { 0 }
        var stub: @Sendable () -> StubStatus? = { nil }
    }

    init(configuration: DaemonConfiguration, configurationPath: String?, registry: ConnectionRegistry) {
        self.registry = registry
        self.mutable = NIOLockedValueBox(Mutable(configuration: configuration, configurationPath: configurationPath))
    }

    var configuration: DaemonConfiguration { mutable.withLockedValue { $0.configuration } }

    func update(_ body: (inout Mutable) -> Void) { mutable.withLockedValue(body) }

    func status() -> StatusReply {
        let (configuration, avahi, cache, registrations, stub) = mutable.withLockedValue {
            ($0.configuration, $0.avahi, $0.cache, $0.registrations, $0.stub)
        }
        let uptime = ContinuousClock.now - startedAt
        return StatusReply(
            version: DiscoverdVersion.current, uptimeSeconds: Int(uptime.components.seconds), avahi: avahi(),
            upstreams: configuration.upstreams.map(\.description), cache: cache(),
            connections: registry.connectionCount, subscriptions: registry.streamCount,
            registrations: registrations(), stub: stub())
    }

    var configurationPath: String? { mutable.withLockedValue { $0.configurationPath } }
}

/// `org.varlink.service` and `io.discoverd.Daemon`.
enum DaemonMethods {
    static func register(into routes: inout RouteTable, state: DaemonState, reload: @escaping @Sendable () async throws -> Void) {
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
            guard context.more else { return state.status() }
            let interval = max(1, parameters.intervalMs ?? 1000)
            while true {
                try context.send(state.status())
                try await Task.sleep(for: .milliseconds(interval))
            }
        }
        routes.register(Methods.reload) { _, context in
            try context.requirePrivilege(group: state.configuration.adminGroup)
            context.logAdminAction("reload requested")
            try await reload()
            return VarlinkEmpty()
        }
    }
}
