import DNSCore
import DNSStub
import DiscoverAPI
import DiscoverServer
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import Resolver
import WideAreaDiscovery

/// The configuration in effect, and how a new one gets into the running components.
///
/// Reload (SIGHUP or `io.discoverd.Daemon.Reload`) reads the file again, with the command-line flags on top as at
/// start-up, and pushes every setting that can change live into its component: upstreams, timeout and attempts into
/// the ``UpstreamClient``; the cache rules into ``OptimisticCache/updatePolicy(_:)``; `optimistic` into the Resolver
/// adapter; the log level; the limits into the ``VarlinkServer`` (for connections accepted afterwards); the groups
/// into ``AccessControl``; the persist interval; the static services; and the DNS stub's `[stub]` settings (its
/// answers follow `optimistic` too; `max-tcp`, `max-tcp-per-address` and `tcp-idle-timeout` apply to connections
/// accepted afterwards, `cookies` at once). `socket`, `state-dir` and `[stub] listen` need a restart: a change is logged by
/// name and the running value kept. A file with an error changes nothing.
final class RunningConfiguration: Sendable {
    /// What a reload reaches.
    struct Components: Sendable {
        let upstreams: UpstreamClient
        let resolver: DNSResolver
        let resolverOptions: ResolverMethods.Options
        let server: VarlinkServer
        let access: AccessControl
        let staticServices: StaticServices
        let persistence: CachePersistenceService
        let stub: StubResponder
        let wideArea: UnicastDNSSD
        let logLevel: RuntimeLogLevel
    }

    private let current: NIOLockedValueBox<DaemonConfiguration>
    private let path: String?
    private let load: @Sendable () throws(ConfigurationError) -> DaemonConfiguration
    let components: Components
    private let logger: Logger

    /// - Parameters:
    ///   - configuration: what the components were built with.
    ///   - path: the configuration file, nil when the daemon runs without one (then there is nothing to reload).
    ///   - load: reads the file and applies the command-line flags, as at start-up.
    init(
        _ configuration: DaemonConfiguration, path: String?,
        load: @escaping @Sendable () throws(ConfigurationError) -> DaemonConfiguration, components: Components,
        logger: Logger
    ) {
        self.current = NIOLockedValueBox(configuration)
        self.path = path
        self.load = load
        self.components = components
        self.logger = logger
    }

    /// The configuration in effect.
    var configuration: DaemonConfiguration { current.withLockedValue { $0 } }

    /// Settings that only take effect at start-up, by their name in the file.
    static let restartOnly: [(name: String, value: KeyPath<DaemonConfiguration, String> & Sendable)] = [
        ("[daemon] socket", \.socketPath), ("[daemon] state-dir", \.stateDirectory),
    ]

    /// Reads the configuration again and puts it in effect.
    /// - Throws: ``ConfigurationError`` (answered as `InvalidConfiguration`) when the file has an error; nothing
    ///   changed then.
    func reload() async throws {
        guard let path else {
            logger.notice("no configuration file: nothing to reload")
            return
        }
        let load = self.load
        // Reading the file is I/O: not on an event loop.
        let fresh = try await NIOThreadPool.singleton.runIfActive { () throws(ConfigurationError) in try load() }
        apply(fresh)
        let configuration = self.configuration
        await components.access.configure(
            adminGroup: configuration.adminGroup, advertiseGroup: configuration.advertiseGroup,
            publishGroup: configuration.publishGroup)
        await components.staticServices.sync(directory: configuration.servicesDirectory)
        logger.info("configuration reloaded", metadata: ["file": "\(path)"])
    }

