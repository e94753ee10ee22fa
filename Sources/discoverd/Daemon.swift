import DNSStub
import DiscoverAPI
import DiscoverServer
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Discovery
import Resolver
import ServiceLifecycle
import WideAreaDiscovery

/// Wires the components together and runs them in a ServiceGroup until SIGTERM or SIGINT.
struct Daemon {
    let configuration: DaemonConfiguration
    let logger: Logger
    let state: DaemonState
    let registry = ConnectionRegistry()

    init(configuration: DaemonConfiguration, configurationPath: String?, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.state = DaemonState(configuration: configuration, configurationPath: configurationPath, registry: registry)
    }

    func run() async throws {
        var routes = RouteTable()
        let state = self.state
        let logger = self.logger
        // One Avahi client for the whole daemon; it waits for avahi-daemon when it is absent.
        let discovery = try DiscoveryService(logger: logger)
        let registrations = RegistrationTable()
        let staticServices = StaticServices(discovery: discovery, logger: logger)
        let access = AccessControl(logger: logger)
        await access.configure(adminGroup: configuration.adminGroup, advertiseGroup: configuration.advertiseGroup)
        let resolver = Self.makeResolver(configuration: configuration, logger: logger)
        // Unicast DNS-SD reads through the same optimistic cache; leftovers of a crashed run go first.
        let wideArea = WideAreaDiscovery(
            source: ResolverRecordSource(resolver: resolver), settings: configuration.wideAreaSettings,
            stateDirectory: configuration.stateDirectory, logger: logger)
        await wideArea.removeLeftovers()
        DiscoveryMethods.register(
            into: &routes, discovery: discovery, registrations: registrations, access: access, wideArea: wideArea)
        staticServices.sync(directory: configuration.servicesDirectory)
        // A static service that could not be registered yet (avahi-daemon absent at start) is registered when
        // avahi-daemon appears; sync leaves registered ones alone.
        Task {
            for await avahiState in discovery.avahiStates where avahiState == .running {
                staticServices.sync(directory: state.configuration.servicesDirectory)
            }
        }

        // Filled in below once the stub exists; Reload pushes the stub's live settings into it.
        let stubUpdate = NIOLockedValueBox<(@Sendable (DaemonConfiguration) -> Void)?>(nil)
        let reload: @Sendable () async throws -> Void = {
            try Self.reloadConfiguration(state: state, logger: logger)
            let configuration = state.configuration
            await access.configure(adminGroup: configuration.adminGroup, advertiseGroup: configuration.advertiseGroup)
            staticServices.sync(directory: configuration.servicesDirectory)
            stubUpdate.withLockedValue { $0 }?(configuration)
            wideArea.update(configuration.wideAreaSettings)
        }
        state.update { $0.reload = reload }
        DaemonMethods.register(into: &routes, control: state, access: access)
        let resolverOptions = ResolverMethods.Options(optimistic: configuration.optimistic)
        ResolverMethods.register(into: &routes, resolver: resolver, options: resolverOptions, access: access)
        state.update { mutable in
            mutable.avahi = {
                switch discovery.avahiState {
                case .running: .running
                case .connecting: .connecting
                case .unavailable: .unavailable
                }
            }
            mutable.registrations = { registrations.count + staticServices.count }
            mutable.cache = {
                let stats = resolver.cache.statistics
                return DiscoverAPI.CacheStatistics(
                    entries: stats.entries, hits: Int(stats.hits), misses: Int(stats.misses),
                    staleServed: Int(stats.staleServed), refreshes: Int(stats.refreshes),
                    refreshFailures: Int(stats.refreshFailures))
            }
        }
        let persistence = CachePersistenceService(
            resolver: resolver, directory: URL(fileURLWithPath: configuration.stateDirectory),
            interval: configuration.persistIntervalSeconds > 0 ? .seconds(configuration.persistIntervalSeconds) : nil,
            logger: logger)
        persistence.load()

        // The DNS stub: the second front door to the same cache. Bound before the group runs, so "started" and
        // readiness come after every socket; a port it cannot have is a warning, never fatal.
        let stubResponder = StubResponder(
            resolver: resolver,
            local: AvahiLocalRecords(discovery: discovery, timeout: configuration.stubSettings.localTimeout),
            settings: configuration.stubSettings,
            logger: logger)
        let stub = DNSStubServer(responder: stubResponder, settings: configuration.stubSettings, logger: logger)
        await stub.bind()
        stubUpdate.withLockedValue { $0 = { configuration in stubResponder.update(configuration.stubSettings) } }
        state.update { mutable in
            mutable.stub = { StubStatus(listening: stub.listening, statistics: stubResponder.statistics) }
        }

        let router = MethodRouter(routes, logger: logger)
        let server = VarlinkServer(
            settings: .init(
                socketPath: configuration.socketPath, maxConnections: configuration.maxConnections,
                limits: .init(
                    maxMessageSize: configuration.maxMessageSize, maxQueuedCalls: configuration.maxQueuedCalls,
                    maxSendBuffer: configuration.maxSendBuffer)),
            router: router, registry: registry, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        // The server binds inside the group, after ServiceGroup has taken over SIGTERM/SIGINT: a signal that
        // arrives as soon as the socket is visible still shuts down gracefully. A bind failure ends the group
        // with that error.
        let group = ServiceGroup(
            configuration: .init(
                // Shut down in reverse order: stop serving clients first, then save the cache.
                services: [
                    .init(service: persistence),
                    .init(service: DiscoveryShutdown(discovery: discovery, wideArea: wideArea)),
                    .init(service: ReloadOnHangup(logger: logger, reload: reload)),
                    .init(service: stub),
                    .init(service: server),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        logger.info(
            "discoverd started",
            metadata: [
                "version": "\(DiscoverdVersion.current)",
                "upstreams": "\(configuration.upstreams.map(\.description).joined(separator: " "))",
            ])
        try await group.run()
        logger.info("discoverd stopped")
    }

    static func makeResolver(configuration: DaemonConfiguration, logger: Logger) -> DNSResolver {
        var policy = CachePolicy()
        policy.staleAnswerTTL = UInt32(configuration.staleTTL)
        policy.maxStale = UInt32(configuration.maxStaleSeconds)
        policy.refreshRetryInterval = UInt32(configuration.refreshRetrySeconds)
        policy.maxEntries = configuration.cacheSize
        policy.optOutDomains = configuration.noOptimisticDomains
        let transport = UpstreamClient(
            upstreams: configuration.upstreams.map { UpstreamServer(host: $0.host, port: $0.port) },
            configuration: UpstreamClient.Configuration(
                timeout: .milliseconds(configuration.queryTimeoutMs), attempts: configuration.attempts),
            logger: logger)
        return DNSResolver(transport: transport, configuration: .init(cachePolicy: policy), logger: logger)
    }

    /// Re-reads the configuration file; settings that need a restart (socket, limits) are reported, not applied.
    static func reloadConfiguration(state: DaemonState, logger: Logger) throws {
        guard let path = state.configurationPath else { return }
        let fresh: DaemonConfiguration
        do {
            fresh = try DaemonConfiguration.load(path: path)
        } catch {
            throw error
        }
        state.update { mutable in
            var next = mutable.configuration
            next.adminGroup = fresh.adminGroup
            next.advertiseGroup = fresh.advertiseGroup
            next.servicesDirectory = fresh.servicesDirectory
            if !fresh.upstreams.isEmpty { next.upstreams = fresh.upstreams }
            next.stubAllow = fresh.stubAllow
            next.stubLocal = fresh.stubLocal
            next.wideAreaBrowseDomains = fresh.wideAreaBrowseDomains
            next.wideAreaUpdateServer = fresh.wideAreaUpdateServer
            next.wideAreaKeys = fresh.wideAreaKeys
            next.wideAreaTTL = fresh.wideAreaTTL
            if fresh.stubListen != next.stubListen {
                logger.warning(
                    "[stub] listen changed: the new addresses take effect at the next restart",
                    metadata: ["in-effect": "\(next.stubListen.map(\.description))"])
            }
            mutable.configuration = next
        }
        logger.info("configuration reloaded", metadata: ["file": "\(path)"])
    }
}

/// Withdraws every advertisement and closes the Avahi client at shutdown, after clients are gone.
private struct DiscoveryShutdown: ServiceLifecycle.Service {
    let discovery: DiscoveryService
    let wideArea: WideAreaDiscovery

    func run() async throws {
        try? await gracefulShutdown()
        discovery.shutdown()
        // Withdrawn wide-area registrations are deleted from their zones before the process ends.
        await wideArea.shutdown()
    }
}
