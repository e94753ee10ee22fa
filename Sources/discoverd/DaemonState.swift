import DNSCore
import DNSStub
import DiscoverAPI
import DiscoverServer
import Discovery
import Foundation
import NIOConcurrencyHelpers
import Resolver

/// What `io.discoverd.Daemon` reports and does: `Status` from the running components, `Reload` through
/// ``RunningConfiguration``.
final class DaemonState: DaemonControl {
    let startedAt = ContinuousClock.now
    private let registry: ConnectionRegistry
    private let discovery: DiscoveryService
    private let resolver: DNSResolver
    private let registrations: @Sendable () -> Int
    /// Set once the server and the stub exist (the routes that report through this object are made before them).
    private let running = NIOLockedValueBox<RunningConfiguration?>(nil)
    /// The stub's status, once the stub exists. The closure sits in a struct: a bare function type as the box's value
    /// is stored at the generic representation, and each `withLockedValue { $0 }` passed it `inout` through a pair of
    /// reabstraction thunks and stored the wrapped closure back, so every Status call added two thunks to it
    /// (64 bytes kept) and one more level to the recursion that calling it takes (200 000 Status calls: 13 MB of
    /// thunks and a 3 MB deep stack; the abuse soak's "per-connection leak").
    private struct StubReporter: Sendable {
        let status: @Sendable () -> StubStatus?
    }
    private let stub = NIOLockedValueBox(StubReporter { nil })

    init(
        registry: ConnectionRegistry, discovery: DiscoveryService, resolver: DNSResolver,
        registrations: @escaping @Sendable () -> Int
    ) {
        self.registry = registry
        self.discovery = discovery
        self.resolver = resolver
        self.registrations = registrations
    }

    /// Completes the state: the configuration in effect, and the DNS stub's status.
    func attach(_ configuration: RunningConfiguration, stub: @escaping @Sendable () -> StubStatus?) {
        running.withLockedValue { $0 = configuration }
        attach(stub: stub)
    }

    /// Sets where Status reads the stub's status from.
    func attach(stub: @escaping @Sendable () -> StubStatus?) {
        self.stub.withLockedValue { $0 = StubReporter(status: stub) }
    }

    func status() -> StatusReply {
        let running = self.running.withLockedValue { $0 }
        let stub = self.stub.withLockedValue { $0 }.status
        let uptime = ContinuousClock.now - startedAt
        let stats = resolver.cache.statistics
        return StatusReply(
            version: DiscoverdVersion.current, uptimeSeconds: Int(uptime.components.seconds),
            avahi: discovery.avahiState.wire,
            upstreams: running?.upstreams ?? [],
            cache: CacheStatistics(
                entries: stats.entries, hits: Int(stats.hits), misses: Int(stats.misses),
                staleServed: Int(stats.staleServed), refreshes: Int(stats.refreshes),
                refreshFailures: Int(stats.refreshFailures)),
            connections: registry.connectionCount, subscriptions: registry.streamCount,
            registrations: registrations(), stub: stub(), settings: running?.settings,
            upstreamQueries: upstreamQueries(), nearestToCaps: running?.nearestToCaps,
            upstreamServers: upstreamServers(), dnssec: dnssecStatus())
    }

    /// The validator's mode, the probe's finding and the verdict counts.
    private func dnssecStatus() -> DNSSECValidationStatus {
        let stats = resolver.validator.currentStatistics
        return DNSSECValidationStatus(
            mode: stats.mode.rawValue, upstreams: stats.upstreams.rawValue, secure: Int(stats.secure),
            insecure: Int(stats.insecure), bogus: Int(stats.bogus), lastBogusName: stats.lastBogusName,
            lastBogusReason: stats.lastBogusReason,
            upstreamStates: stats.upstreamStates.entries.map {
                DNSSECUpstreamState(
                    server: $0.server, state: $0.capability.rawValue, evidence: $0.evidence,
                    sinceSeconds: $0.since.map { max(0, Int(Date().timeIntervalSince($0))) })
            })
    }

    /// Every upstream as the transport reports it.
    private func upstreamServers() -> [UpstreamServerStatus]? {
        guard let transport = running.withLockedValue({ $0 })?.components.upstreams else { return nil }
        return transport.upstreamStatus.map { status in
            UpstreamServerStatus(
                server: status.server, transport: status.transport, origin: status.origin.rawValue, note: status.note,
                tlsVersion: status.tlsVersion, verifiedName: status.verifiedName, keyPin: status.keyPin,
                keyPinned: status.keyPinned, connectionsOpened: status.connectionsOpened,
                connectionsOpen: status.connectionsOpen, handshakes: status.handshakes, resumptions: status.resumptions,
                queries: status.queries, p50Ms: status.p50Milliseconds, failures: status.failures,
                lastFailure: status.lastFailure, errorAnswers: status.errorAnswers,
                lastErrorAnswer: status.lastErrorAnswer)
        }
    }

    /// The resolver's in-flight table and the transport's sockets.
    private func upstreamQueries() -> UpstreamQueryStatus {
        let table = resolver.inflightStatistics
        let transport = running.withLockedValue { $0 }?.components.upstreams
        return UpstreamQueryStatus(
            limit: table.limits.maxQueries, perClientLimit: table.limits.maxQueriesPerClient,
            socketLimit: transport?.configuration.maxSockets ?? 0, inflight: table.inflight, peak: table.peak,
            socketsOpen: transport?.socketsOpen ?? 0, refused: Int(table.refusedGlobal),
            refusedPerClient: Int(table.refusedPerClient), socketsRefused: Int(transport?.socketsRefused ?? 0),
            coalesced: Int(table.coalesced), busiestClient: table.busiestClient,
            busiestClientInflight: table.busiestClientInflight, scrubbedRecords: Int(resolver.scrubbedRecordCount))
    }

    func reload() async throws {
        try await running.withLockedValue { $0 }?.reload()
    }
}

extension ConfigurationError: VarlinkErrorConvertible {
    /// `io.discoverd.Daemon.InvalidConfiguration`, its reason naming file, line and key.
    var varlinkError: VarlinkError { .invalidConfiguration(reason: description) }
}