    /// Pushes the settings that change live into the components; keeps the restart-only ones.
    private func apply(_ fresh: DaemonConfiguration) {
        var next = fresh
        let previous = current.withLockedValue { current in
            defer { current = next }
            for setting in Self.restartOnly where fresh[keyPath: setting.value] != current[keyPath: setting.value] {
                logger.warning(
                    "setting changed in the file needs a restart; keeping the running value",
                    metadata: [
                        "setting": "\(setting.name)", "running": "\(current[keyPath: setting.value])",
                        "file": "\(fresh[keyPath: setting.value])",
                    ])
            }
            if fresh.stubListen != current.stubListen {
                logger.warning(
                    "setting changed in the file needs a restart; keeping the running value",
                    metadata: [
                        "setting": "[stub] listen", "running": "\(current.stubListen.map(\.description))",
                        "file": "\(fresh.stubListen.map(\.description))",
                    ])
            }
            next.socketPath = current.socketPath
            next.stateDirectory = current.stateDirectory
            next.stubListen = current.stubListen
            return current
        }
        components.logLevel.current = next.logLevel
        components.upstreams.reconfigure(
            upstreams: next.upstreamServers,
            configuration: next.upstreamConfiguration)
        components.resolver.cache.updatePolicy(next.cachePolicy)
        components.resolver.updateLimits(next.queryLimits)
        // The anchors were read (and checked) when the file was loaded; verdicts cached so far stand until they
        // expire or `discover flush`.
        components.resolver.validator.update(mode: next.dnssec, anchors: (try? next.trustAnchors()) ?? .builtIn)
        let resolver = components.resolver
        Task { await resolver.probeDNSSEC() }
        components.resolverOptions.optimistic = next.optimistic
        components.server.updateLimits(
            maxConnections: next.maxConnections, connection: next.connectionLimits, perUID: next.perUID)
        components.persistence.interval = next.persistIntervalSeconds
        components.stub.update(next.stubSettings)
        components.wideArea.update(next.wideAreaSettings)
        if previous.upstreams != next.upstreams {
            logger.info("upstreams changed", metadata: ["upstreams": "\(next.upstreams.map(\.description))"])
        }
    }

    /// The settings the components use right now, for `Status`.
    var settings: DaemonSettings {
        let configuration = self.configuration
        let policy = components.resolver.cache.policy
        let upstream = components.upstreams.configuration
        let server = components.server.currentSettings
        return DaemonSettings(
            logLevel: components.logLevel.current.rawValue, adminGroup: components.access.adminGroup?.name,
            advertiseGroup: components.access.advertiseGroup?.name, servicesDir: configuration.servicesDirectory,
            maxConnections: server.maxConnections, maxMessageSize: server.limits.maxMessageSize,
            maxQueuedCalls: server.limits.maxQueuedCalls, maxSendBuffer: server.limits.maxSendBuffer,
            timeoutMs: Int(upstream.timeout / .milliseconds(1)),
            attempts: upstream.attempts, optimistic: components.resolverOptions.optimistic,
            staleTtl: Int(policy.staleAnswerTTL), maxStale: Int(policy.maxStale),
            refreshRetry: Int(policy.refreshRetryInterval), noOptimisticDomains: policy.optOutDomains,
            cacheSize: policy.maxEntries, persistInterval: components.persistence.interval,
            publishGroup: components.access.publishGroup?.name,
            maxConnectionsPerUid: server.perUID?.maxConnections, maxCallsPerUid: server.perUID?.maxCalls,
            reservedConnections: server.perUID?.reserve, maxInputBuffer: server.limits.maxInputBuffer,
            idleTimeout: server.limits.idleTimeout.map { Int($0.nanoseconds / 1_000_000_000) } ?? 0)
    }

    /// The uids nearest to a per-uid cap, for `Status`.
    var nearestToCaps: [UIDUsage] {
        components.server.nearestToCaps().map {
            UIDUsage(uid: Int($0.uid), connections: $0.usage.connections, calls: $0.usage.calls)
        }
    }

    /// The upstreams the resolver asks now.
    var upstreams: [String] { components.upstreams.upstreams.map(\.description) }
}

extension DaemonConfiguration {
    /// The cache rules of `[resolver]`.
    var cachePolicy: CachePolicy {
        var policy = CachePolicy()
        policy.staleAnswerTTL = UInt32(staleTTL)
        policy.maxStale = UInt32(maxStaleSeconds)
        policy.refreshRetryInterval = UInt32(refreshRetrySeconds)
        policy.maxEntries = cacheSize
        policy.optOutDomains = noOptimisticDomains
        return policy
    }

    /// Timeout and attempts of `[resolver]`.
    var upstreamConfiguration: UpstreamClient.Configuration {
        UpstreamClient.Configuration(
            timeout: .milliseconds(queryTimeoutMs), attempts: attempts, maxSockets: upstreamSockets,
            encryption: encryption, caFile: caFile, idleTimeout: .seconds(encryptedIdleSeconds), ddr: ddr)
    }

    /// The per-connection limits of `[limits]`.
    var connectionLimits: ConnectionLimits {
        ConnectionLimits(
            maxMessageSize: maxMessageSize, maxQueuedCalls: maxQueuedCalls, maxSendBuffer: maxSendBuffer,
            maxInputBuffer: maxInputBuffer, idleTimeout: idleTimeoutSeconds == 0 ? nil : .seconds(Int64(idleTimeoutSeconds)))
    }
}
