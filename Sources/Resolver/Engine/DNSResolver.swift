import DNSCore
import Foundation
import Logging
import NIOCore
import Synchronization

/// Resolves HTTPS/SVCB records, addresses and connection plans, with optimistic DNS.
///
/// This is the in-process API that discoverd serves over varlink; programs can embed it directly.
/// Every lookup goes through the ``OptimisticCache``: a fresh entry answers at once, an expired one
/// answers at once as `expiredCache` while exactly one refresh runs (RFC 8767), a miss queries the
/// upstreams. Identical queries in flight are coalesced, so a thousand callers cost one upstream query.
public final class DNSResolver: Sendable {
    /// Settings of a resolver.
    public struct Configuration: Sendable {
        /// Cache rules: stale TTL, max stale, refresh retry, opt-out domains, size.
        public var cachePolicy: CachePolicy
        /// Bound on CNAME and AliasMode hops (RFC 9460 §2.4.2 asks for one).
        public var maximumAliasHops: Int
        /// TTL cached for a negative answer without SOA (RFC 2308 asks for SOA; some servers omit it).
        public var negativeTTLWithoutSOA: UInt32
        /// Bounds on upstream queries in flight (changed live with ``DNSResolver/updateLimits(_:)``).
        public var limits: QueryLimits
        /// Most targets a connection plan looks up besides the host itself (RFC 9460 §3 leaves the bound to
        /// clients; a zone can name hundreds).
        public var maximumPlanTargets: Int
        /// DNSSEC validation (docs/DNSSEC.md); off in the library by default, `allow-downgrade` in the daemon.
        public var dnssec: DNSSECMode
        /// Where validation starts (`.builtIn`: the root's KSKs and the default negative anchors).
        public var trustAnchors: TrustAnchors

        public init(
            cachePolicy: CachePolicy = CachePolicy(), maximumAliasHops: Int = AliasChain.defaultMaximumHops,
            negativeTTLWithoutSOA: UInt32 = 30, limits: QueryLimits = QueryLimits(), maximumPlanTargets: Int = 16,
            dnssec: DNSSECMode = .no, trustAnchors: TrustAnchors = .builtIn
        ) {
            self.dnssec = dnssec
            self.trustAnchors = trustAnchors
            self.cachePolicy = cachePolicy
            self.maximumAliasHops = maximumAliasHops
            self.negativeTTLWithoutSOA = negativeTTLWithoutSOA
            self.limits = limits
            self.maximumPlanTargets = maximumPlanTargets
        }
    }

    /// The answer cache (exposed for statistics, flushing and persistence).
    public let cache: OptimisticCache<CachedRRset>
    /// What `Alt-Svc` headers said, per origin.
    public let altSvc: AltSvcStore
    let transport: any DNSTransport

    /// Where a miss is best run (``DNSTransport/preferredExecutor``): the first upstream's kept connection's loop.
    public var preferredExecutor: (any TaskExecutor)? { transport.preferredExecutor }
    let configuration: Configuration
    private let logger: Logger
    /// The one in-flight table: one task per distinct upstream question (coalescing), bounded in all and per
    /// client; the refreshes `more` waits for are found here too.
    let inflight: InflightTable
    /// DNSSEC validation: verdicts on store, the anchors, the upstreams' capability, counters.
    public let validator: DNSSECValidator
    /// Records dropped from upstream replies by the bailiwick rules (``ReplyScrubber``).
    private let scrubbedRecords = Atomic<UInt64>(0)
    /// Bumped by every probe loop started (start, Reload): an older loop stops retrying.
    private let probeGeneration = Atomic<UInt64>(0)
    /// Recent negative-answer payloads (SOA and proofs), shared by every entry that carries the same one.
    private let negativePayloads = Mutex(NegativePayloads())

    /// Creates a resolver.
    /// - Parameters:
    ///   - transport: how queries reach upstreams (``UpstreamClient`` in production).
    ///   - configuration: cache and alias settings.
    ///   - clock: wall clock for TTLs (injectable for tests).
    ///   - logger: where resolution events are logged (debug level).
    public init(
        transport: any DNSTransport, configuration: Configuration = Configuration(),
        clock: any CacheClock = SystemCacheClock(), logger: Logger = Logger(label: "discoverd.resolver")
    ) {
        self.transport = transport
        self.configuration = configuration
        self.logger = logger
        self.cache = OptimisticCache(policy: configuration.cachePolicy, clock: clock)
        self.altSvc = AltSvcStore(clock: clock)
        self.inflight = InflightTable(limits: configuration.limits)
        self.validator = DNSSECValidator(
            mode: configuration.dnssec, anchors: configuration.trustAnchors,
            now: { Date(timeIntervalSince1970: clock.now()) })
    }

    /// Replaces the bounds on upstream queries (Reload); queries in flight are not affected.
    public func updateLimits(_ limits: QueryLimits) {
        inflight.limits = limits
    }

    /// The in-flight table's counters and limits, for Status.
    public var inflightStatistics: InflightStatistics { inflight.statistics }

    /// How many records the bailiwick rules dropped from upstream replies since start.
    public var scrubbedRecordCount: UInt64 { scrubbedRecords.load(ordering: .relaxed) }

    /// Creates a resolver that asks `upstreams` (IP addresses, port 53 unless given) over UDP with TCP fallback.
    ///
    /// ```swift
    /// let resolver = DNSResolver(upstreams: [UpstreamServer(host: "192.0.2.53")])
    /// if try await resolver.h3Capability(host: "example.com") { ... }
    /// ```
    public convenience init(upstreams: [UpstreamServer], configuration: Configuration = Configuration()) {
        self.init(transport: UpstreamClient(upstreams: upstreams), configuration: configuration)
    }

    // MARK: - Public API

    /// The HTTPS records of `name` for `port`, after RFC 9460 processing.
    /// - Throws: ``ResolverError``: `noSuchName` (NXDOMAIN), `timeout`, `upstreamFailure`, `invalidName`.
    public func resolveHTTPS(_ name: String, port: Int = 443, optimistic: Bool = true) async throws(ResolverError)
        -> HTTPSResolution
    {
        let start = ContinuousClock.now
        var (resolution, _) = try await https(name, port: port, optimistic: optimistic)
        resolution.elapsedMilliseconds = Self.milliseconds(since: start)
        return resolution
    }

    /// Like ``resolveHTTPS(_:port:optimistic:)``, and when the answer was stale, then the answer of the network
    /// (source `network`) with ``HTTPSResolution/refresh`` saying whether it `changed` the data or `confirmed` it
    /// (draft-gakiwate-dnsop-optimistic-dns: the network query is always made; the application needs the fresh
    /// answer only when it differs). A failed refresh ends the stream with its error.
    public func resolveHTTPSUpdates(_ name: String, port: Int = 443, optimistic: Bool = true)
        -> AsyncThrowingStream<HTTPSResolution, any Error>
    {
        updates(
            optimistic: optimistic,
            resolve: { [self] optimistic throws(ResolverError) in
                let start = ContinuousClock.now
                var (resolution, provenance) = try await https(name, port: port, optimistic: optimistic)
                resolution.elapsedMilliseconds = Self.milliseconds(since: start)
                return (resolution, provenance)
            },
            same: { stale, fresh in
                stale.bindings == fresh.bindings && stale.aliasChain == fresh.aliasChain
                    && stale.fallbackTarget == fresh.fallbackTarget && stale.note == fresh.note
            })
    }

