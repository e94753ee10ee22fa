import DNSCore
import DNSSD
import DNSSDModel
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
import UnixSignals
import WideAreaDiscovery

/// Wires the components together and runs them in a ServiceGroup until SIGTERM or SIGINT.
struct Daemon {
    let configuration: DaemonConfiguration
    let configurationPath: String?
    /// Reads the configuration file with the flags on top, as at start-up (for Reload).
    let loadConfiguration: @Sendable () throws(ConfigurationError) -> DaemonConfiguration
    let logLevel: RuntimeLogLevel
    let logger: Logger
    /// SIGHUP, trapped before the configuration was read (see ReloadOnHangup).
    let hangups: UnixSignalsSequence
    let registry = ConnectionRegistry()
    /// Sockets passed by socket activation (`Config/discoverd.socket`, `Config/discoverd-dns.socket`).
    var activated: ActivatedSockets = .none

    func run() async throws {
        var routes = RouteTable()
        let logger = self.logger
        // One Avahi client for the whole daemon; it waits for avahi-daemon when it is absent. Browse events are not
        // bounded here: the Discovery adapter forwards each at once, and max-send-buffer on the connection is the
        // one slow-reader limit (a reader past it gets SubscriberTooSlow).
        let discovery = try DiscoveryService(logger: logger, subscriberBufferLimit: .max)
        try discovery.start()
        let registrations = RegistrationTable()
        let staticServices = StaticServices(discovery: discovery, logger: logger)
        let access = AccessControl(logger: logger)
        await access.configure(adminGroup: configuration.adminGroup, advertiseGroup: configuration.advertiseGroup,
            publishGroup: configuration.publishGroup)

        let upstreams = UpstreamClient(
            upstreams: configuration.upstreamServers,
            configuration: configuration.upstreamConfiguration, logger: logger)
        let resolver = DNSResolver(
            transport: upstreams,
            configuration: .init(
                cachePolicy: configuration.cachePolicy, limits: configuration.queryLimits, dnssec: configuration.dnssec,
                trustAnchors: (try? configuration.trustAnchors()) ?? .builtIn),
            logger: logger)
        // allow-downgrade's evidence: one probe now, and again on Reload (docs/DNSSEC.md).
        Task { await resolver.probeDNSSECUntilKnown() }
        // Unicast DNS-SD reads through the same optimistic cache; leftovers of a crashed run go first.
        let wideArea = UnicastDNSSD(
            source: ResolverRecordSource(resolver: resolver), settings: configuration.wideAreaSettings,
            stateDirectory: configuration.stateDirectory, logger: logger)
        await wideArea.removeLeftovers()
        DiscoveryMethods.register(
            into: &routes, discovery: ServiceDiscovery(mdns: discovery, unicast: wideArea),
            registrations: registrations, access: access)
        let resolverOptions = ResolverMethods.Options(optimistic: configuration.optimistic)
        ResolverMethods.register(into: &routes, resolver: resolver, options: resolverOptions, access: access)

        let state = DaemonState(
            registry: registry, discovery: discovery, resolver: resolver,
            registrations: { registrations.count + staticServices.count })
        DaemonMethods.register(into: &routes, control: state, access: access)

        let persistence = CachePersistenceService(
            resolver: resolver, directory: URL(fileURLWithPath: configuration.stateDirectory),
            intervalSeconds: configuration.persistIntervalSeconds, logger: logger)
        await persistence.load()

        // The DNS stub: the second front door to the same cache. Bound before the group runs, so "started" and
        // readiness come after every socket; a port it cannot have is a warning, never fatal.
        let stubResponder = StubResponder(
            resolver: resolver,
            local: AvahiLocalRecords(discovery: discovery),
            settings: configuration.stubSettings,
            logger: logger)
        // Sockets named `dns` (Config/discoverd-dns.socket) replace the configured listen addresses: the
        // unprivileged service could not bind port 53 itself.
        let dnsSockets = activated.named(ActivatedSockets.dnsName).filter {
            $0.family == AF_INET || $0.family == AF_INET6
        }
        var stubSettings = configuration.stubSettings
        if !dnsSockets.isEmpty { stubSettings.listen = [] }
        let stub = DNSStubServer(
            responder: stubResponder, settings: stubSettings,
            inherited: dnsSockets.map { .init(descriptor: $0.fd, isStream: $0.isStream) }, logger: logger)
        await stub.bind()

        var serverSettings = VarlinkServer.Settings(
            socketPath: configuration.socketPath, maxConnections: configuration.maxConnections,
            limits: configuration.connectionLimits, perUID: configuration.perUID)
        // A passed varlink socket is served instead of binding the configured path; its path names it in logs.
        if let passed = activated.varlink { serverSettings.socketPath = passed.address }
        // Passed descriptors nothing serves are closed with a warning.
        activated.closeUnclaimed((activated.varlink.map { [$0] } ?? []) + dnsSockets, logger: logger)
        let server = VarlinkServer(
            settings: serverSettings, router: MethodRouter(routes, logger: logger), registry: registry,
            group: MultiThreadedEventLoopGroup.singleton, logger: logger,
            mayUseReserve: { access.mayUseReserve($0) })
        let notifier = SystemdNotifier()
        let readiness = DaemonReadiness(
            listeners: [ActivatedSockets.varlinkName], notifier: notifier, logger: logger,
            startedMetadata: [
                "version": "\(DiscoverdVersion.current)",
                "upstreams": "\(configuration.upstreams.map(\.description).joined(separator: " "))",
            ])
        // The stub is bound already (above); a stub that could bind nothing is no reason to wait.
        if !stub.listening.isEmpty { readiness.listening("dns", at: stub.listening.joined(separator: " ")) }
        let running = RunningConfiguration(
            configuration, path: configurationPath, load: loadConfiguration,
            components: .init(
                upstreams: upstreams, resolver: resolver, resolverOptions: resolverOptions, server: server,
                access: access, staticServices: staticServices, persistence: persistence, stub: stubResponder,
                wideArea: wideArea, logLevel: logLevel),
            logger: logger)
        state.attach(running) { StubStatus(server: stub, responder: stubResponder) }

        await staticServices.sync(directory: configuration.servicesDirectory)

        // The server binds inside the group, after ServiceGroup has taken over SIGTERM/SIGINT: a signal that
        // arrives as soon as the socket is visible still shuts down gracefully. A bind failure ends the group
        // with that error.
        let group = ServiceGroup(
            configuration: .init(
                // Shut down in reverse order: stop serving clients first, then save the cache.
                services: [
                    .init(service: persistence),
                    .init(
                        service: DiscoveryLifecycle(
                            discovery: discovery, wideArea: wideArea,
                            syncStaticServices: {
                                await staticServices.sync(directory: running.configuration.servicesDirectory)
                            })),
                    .init(service: ReloadOnHangup(hangups: hangups, logger: logger, reload: { try await running.reload() })),
                    .init(service: stub),
                    .init(
                        service: VarlinkListener(
                            server: server, passed: activated.varlink?.fd, readiness: readiness,
                            address: serverSettings.socketPath)),
                    // Last, so it is the first told of a shutdown and sends STOPPING=1 at once.
                    .init(
                        service: SystemdService(
                            notifier: notifier, watchdogInterval: SystemdNotifier.watchdogInterval(),
                            readiness: readiness, avahiStates: discovery.avahiStates)),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        // "discoverd started" is logged by `readiness` once every socket is bound.
        try await group.run()
        logger.info("discoverd stopped")
    }
}

/// While the daemon runs: registers the static services that could not be registered yet whenever avahi-daemon
/// (re)appears (sync leaves registered ones alone). At shutdown, after clients are gone: withdraws every
/// advertisement, closes the Avahi client, and waits for wide-area deletions.
private struct DiscoveryLifecycle: Service {
    let discovery: DiscoveryService
    let wideArea: UnicastDNSSD
    let syncStaticServices: @Sendable () async -> Void

    func run() async throws {
        let discovery = self.discovery
        let sync = self.syncStaticServices
        // Structured: this loop ends when the group shuts down, not when the process does.
        for await avahiState in discovery.avahiStates.cancelOnGracefulShutdown() where avahiState == .running {
            await sync()
        }
        // Shutting down takes Avahi's lock and joins its poll thread: not on an event loop.
        _ = try? await discovery.onAvahiThread { discovery.shutdown() }
        // Withdrawn wide-area registrations are deleted from their zones before the process ends.
        await wideArea.shutdown()
    }
}
