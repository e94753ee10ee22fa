import DiscoverAPI
import DiscoverServer
import Foundation
import Logging
import NIOConcurrencyHelpers

/// Facts `Daemon.Status` reports that live in other components; each component fills in its part.
final class DaemonState: DaemonControl {
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
        var reload: @Sendable () async throws -> Void = {}
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

    func reload() async throws {
        try await mutable.withLockedValue { $0.reload }()
    }

    var configurationPath: String? { mutable.withLockedValue { $0.configurationPath } }
}

extension ConfigurationError: VarlinkErrorConvertible {
    /// `io.discoverd.Daemon.InvalidConfiguration`, its reason naming file, line and key.
    var varlinkError: VarlinkError { .invalidConfiguration(reason: description) }
}