    /// Like ``resolveAddresses(_:family:optimistic:)``, and when the answer was stale, then the network's answer
    /// marked `changed` or `confirmed`, as ``resolveHTTPSUpdates(_:port:optimistic:)`` does.
    public func resolveAddressesUpdates(_ name: String, family: AddressFamilies = .any, optimistic: Bool = true)
        -> AsyncThrowingStream<AddressResolution, any Error>
    {
        updates(
            optimistic: optimistic,
            resolve: { [self] optimistic throws(ResolverError) in
                let start = ContinuousClock.now
                let host = try Self.validate(name)
                let (addresses, provenance) = try await addresses(host, family: family, optimistic: optimistic)
                return (try Self.addressResolution(host, addresses, provenance, since: start), provenance)
            },
            same: { stale, fresh in Set(stale.addresses) == Set(fresh.addresses) })
    }

    /// The two-answer stream of optimistic DNS: the first answer, and after an expired one the network's, once the
    /// refreshes it started are done; when none could run (within the failure recheck interval), only the first.
    private func updates<R: RefreshableResolution>(
        optimistic: Bool,
        resolve: @escaping @Sendable (Bool) async throws(ResolverError) -> (R, Provenance),
        same: @escaping @Sendable (R, R) -> Bool
    ) -> AsyncThrowingStream<R, any Error> {
        let client = Self.currentClient
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await Self.$currentClient.withValue(client) {
                        let (first, provenance) = try await resolve(optimistic)
                        continuation.yield(first)
                        guard provenance.source == .expiredCache else { return }
                        let refreshStart = ContinuousClock.now
                        let attempts = try await self.awaitRefreshes(provenance.staleKeys)
                        // The answer after the refreshes. Still expired: no refresh ran (the last one failed less
                        // than refresh-retry ago, RFC 8767 §5's recheck timer, which a `more` call must not
                        // bypass), so there is nothing newer to report and the stale answer was the last.
                        var (fresh, freshProvenance) = try await resolve(optimistic)
                        guard freshProvenance.source != .expiredCache else { return }
                        fresh.source = .network
                        fresh.staleSeconds = nil
                        fresh.refresh = same(first, fresh) ? .confirmed : .changed
                        fresh.attempts = attempts + fresh.attempts
                        fresh.elapsedMilliseconds = Self.milliseconds(since: refreshStart)
                        continuation.yield(fresh)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The SVCB (type 64) records of `name`, or of `_PORT.NAME` when `port` is given (RFC 9460 §2.3), processed
    /// like HTTPS records. `name` carries its scheme prefix, e.g. `_dns.resolver.example` (RFC 9461).
    /// - Throws: ``ResolverError``: `noSuchName` (NXDOMAIN of `name` itself), `timeout`, `upstreamFailure`,
    ///   `invalidName`.
    public func resolveSVCB(_ name: String, port: Int? = nil, optimistic: Bool = true) async throws(ResolverError)
        -> HTTPSResolution
    {
        let start = ContinuousClock.now
        let host = try Self.validate(name)
        if let port { try Self.validate(port: port, name: host) }
        let queryName = port.map { "_\($0).\(host)" } ?? host
        var (resolution, _) = try await serviceBindings(
            host: host, queryName: queryName, type: .svcb, optimistic: optimistic)
        resolution.elapsedMilliseconds = Self.milliseconds(since: start)
        return resolution
    }

    /// The addresses of `name` (IPv6 first).
    /// - Throws: ``ResolverError``; NODATA is not an error (no addresses).
    public func resolveAddresses(_ name: String, family: AddressFamilies = .any, optimistic: Bool = true)
        async throws(ResolverError) -> AddressResolution
    {
        let start = ContinuousClock.now
        let host = try Self.validate(name)
        let (addresses, provenance) = try await addresses(host, family: family, optimistic: optimistic)
        return try Self.addressResolution(host, addresses, provenance, since: start)
    }

    static func addressResolution(
        _ host: String, _ addresses: TargetAddresses, _ provenance: Provenance, since start: ContinuousClock.Instant
    ) throws(ResolverError) -> AddressResolution {
        if addresses.ipv4 == nil && addresses.ipv6 == nil {
            throw ResolverError(code: .noSuchName, name: host, attempts: provenance.attempts)
        }
        return AddressResolution(
            name: host, addresses: (addresses.ipv6 ?? []) + (addresses.ipv4 ?? []), source: provenance.source,
            ttl: provenance.reportedTTL, staleSeconds: provenance.staleSeconds, attempts: provenance.attempts,
            elapsedMilliseconds: Self.milliseconds(since: start), dnssec: provenance.reportedDNSSEC)
    }

    /// The endpoints to try for `host:port`, in Happy Eyeballs v3 order.
    ///
    /// HTTPS, A and AAAA of the host are queried in parallel, so a cold plan costs one round trip when the
    /// bindings point at the host itself (or carry hints). An HTTPS failure other than NXDOMAIN does not fail
    /// the plan (RFC 9460 §3: clients fall back to A/AAAA).
    /// An IPv4 or IPv6 address literal needs no DNS: its plan is that address.
    /// - Parameters:
    ///   - assumeH3: plan QUIC without evidence, like URLSession's `assumesHTTP3Capable`.
    ///   - caller: the uid asking; Alt-Svc reports by that uid count besides root's (nil: root's only).
    public func connectionPlan(
        host: String, port: Int = 443, optimistic: Bool = true, assumeH3: Bool = false, caller: UInt32? = nil
    ) async throws(ResolverError) -> PlanResolution {
        let start = ContinuousClock.now
        if let address = IPAddressText.literal(host) {
            try Self.validate(port: port, name: address)
            let plan = literalPlan(address, port: port, assumeH3: assumeH3, caller: caller)
            return PlanResolution(
                plan: plan, source: .cache, attempts: [], elapsedMilliseconds: Self.milliseconds(since: start))
        }
        let hostName = try Self.validate(host)
        try Self.validate(port: port, name: hostName)
        async let httpsResult = outcome { try await self.https(hostName, port: port, optimistic: optimistic) }
        async let hostAddressResult = outcome { try await self.addresses(hostName, family: .any, optimistic: optimistic) }
        let httpsOutcome = await httpsResult
        let hostOutcome = await hostAddressResult

        var provenance = Provenance()
        var bindings: [ServiceBinding] = []
        var fallback = hostName
        var httpsAnswers = Provenance()
        switch httpsOutcome {
        case .success(let (resolution, httpsProvenance)):
            provenance.merge(httpsProvenance)
            httpsAnswers = httpsProvenance
            bindings = resolution.bindings
            fallback = resolution.fallbackTarget
        case .failure(let error):
            provenance.addAttempts(error.attempts)
            if error.code == .noSuchName && port == 443 { throw error }
            logger.debug("HTTPS lookup failed, planning without it", metadata: ["dns.name": "\(hostName)", "error": "\(error)"])
        }
        var known: [String: TargetAddresses] = [:]
        switch hostOutcome {
        case .success(let (addresses, addressProvenance)):
            provenance.merge(addressProvenance)
            known[hostName] = addresses
        case .failure(let error):
            provenance.addAttempts(error.attempts)
            if bindings.isEmpty && fallback == hostName { throw error }
        }

        // Other targets: wait for their addresses unless every binding for them carries hints, in which case
        // the hints serve now and the lookup warms the cache for the next plan (RFC 9460 §7.3).
        let origin = try? AltSvcOrigin(host: String(hostName.dropLast()), port: UInt16(port))
        let alternatives = origin.map { altSvc.alternatives(for: $0, caller: caller) } ?? []
        // Targets in the order they matter (bindings by priority, the fallback, Alt-Svc), each once, at most
        // `maximumPlanTargets` besides the host: a zone that names hundreds of targets costs a bounded number of
        // look-ups (the bindings past the cap keep their hints, if they have any).
        var targets: [String] = []
        for target in bindings.map(\.target) + [fallback]
            + alternatives.compactMap({ $0.host.map(DNSName.normalized) })
        where target != hostName && !targets.contains(target) {
            guard targets.count < configuration.maximumPlanTargets else { break }
            targets.append(target)
        }
        var waitFor: [String] = []
        for target in targets {
            let forTarget = bindings.filter { $0.target == target }
            if !forTarget.isEmpty && forTarget.allSatisfy({ !$0.ipv4hint.isEmpty || !$0.ipv6hint.isEmpty }) {
                Task { _ = try? await self.addresses(target, family: .any, optimistic: optimistic) }
            } else {
                waitFor.append(target)
            }
        }
        await withTaskGroup(of: (String, Result<(TargetAddresses, Provenance), ResolverError>).self) { group in
            for target in waitFor {
                group.addTask {
                    (target, await self.outcome { try await self.addresses(target, family: .any, optimistic: optimistic) })
                }
            }
            for await (target, result) in group {
                switch result {
                case .success(let (addresses, targetProvenance)):
                    known[target] = addresses
                    provenance.merge(targetProvenance)
                case .failure(let error):
                    provenance.addAttempts(error.attempts)
                }
            }
        }

        // RFC 9460 §7.3: hints are ignored once A/AAAA records are available. NODATA leaves none available, so
        // an empty answer does not hide the hints (a target with hints and no address records stays reachable).
        for (target, addresses) in known {
            known[target] = TargetAddresses(
                ipv6: addresses.ipv6.flatMap { $0.isEmpty ? nil : $0 }, ipv4: addresses.ipv4.flatMap { $0.isEmpty ? nil : $0 })
        }
        let plan = ConnectionPlanner.plan(
            host: hostName, port: port, bindings: bindings, addresses: known, assumeH3: assumeH3,
            altSvc: alternatives.map { ConnectionPlanner.Alternative(alpn: $0.protocolID, host: $0.host, port: Int($0.port)) },
            fallbackTarget: fallback)
        // The ECH configurations come from the HTTPS answers alone: they decide whether they can be trusted.
        let echAuthentication =
            plan.endpoints.contains { $0.ech != nil }
            ? ECHAuthentication.of(
                dnssec: httpsAnswers.reportedDNSSEC, authenticatedTransport: httpsAnswers.authenticatedTransport ?? false)
            : nil
        return PlanResolution(
            plan: plan, source: provenance.source, attempts: provenance.attempts,
            elapsedMilliseconds: Self.milliseconds(since: start), dnssec: provenance.reportedDNSSEC,
            echAuthentication: echAuthentication)
    }

    /// The plan of an address literal: the address itself, QUIC first when assumed or when Alt-Svc for the origin
    /// offers h3 on the same host (an alternative host would need DNS).
    private func literalPlan(_ address: String, port: Int, assumeH3: Bool, caller: UInt32?) -> ConnectionPlan {
        let origin = try? AltSvcOrigin(host: address, port: UInt16(port))
        let quicPorts = (origin.map { altSvc.alternatives(for: $0, caller: caller) } ?? [])
            .filter { $0.host == nil || $0.host == address }.map { Int($0.port) }
        func quic(_ port: Int) -> ConnectionEndpoint {
            ConnectionEndpoint(address: address, port: port, transport: .quic, alpn: ["h3"], target: address, priority: 0)
        }
        var endpoints = quicPorts.map(quic)
        if assumeH3 && !quicPorts.contains(port) { endpoints.append(quic(port)) }
        endpoints.append(
            ConnectionEndpoint(
                address: address, port: port, transport: .tcp, alpn: ConnectionPlanner.defaultTCPALPN, target: address,
                priority: 0))
        let h3Source: H3Source? = !quicPorts.isEmpty ? .altsvc : assumeH3 ? .assumed : nil
        return ConnectionPlan(host: address, port: port, h3: h3Source != nil, h3Source: h3Source, endpoints: endpoints)
    }

    /// Whether `host` speaks HTTP/3 on `port`, by its HTTPS records or what Alt-Svc said.
    public func h3Capability(host: String, port: Int = 443, caller: UInt32? = nil) async throws(ResolverError) -> Bool {
        try await connectionPlan(host: host, port: port, caller: caller).plan.h3
    }

    /// Records an origin's `Alt-Svc` header (RFC 7838) on behalf of `reporter`: root's (uid 0, or nil for
    /// in-process callers) counts for every caller, another uid's only for that uid's plans.
    /// - Returns: what was recorded and what was ignored, with the reasons.
    /// - Throws: ``ResolverError`` `invalidName` when the origin or the header is malformed.
    @discardableResult
    public func reportAltSvc(origin: String, header: String, reporter: UInt32? = nil) throws(ResolverError)
        -> AltSvcReport
    {
        do {
            return try altSvc.report(origin: origin, header: header, scope: AltSvcScope(uid: reporter))
        } catch {
            throw ResolverError(code: .invalidName, name: origin, reason: error.message)
        }
    }

    /// Drops cached answers for `name` (all types), or everything; returns how many entries went.
    @discardableResult
    public func flush(_ name: String? = nil) -> Int {
        cache.flush(name.map(DNSName.normalized))
    }

    // MARK: - HTTPS (RFC 9460 client processing)

    private func https(_ name: String, port: Int, optimistic: Bool) async throws(ResolverError)
        -> (HTTPSResolution, Provenance)
    {
        let host = try Self.validate(name)
        try Self.validate(port: port, name: host)
        // RFC 9460 §9.1: port 443 uses the host name, other ports the `_PORT._https` prefix.
        let queryName = port == 443 ? host : "_\(port)._https.\(host)"
        return try await serviceBindings(host: host, queryName: queryName, type: .https, optimistic: optimistic)
    }

    /// RFC 9460 client processing of the HTTPS or SVCB records at `queryName`, following aliases.
    private func serviceBindings(host: String, queryName: String, type: RRType, optimistic: Bool)
        async throws(ResolverError) -> (HTTPSResolution, Provenance)
    {
        var chain = AliasChain(start: queryName, maximumHops: configuration.maximumAliasHops)
        var provenance = Provenance()
        var result = Self.startResolution(host: host, queryName: queryName)
        while true {
            let rrset = try await records(chain.current, type: type, optimistic: optimistic, provenance: &provenance)
            if try bindingStep(rrset, host: host, queryName: queryName, type: type, chain: &chain, result: &result, provenance: provenance) {
                break
            }
        }
        Self.complete(&result, chain: chain, provenance: provenance)
        return (result, provenance)
    }

    /// A resolution of `queryName` before its first record is looked at.
    static func startResolution(host: String, queryName: String) -> HTTPSResolution {
        HTTPSResolution(
            name: host, queryName: queryName, aliasChain: [], bindings: [], h3: false, fallbackTarget: host,
            source: .cache, ttl: 0, staleSeconds: nil, attempts: [], elapsedMilliseconds: 0)
    }

    /// Fills in what the whole chain decides: aliases, h3, source, TTL.
    static func complete(_ result: inout HTTPSResolution, chain: AliasChain, provenance: Provenance) {
        result.aliasChain = chain.aliases
        result.h3 = result.bindings.contains(where: \.supportsH3)
        result.source = provenance.source
        result.ttl = provenance.reportedTTL
        result.staleSeconds = provenance.staleSeconds
        result.attempts = provenance.attempts
        result.dnssec = provenance.reportedDNSSEC
    }

    /// The RFC 9460 processing of an HTTPS/SVCB RRset and the notes about ignored records; the same for every hit
    /// of a cache entry, so computed once per entry.
    struct ProcessedRRset: Sendable {
        var outcome: HTTPSRRSetOutcome
        var ignored: [String]
    }

    /// One hop of RFC 9460 processing: applies the RRset of `chain.current` to `result`; true when the resolution
    /// is complete, false when an alias leads on to `chain.current`.
    func bindingStep(
        _ rrset: RRsetResult, host: String, queryName: String, type: RRType, chain: inout AliasChain,
        result: inout HTTPSResolution, provenance: Provenance
    ) throws(ResolverError) -> Bool {
        do {
            for alias in rrset.cnames { try chain.follow(to: alias) }
        } catch {
            result.note = error.description
            return true
        }
        switch rrset.answer {
        case .nxdomain:
            // The host itself does not exist. A missing port-prefixed name, or a dangling alias target,
            // only means there are no HTTPS records.
            if chain.aliases.isEmpty && queryName == host {
                throw ResolverError(code: .noSuchName, name: host, attempts: provenance.attempts)
            }
            if !chain.aliases.isEmpty { result.fallbackTarget = chain.current }
            return true
        case .nodata:
            if !chain.aliases.isEmpty { result.fallbackTarget = chain.current }
            return true
        case .records(let records, let owner):
            let compute = {
                ProcessedRRset(
                    outcome: HTTPSProcessing.process(records: records, ownerName: owner),
                    ignored: HTTPSProcessing.ignoredRecords(records: records, ownerName: owner))
            }
            let processed = rrset.memo?.derived(compute) ?? compute()
            switch processed.outcome {
            case .alias(let target):
                do {
                    try chain.follow(to: target)
                } catch {
                    // RFC 9460 §2.4.2: a loop or an overlong chain leaves the client without SVCB records.
                    result.note = error.description
                    return true
                }
                return false
            case .serviceUnavailable:
                result.note = "AliasMode \".\": the service is not available (RFC 9460 §2.5.1)"
                return true
            case .malformed(let error):
                result.note = "malformed \(type) RRset ignored (RFC 9460 §2.2): \(error)"
                return true
            case .bindings(let bindings):
                result.bindings = bindings
                result.fallbackTarget = chain.current
                if !processed.ignored.isEmpty { result.note = processed.ignored.joined(separator: "; ") }
                return true
            }
        }
    }

    // MARK: - Addresses

    private func addresses(_ name: String, family: AddressFamilies, optimistic: Bool) async throws(ResolverError)
        -> (TargetAddresses, Provenance)
    {
        async let v6 = outcome { () async throws -> ([String]?, Provenance) in
            guard family != .ipv4 else { return (nil, Provenance()) }
            return try await self.addressRecords(name, type: .aaaa, optimistic: optimistic)
        }
        async let v4 = outcome { () async throws -> ([String]?, Provenance) in
            guard family != .ipv6 else { return (nil, Provenance()) }
            return try await self.addressRecords(name, type: .a, optimistic: optimistic)
        }
        let (six, four) = await (v6, v4)
        return try Self.combine(six: six, four: four, family: family)
    }

    /// The addresses of both families together; throws the first failure when neither family has addresses.
    static func combine(
        six: Result<([String]?, Provenance), ResolverError>, four: Result<([String]?, Provenance), ResolverError>,
        family: AddressFamilies
    ) throws(ResolverError) -> (TargetAddresses, Provenance) {
        var provenance = Provenance()
        var addresses = TargetAddresses()
        var failure: ResolverError?
        var nxdomain = 0
        for (result, isV6) in [(six, true), (four, false)] {
            switch result {
            case .success(let (list, part)):
                provenance.merge(part)
                if list == nil && (isV6 ? family != .ipv4 : family != .ipv6) { nxdomain += 1 }
                if isV6 { addresses.ipv6 = list } else { addresses.ipv4 = list }
            case .failure(let error):
                provenance.addAttempts(error.attempts)
                failure = failure ?? error
            }
        }
        if let failure, addresses.ipv4 == nil && addresses.ipv6 == nil {
            var error = failure
            error.attempts = provenance.attempts
            throw error
        }
        if nxdomain > 0 && addresses.ipv4 == nil && addresses.ipv6 == nil && failure == nil {
            return (TargetAddresses(), provenance)
        }
        // NODATA for a family is an empty list (known: none), not nil (unknown: use hints).
        if family != .ipv4 && addresses.ipv6 == nil && failure == nil { addresses.ipv6 = [] }
        if family != .ipv6 && addresses.ipv4 == nil && failure == nil { addresses.ipv4 = [] }
        return (addresses, provenance)
    }

    /// The A or AAAA addresses of a name; nil for NXDOMAIN, empty for NODATA.
    private func addressRecords(_ name: String, type: RRType, optimistic: Bool) async throws(ResolverError)
        -> ([String]?, Provenance)
    {
        var provenance = Provenance()
        let rrset = try await records(name, type: type, optimistic: optimistic, provenance: &provenance)
        return (Self.addressList(rrset, type: type), provenance)
    }

    /// The address texts of an A or AAAA RRset (computed once per cache entry); nil for NXDOMAIN, empty for NODATA.
    static func addressList(_ rrset: RRsetResult, type: RRType) -> [String]? {
        switch rrset.answer {
        case .nxdomain: return nil
        case .nodata: return []
        case .records(let records, _):
            let compute = { records.compactMap { try? (type == .a ? $0.ipv4Address() : $0.ipv6Address()) } }
            return rrset.memo?.derived(compute) ?? compute()
        }
    }

    // MARK: - RRsets: cache, coalescing, CNAMEs

    /// The end of an alias chain.
    public enum RRsetAnswer: Sendable {
        /// Records of the asked type, owned by the chain's last name.
        case records([ResourceRecord], owner: String)
        case nodata
        case nxdomain
    }

    /// What a walk found: the end of the chain and the aliases on the way.
    public struct RRsetResult: Sendable {
        public var answer: RRsetAnswer
        /// CNAME targets followed from the asked name.
        public var cnames: [String]
        /// The memo of the cache entry the records came from.
        var memo: CacheEntryMemo?
    }

    /// Who the running task's upstream queries count against, when the caller did not say (the varlink adapter
    /// sets the caller's uid here).
    @TaskLocal public static var currentClient: QueryClient?

    /// The records of `type` at `name`, following CNAMEs (also across separate queries when an answer stops
    /// at a CNAME whose target it does not include): the one walk, with this call's provenance.
    private func records(_ name: String, type: RRType, optimistic: Bool, provenance: inout Provenance)
        async throws(ResolverError) -> RRsetResult
    {
        var trace = WalkTrace(keepingSteps: false)
        trace.provenance = provenance
        defer { provenance = trace.provenance }
        // An API caller that allowed optimistic answers also gets expired data when the network fails (RFC 8767).
        let options = WalkOptions(optimistic: optimistic, staleOnFailure: optimistic, client: Self.currentClient)
        return try await walk(name, type: type, options: options, trace: &trace)
    }

    /// One hop of following CNAMEs: the records of `type` in the entry for `chain.current`, or nil when the entry
    /// ends at a CNAME whose target must be asked next (then `chain.current` is that target).
    func cnameStep(
        _ entry: CacheAnswer<CachedRRset>, name: String, type: RRType, chain: inout AliasChain, provenance: Provenance
    ) throws(ResolverError) -> RRsetResult? {
        let current = chain.current
        switch entry {
        case .nxdomain: return RRsetResult(answer: .nxdomain, cnames: chain.aliases)
        case .nodata: return RRsetResult(answer: .nodata, cnames: chain.aliases)
        case .positive(let rrset):
            var local = AliasChain(normalizedStart: current, maximumHops: configuration.maximumAliasHops)
            let matching: [ResourceRecord]
            do {
                matching = try local.followCNAMEs(type: type, in: rrset.records)
                for alias in local.aliases { try chain.follow(to: alias) }
            } catch {
                throw ResolverError(
                    code: .upstreamFailure, name: name, rcode: "CNAME \(error.code.rawValue)",
                    attempts: provenance.attempts)
            }
            if !matching.isEmpty {
                return RRsetResult(
                    answer: .records(matching, owner: chain.current), cnames: chain.aliases, memo: rrset.memo)
            }
            if local.aliases.isEmpty { return RRsetResult(answer: .nodata, cnames: chain.aliases) }
            // The answer ended at a CNAME: ask for its target.
            return nil
        }
    }

    enum FetchOutcome: Sendable {
        case answer(CacheAnswer<CachedRRset>, ttl: UInt32, attempts: [QueryAttempt])
        case failure(ResolverError)
    }

    /// The one in-flight upstream query for `key`, joined or started; at a limit of ``QueryLimits`` a task that
    /// fails at once with `tooManyQueries` (a refresh refused that way is retried no sooner than a failed one).
    /// - Parameter client: who the query counts against; nil for refreshes and in-process callers (global only).
    func upstreamTask(
        for key: CacheKey, name: String, type: RRType, class rrClass: RRClass = .in, dnssecOK: Bool = false,
        isRefresh: Bool, client: QueryClient? = nil
    ) -> Task<FetchOutcome, Never> {
        // A validating resolver asks every question with DO: the cache holds one kind of entry.
        let dnssecOK = dnssecOK || validator.active
        let inflightKey = InflightKey(cacheKey: key, dnssecOK: dnssecOK, checkingDisabled: false)
        let admission = inflight.admit(
            inflightKey, client: isRefresh ? nil : client, executor: transport.preferredExecutor
        ) { [self] in
            // A refresh must not delay the stale answer it was started beside: let that answer go out first.
            if isRefresh { await Task.yield() }
            let outcome = await self.query(name: name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key)
            if case .failure = outcome, isRefresh { cache.refreshFailed(key) }
            return outcome
        }
        switch admission {
        case .started(let task), .joined(.task(let task)):
            return task
        case .joined(let running):
            // A question the stub runs in place: a task of our own to wait for it.
            return Task(executorPreference: transport.preferredExecutor) { await running.value }
        case .refused(let global):
            if isRefresh { cache.refreshFailed(key) }
            let error = refusal(name: name, type: type, global: global, client: client)
            return Task { .failure(error) }
        }
    }

    /// ``upstreamTask(for:name:type:class:dnssecOK:isRefresh:client:)``'s question, asked in the calling task when
    /// nobody asks it yet (``InflightTable/admitInPlace(_:client:)``): for a caller that is never cancelled
    /// (``WalkOptions/fetchInPlace``).
    nonisolated(nonsending) func fetchInPlace(
        for key: CacheKey, name: String, type: RRType, class rrClass: RRClass, dnssecOK: Bool, client: QueryClient?
    ) async -> FetchOutcome {
        let dnssecOK = dnssecOK || validator.active
        let inflightKey = InflightKey(cacheKey: key, dnssecOK: dnssecOK, checkingDisabled: false)
        switch inflight.admitInPlace(inflightKey, client: client) {
        case .joined(let running):
            return await running.value
        case .run(let fetch):
            let outcome = await query(name: name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key)
            inflight.finishInPlace(inflightKey, fetch, outcome: outcome)
            return outcome
        case .refused(let global):
            return .failure(refusal(name: name, type: type, global: global, client: client))
        }
    }

    /// The error of a question refused at a limit, logged once.
    func refusal(name: String, type: RRType, global: Bool, client: QueryClient?) -> ResolverError {
        let limits = inflight.limits
        let reason =
            global
            ? "\(limits.maxQueries) upstream queries in flight (the limit for everyone)"
            : "\(limits.maxQueriesPerClient) upstream queries in flight from \(client.map { "\($0)" } ?? "this client")"
        logger.debug(
            "upstream query refused at a limit", metadata: ["dns.name": "\(name)", "dns.type": "\(type)", "limit": "\(reason)"])
        return ResolverError(code: .tooManyQueries, name: name, reason: reason)
    }

    /// The refusal a walk for (name, type) from `client` would meet at its first upstream query, decided now and
    /// without a task: a front door under a flood answers it at once instead of starting work that can only be
    /// refused. Nil when the question would be admitted, or would join one already in flight.
    /// - Parameters:
    ///   - nameIsNormalized: as ``WalkOptions/nameIsNormalized``.
    ///   - trace: the trace of the ``cachedWalk(_:type:class:options:trace:)`` that missed, whose key for the name
    ///     is used instead of hashing the name again.
    public func refusalNow(
        _ name: String, type: RRType, class rrClass: RRClass = .in, dnssecOK: Bool = false, client: QueryClient?,
        nameIsNormalized: Bool = false, after trace: WalkTrace? = nil
    ) -> ResolverError? {
        let key = InflightKey(
            cacheKey: trace?.firstKey
                ?? CacheKey(name: name, isNormalized: nameIsNormalized, type: type.rawValue, dnsClass: rrClass.rawValue),
            dnssecOK: dnssecOK, checkingDisabled: false)
        let (refused, global) = inflight.refusal(key, client: client)
        return refused ? refusal(name: name, type: type, global: global, client: client) : nil
    }

    nonisolated(nonsending) func query(
        name: String, type: RRType, class rrClass: RRClass, dnssecOK: Bool, key: CacheKey
    ) async
        -> FetchOutcome
    {
        let result: Result<DNSExchange, DNSTransportError>
        do {
            result = .success(
                try await transport.query(
                    question(name: name, type: type, class: rrClass, key: key), dnssecOK: dnssecOK))
        } catch {
            result = .failure(error)
        }
        switch received(result, name: name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key) {
        case .done(let outcome, _):
            return outcome
        case .needsValidation(let reply):
            return store(reply, validation: await validate(reply))
        }
    }

    /// ``query(name:type:class:dnssecOK:key:)`` without a task, where the transport can ask without one
    /// (``DNSTransport/startQuery(_:dnssecOK:completion:)``): `completion` gets the outcome as that function makes
    /// it; a reply whose DNSSEC verdict needs data is validated in a task of its own. False, with nothing started,
    /// where the transport cannot.
    ///
    /// `completion`'s second argument is false when the outcome is not in the cache yet: the caller answers first
    /// and then writes it (``write(_:for:)``), before it ends the question in flight, so a question asked between
    /// the two joins this one instead of asking again. A miss's answer then leaves before the cache and the
    /// in-flight table are touched (the stub's miss: BENCHMARKS.md, round 12).
    func startQuery(
        name: String, type: RRType, class rrClass: RRClass, dnssecOK: Bool, key: CacheKey,
        completion: @escaping @Sendable (FetchOutcome, _ written: Bool) -> Void
    ) -> Bool {
        transport.startQuery(question(name: name, type: type, class: rrClass, key: key), dnssecOK: dnssecOK) {
            [self] result in
            switch received(result, name: name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key, write: false) {
            case .done(let outcome, let prepared):
                completion(outcome, false)
                // The upstream's parsed reply and the prepared one are freed here, after `completion` (a stub's
                // miss: after its answer left), not before it: about 1 100 instructions of frees off the path a
                // client waits for (BENCHMARKS.md, round 19).
                withExtendedLifetime((result, prepared)) {}
            case .needsValidation(let reply):
                Task(executorPreference: transport.preferredExecutor) { [self] in
                    completion(store(reply, validation: await validate(reply)), true)
                }
            }
        }
    }

    /// What a transport's result becomes: a failure, or the reply prepared and stored with its DNSSEC verdict when
    /// that needs no data (the validator off, or allow-downgrade's verdict for the upstream); otherwise the
    /// prepared reply, to validate (``validate(_:)``) and ``store(_:validation:)``.
    /// - Parameter write: false: the outcome is settled but not written to the cache (the caller writes it).
    private func received(
        _ result: Result<DNSExchange, DNSTransportError>, name: String, type: RRType, class rrClass: RRClass,
        dnssecOK: Bool, key: CacheKey, write: Bool = true
    ) -> Received {
        switch result {
        case .success(let exchange):
            // Read in place: binding it to a variable outside the switch copied its message and attempts (five
            // reference counts) on every miss.
            return received(exchange, name: name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key, write: write)
        case .failure(let error): return .done(.failure(Self.failure(error, name: name)), prepared: nil)
        }
    }

    private func received(
        _ exchange: DNSExchange, name: String, type: RRType, class rrClass: RRClass, dnssecOK: Bool, key: CacheKey,
        write: Bool
    ) -> Received {
        // Validated once, here, on store: every hit reads the verdict (docs/DNSSEC.md). A verdict that needs no
        // data is known before the reply is prepared, so a positive answer is made with it at once instead of
        // copied with it afterwards.
        let validation =
            validator.enabled ? validator.verdictWithoutData(upstream: exchange.attempts.last?.server) : nil
        let reply: Reply
        switch prepare(
            exchange, name: name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key, validation: validation)
        {
        case .success(let prepared): reply = prepared
        case .failure(let error): return .done(.failure(error), prepared: nil)
        }
        if validator.enabled, validation == nil { return .needsValidation(reply) }
        let outcome = settle(reply, validation: validation)
        if write { self.write(outcome, for: reply.key) }
        return .done(outcome, prepared: reply)
    }

    private enum Received {
        /// The outcome, and the reply it was prepared from (nil after a failure), which the caller may keep
        /// alive to free it later.
        case done(FetchOutcome, prepared: Reply?)
        case needsValidation(Reply)
    }

    /// The verdict on a reply that needs DNSSEC data fetched (keys, proofs).
    nonisolated(nonsending) private func validate(_ reply: Reply) async -> DNSSECValidation {
        await validator.validate(
            reply.answer, name: reply.key.name, type: reply.type, upstream: reply.upstream, fetcher: self)
    }

    /// The question of a hop: on the walk `name` is the chain's current name, the key's, lowercased and absolute
    /// already.
    private func question(name: String, type: RRType, class rrClass: RRClass, key: CacheKey) -> DNSQuestion {
        name == key.name
            ? DNSQuestion(normalizedName: name, type: type, class: rrClass)
            : DNSQuestion(name: name, type: type, class: rrClass)
    }

    /// A transport's error as the resolver reports it.
    private static func failure(_ error: DNSTransportError, name: String) -> ResolverError {
        let code: ResolverError.Code =
            switch error.code {
            case .invalidQuery: .invalidName
            case .networkError: .networkError
            default: .timeout
            }
        // A timeout's reason is what the tries failed with, when they failed rather than waited.
        let failures = error.failures.isEmpty ? nil : error.failures.joined(separator: "; ")
        let reason = code == .timeout ? failures : error.message
        return ResolverError(code: code, name: name, reason: reason, attempts: error.attempts)
    }

    /// An upstream reply made ready to store: scrubbed, its answer and TTL, before its DNSSEC verdict. A class:
    /// it goes from the transport's callback through validation to the cache, one reference instead of copies.
    private final class Reply: Sendable {
        let answer: CacheAnswer<CachedRRset>
        let ttl: UInt32
        /// The exchange's tries (the message itself is not kept: storing the exchange copied it, four more
        /// reference counts a miss).
        let attempts: [QueryAttempt]
        let name: String
        let type: RRType
        let key: CacheKey
        /// `answer` already carries the verdict that ``DNSResolver/settle(_:validation:)`` is given (an answer
        /// prepared with a verdict known without data, positive or with a negative payload; any other is prepared
        /// without one).
        /// (Its state is read, not the verdict copied: a copy took its text's reference count.)
        var carriesVerdict: Bool { answer.payload?.validation?.state != nil }
        /// The upstream that sent it (the last try's): allow-downgrade validates it only when the probe showed that
        /// upstream passes DNSSEC data.
        var upstream: String? { attempts.last?.server }

        init(
            answer: CacheAnswer<CachedRRset>, ttl: UInt32, attempts: [QueryAttempt], name: String, type: RRType,
            key: CacheKey
        ) {
            self.answer = answer
            self.ttl = ttl
            self.attempts = attempts
            self.name = name
            self.type = type
            self.key = key
        }
    }

    /// What an upstream reply holds for the question: only what answers it (bailiwick); nothing else is cached,
    /// persisted or served. A response code other than NOERROR and NXDOMAIN is a failure.
    /// - Parameter validation: the DNSSEC verdict when it is known already; a positive answer is made with it.
    private func prepare(
        _ exchange: DNSExchange, name: String, type: RRType, class rrClass: RRClass, dnssecOK: Bool, key: CacheKey,
        validation: DNSSECValidation? = nil
    ) -> Result<Reply, ResolverError> {
        let message = exchange.message
        guard message.rcode == .noError || message.rcode == .nxDomain else {
            return .failure(
                ResolverError(
                    code: .upstreamFailure, name: name, rcode: "\(message.rcode)", attempts: exchange.attempts,
                    upstreamError: message.edns?.extendedErrors.first))
        }
        let scrubbed = ReplyScrubber.scrub(
            message, question: DNSQuestion(normalizedName: key.name, type: type, class: rrClass),
            maximumHops: configuration.maximumAliasHops)
        if scrubbed.dropped > message.additional.count {
            scrubbedRecords.add(UInt64(scrubbed.dropped - message.additional.count), ordering: .relaxed)
            logger.debug(
                "records outside the question's chain dropped",
                metadata: [
                    "dns.name": "\(name)", "dns.type": "\(type)",
                    "dns.dropped": "\(scrubbed.dropped - message.additional.count)",
                ])
        }
        if !scrubbed.answer.isEmpty {
            // A chain that ends in NXDOMAIN is still a chain: its names exist, the walk asks the last one itself.
            return .success(
                Reply(
                    answer: .positive(
                        CachedRRset(
                            records: scrubbed.answer,
                            authority: dnssecOK ? scrubbed.authority.filter { EncodedSections.isDNSSEC($0.type) } : [],
                            dnssecOK: dnssecOK, validation: validation,
                            authenticatedTransport: exchange.authenticatedTransport)),
                    ttl: scrubbed.answer.map(\.ttl).min() ?? 0, attempts: exchange.attempts, name: name, type: type,
                    key: key))
        }
        let authority = negativeAuthority(scrubbed.authority, dnssecOK: dnssecOK, validation: validation)
        return .success(
            Reply(
                answer: message.rcode == .nxDomain ? .nxdomain(authority) : .nodata(authority),
                ttl: Self.negativeTTL(scrubbed.authority) ?? configuration.negativeTTLWithoutSOA,
                attempts: exchange.attempts,
                name: name, type: type, key: key))
    }

    /// Stores a prepared reply with its DNSSEC verdict (nil: the validator is off) and returns the fetch's outcome.
    private func store(_ reply: Reply, validation: DNSSECValidation?) -> FetchOutcome {
        let outcome = settle(reply, validation: validation)
        write(outcome, for: reply.key)
        return outcome
    }

    /// A prepared reply with its verdict, as the walk takes it: the answer to cache (a bogus one for 60 s at most),
    /// or the failure an unreachable verdict means. Not written to the cache: ``write(_:for:)`` does that.
    private func settle(_ reply: Reply, validation: DNSSECValidation?) -> FetchOutcome {
        var answer = reply.answer
        var ttl = reply.ttl
        let name = reply.name
        if let validation {
            if validation.isUnreachable {
                return .failure(
                    ResolverError(
                        code: .timeout, name: name, reason: validation.reason, attempts: reply.attempts,
                        dnssec: validation))
            }
            if !reply.carriesVerdict { answer = Self.withValidation(answer, validation) }
            validator.count(validation, name: reply.key.name)
            // A bogus answer is cached briefly, so a repaired zone recovers soon.
            if validation.state == .bogus {
                ttl = min(ttl, 60)
                logger.info(
                    "DNSSEC bogus",
                    metadata: ["dns.name": "\(name)", "dns.type": "\(reply.type)", "reason": "\(validation.reason ?? "")"])
            }
        }
        return .answer(answer, ttl: ttl, attempts: reply.attempts)
    }

    /// Writes a settled answer to the cache under `key`; a failure writes nothing.
    func write(_ outcome: FetchOutcome, for key: CacheKey) {
        guard case .answer(let answer, let ttl, _) = outcome else { return }
        cache.store(answer, for: key, ttl: ttl)
        logger.debug("fetched", metadata: ["dns.name": "\(key.name)", "dns.type": "\(RRType(rawValue: key.type))", "dns.ttl": "\(ttl)"])
    }

    /// The same answer carrying `validation`.
    static func withValidation(_ answer: CacheAnswer<CachedRRset>, _ validation: DNSSECValidation)
        -> CacheAnswer<CachedRRset>
    {
        switch answer {
        case .positive(let rrset): return .positive(CachedRRset(sharingDataOf: rrset, validation: validation))
        case .nxdomain(let payload):
            return .nxdomain(CachedRRset(sharingDataOf: payload ?? CachedRRset(records: [], dnssecOK: true), validation: validation))
        case .nodata(let payload):
            return .nodata(CachedRRset(sharingDataOf: payload ?? CachedRRset(records: [], dnssecOK: true), validation: validation))
        }
    }

    /// Probes each upstream once: does it pass DNSSEC data (allow-downgrade's evidence, docs/DNSSEC.md)? Asks every
    /// upstream on its own for DNSKEY of each positive anchor's zone, with DO; a reply decides that upstream's
    /// state, no reply (timeout, SERVFAIL, garbage) changes nothing.
    /// - Parameter only: record evidence only for these upstreams (nil: all).
    public func probeDNSSEC(only: Set<String>? = nil) async {
        guard validator.mode != .no else { return }
        let names = transport.upstreamNames
        if !names.isEmpty { validator.configureUpstreams(names) }
        // Signed keys from any anchor's zone show the upstream passes DNSSEC data; keys without RRSIGs, or no keys
        // (NOERROR, empty) where an anchor says there are some, show it strips it.
        var evidence: [String: [(DNSSECProbeEvidence?, String)]] = [:]
        for zone in validator.anchors.positive.keys.sorted() {
            for reply in await transport.queryEach(DNSQuestion(name: zone, type: RRType(48)), dnssecOK: true) {
                let found = DNSSECProbeEvidence.of(reply.message)
                let detail: String
                switch found {
                case .signed: detail = "DNSKEY \(zone) with RRSIGs"
                case .stripped: detail = "DNSKEY \(zone) without RRSIGs (\(reply.message?.answer.count ?? 0) records)"
                case nil: detail = "DNSKEY \(zone): no usable reply"
                }
                evidence[reply.server, default: []].append((found, detail))
            }
        }
        for (server, replies) in evidence where only?.contains(server) ?? true {
            let combined = DNSSECProbeEvidence.combined(replies.map(\.0))
            let detail = replies.first { $0.0 == combined }?.1 ?? replies.first?.1 ?? ""
            if validator.recordProbe(server: server, combined, detail: detail) {
                logger.info(
                    "DNSSEC: upstream state decided by the probe",
                    metadata: [
                        "dns.server": "\(server)",
                        "dnssec.upstream": "\(validator.upstreamStates.capability(of: server).rawValue)",
                        "reason": "\(detail)",
                    ])
            }
        }
    }

    /// The probe at start and on Reload: one round for every upstream, then again only for those still unknown
    /// (no usable reply yet), after 1, 2, 4, 8, 16, 30, 30... s, for about ten minutes. A later call (the next
    /// Reload) ends this one's retries.
    public func probeDNSSECUntilKnown() async {
        let generation = probeGeneration.add(1, ordering: .relaxed).newValue
        await probeDNSSEC()
        var delay = 1
        for _ in 0..<24 {
            let unknown = validator.upstreamStates.unknown
            guard !unknown.isEmpty, validator.mode != .no else { return }
            try? await Task.sleep(for: .seconds(delay))
            guard probeGeneration.load(ordering: .relaxed) == generation, !Task.isCancelled else { return }
            await probeDNSSEC(only: Set(unknown))
            delay = min(delay * 2, 30)
        }
    }

    /// RFC 2308 §5: the negative TTL is the smaller of the SOA's TTL and its MINIMUM field.
    static func negativeTTL(_ authority: [ResourceRecord]) -> UInt32? {
        for record in authority where record.type == .soa {
            if let minimum = record.soaMinimum() { return min(record.ttl, minimum) }
        }
        return nil
    }

    /// What a negative answer keeps of its (scrubbed) authority section: the SOA (RFC 2308 §3) and, when the query
    /// asked for them, the NSEC/NSEC3 proofs and their signatures.
    /// - Parameter validation: the verdict when it is known already (the answer is made with it, not copied with it
    ///   afterwards); the shared storage never carries one.
    func negativeAuthority(
        _ authority: [ResourceRecord], dnssecOK: Bool, validation: DNSSECValidation? = nil
    ) -> CachedRRset? {
        let keeps = { (record: ResourceRecord) in
            record.type == .soa || (dnssecOK && EncodedSections.isDNSSEC(record.type))
        }
        // The scrubbed authority of a negative answer is nearly always its SOA alone: kept as it is, not copied.
        let kept = authority.allSatisfy(keeps) ? authority : authority.filter(keeps)
        if kept.isEmpty && !dnssecOK { return nil }
        // Every NXDOMAIN and NODATA of a zone carries the same SOA: keep its storage once (a cache full of
        // negative answers would otherwise hold 100,000 copies of it), found by the records it is made of, so
        // that a known one is not encoded again.
        let key = NegativePayloadKey(authority: kept, dnssecOK: dnssecOK)
        let shared = negativePayloads.withLock { payloads -> CachedRRset in
            // Nearly always the zone of the last negative answer: compared, not hashed (BENCHMARKS.md, round 22).
            if let last = payloads.last, last.key == key { return last.payload }
            let payload: CachedRRset
            if let known = payloads.all[key] {
                payload = known
            } else {
                if payloads.all.count >= 256 { payloads.all.removeAll(keepingCapacity: true) }
                payload = CachedRRset(records: [], authority: kept, dnssecOK: dnssecOK)
                payloads.all[key] = payload
            }
            payloads.last = NegativePayloads.Known(key: key, payload: payload)
            return payload
        }
        return CachedRRset(sharingDataOf: shared, validation: .some(validation))
    }

    /// Waits for the refreshes of stale keys; returns their attempts, or throws the first failure.
    func awaitRefreshes(_ keys: [CacheKey]) async throws(ResolverError) -> [QueryAttempt] {
        var attempts: [QueryAttempt] = []
        for key in Set(keys) {
            let inflightKey = InflightKey(cacheKey: key, dnssecOK: false, checkingDisabled: false)
            guard let running = inflight.running(inflightKey) else { continue }
            switch await running.value {
            case .answer(_, _, let more): attempts += more
            case .failure(let error): throw error
            }
        }
        return attempts
    }

    // MARK: - Helpers

    /// Runs `body`, capturing its error; every error inside the engine is a ResolverError (cancellation
    /// surfaces as a timeout).
    private func outcome<T>(_ body: () async throws -> T) async -> Result<T, ResolverError> {
        do {
            return .success(try await body())
        } catch let error as ResolverError {
            return .failure(error)
        } catch {
            return .failure(ResolverError(code: .timeout, name: "", reason: "\(error)"))
        }
    }

    /// Validates a host name and returns it absolute and lowercased.
    static func validate(_ name: String) throws(ResolverError) -> String {
        // Nearly every name asked for is plain (letters, digits, `-`, `_`): checked and lowercased without building
        // labels, often without copying. Everything else takes the full parser, which also explains the error.
        if let plain = DNSName.plainNormalized(name) { return plain }
        let parsed: DNSName
        do {
            parsed = try DNSName(name)
        } catch {
            throw ResolverError(code: .invalidName, name: name, reason: error.reason)
        }
        guard !parsed.isRoot else { throw ResolverError(code: .invalidName, name: name, reason: "the root is not a host name") }
        return parsed.text
    }

    static func validate(port: Int, name: String) throws(ResolverError) {
        guard (1...65535).contains(port) else {
            throw ResolverError(code: .invalidName, name: name, reason: "port \(port) is outside 1...65535")
        }
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    }
}

/// What a shared negative payload is made of (``DNSResolver/negativeAuthority(_:dnssecOK:validation:)``).
struct NegativePayloadKey: Hashable, Sendable {
    var authority: [ResourceRecord]
    var dnssecOK: Bool
}

/// The recent negative-answer payloads by what they are made of, and the last one found.
struct NegativePayloads: Sendable {
    /// A struct, not a tuple: see ``LoopDoTConnection``'s `Endings`.
    struct Known: Sendable {
        let key: NegativePayloadKey
        let payload: CachedRRset
    }
    var all: [NegativePayloadKey: CachedRRset] = [:]
    var last: Known?
}
