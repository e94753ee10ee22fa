import DNSCore
import Logging
import NIOCore
import Resolver
import Synchronization

/// Answers DNS queries from the resolver's optimistic cache, the upstreams and mDNS: the protocol logic of the
/// stub, independent of sockets (the UDP and TCP handlers feed it bytes).
///
/// A cache hit is answered synchronously on the caller's thread (the connection's event loop) from stored bytes;
/// only misses, CNAME chases and `.local` names start a task.
public final class StubResponder: Sendable {
    /// What to do with a message right away.
    public enum Immediate: Sendable {
        /// Send these bytes.
        case reply([UInt8])
        /// The reply comes later through the `later` callback.
        case pending
        /// Send nothing.
        case drop
    }

    /// Immutable, replaced whole on Reload: the hot path takes one reference under the lock, copies nothing.
    private final class Access: Sendable {
        let settings: StubSettings
        let allowed: [AddressRange]
        /// The networks of the machine's interfaces: reverse names of their hosts are asked on the link first.
        let linkSubnets: [AddressRange]
        /// Rate limit of the refusals strangers get.
        let refusals: StubRefusalLimiter

        init(settings: StubSettings, allowed: [AddressRange], linkSubnets: [AddressRange]) {
            self.settings = settings
            self.allowed = allowed
            self.linkSubnets = linkSubnets
            self.refusals = StubRefusalLimiter(perSecond: settings.refusalsPerSecond)
        }

        /// Loopback (decided without an allocation), the machine's own addresses, `[stub] allow`.
        func allows(_ client: StubClient) -> Bool {
            if client.isLoopback { return true }
            guard let bytes = client.bytes else { return false }
            return allowed.contains { $0.contains(bytes) }
        }
    }

    private let resolver: DNSResolver
    private let local: (any LocalRecordSource)?
    private let access: Mutex<Access>
    private let counters = StubCounters()
    /// Discovery-proxy look-ups running now (bounded by `DiscoveryProxySettings.maxConcurrent`).
    private let proxyLookups = Atomic<Int>(0)
    /// `.local` and link-reverse look-ups running now (bounded by `StubSettings.maxLocalLookups`).
    private let localLookups = Atomic<Int>(0)
    private let logger: Logger
    /// The DNS Cookies secret, made at start and kept across reloads, so the server cookies clients hold stay valid.
    private let cookieSecret = StubCookies()
    /// The stub listens beyond loopback (``DNSStubServer`` says so at start): `cookies = auto` turns them on.
    private let listensBeyondLoopback = Atomic<Bool>(false)
    /// DNS Cookies are on: `[stub] cookies`, or `auto` and ``listensBeyondLoopback``. Read once per query.
    private let cookiesOn = Atomic<Bool>(false)

    /// - Parameters:
    ///   - resolver: the daemon's resolver; its cache is shared with the varlink API.
    ///   - local: the mDNS source for `.local`, nil when there is none.
    public init(resolver: DNSResolver, local: (any LocalRecordSource)?, settings: StubSettings, logger: Logger) {
        self.resolver = resolver
        self.local = local
        self.logger = logger
        self.access = Mutex(
            Access(settings: settings, allowed: Self.allowList(settings), linkSubnets: AddressRange.linkSubnets()))
        cookiesOn.store(settings.cookies ?? false, ordering: .relaxed)
    }

    /// DNS Cookies, when they are on (RFC 7873, RFC 9018): `[stub] cookies = yes`, or `auto` (the default) and a
    /// stub that listens beyond loopback.
    var cookies: StubCookies? { cookiesOn.load(ordering: .relaxed) ? cookieSecret : nil }

    /// Whether DNS Cookies are on now (for `Status`).
    public var cookiesEnabled: Bool { cookiesOn.load(ordering: .relaxed) }

    /// Tells whether the stub listens beyond loopback, for `cookies = auto` (the listen addresses need a restart).
    func setListensBeyondLoopback(_ beyond: Bool) {
        listensBeyondLoopback.store(beyond, ordering: .relaxed)
        cookiesOn.store(settings.cookies ?? beyond, ordering: .relaxed)
    }

    /// Applies new settings to the running stub (Reload): `allow`, `local`, `optimistic`, `refusals-per-second`,
    /// `max-tcp`, `max-tcp-per-address` and `tcp-idle-timeout` (for connections accepted afterwards: the server
    /// reads them here at each accept) and `cookies`; the machine's own addresses are read again too. `listen` needs a restart (the caller keeps the running one).
    public func update(_ settings: StubSettings) {
        let allowed = Self.allowList(settings)
        let subnets = AddressRange.linkSubnets()
        let state = Access(settings: settings, allowed: allowed, linkSubnets: subnets)
        access.withLock { $0 = state }
        cookiesOn.store(settings.cookies ?? listensBeyondLoopback.load(ordering: .relaxed), ordering: .relaxed)
    }

    /// The settings in effect.
    public var settings: StubSettings { access.withLock { $0.settings } }

    /// The counters for Status.
    public var statistics: StubStatistics { counters.snapshot }

    private static func allowList(_ settings: StubSettings) -> [AddressRange] {
        AddressRange.loopback + AddressRange.localAddresses() + settings.allow
    }

    /// Counts a TCP connection from a stranger, closed at accept, with the refusals.
    func countRefusedConnection() { counters.refused.bump() }

    /// Whether `client` may use the stub: loopback, the machine's own addresses, `[stub] allow`.
    func isAllowed(_ client: StubClient) -> Bool {
        access.withLock { $0 }.allows(client)
    }

    // MARK: - Answering

    /// Answers one message. A stale answer's refresh is added to `refreshes` instead of started: the caller
    /// sends the answer, then calls ``startRefreshes(_:)``.
    /// - Parameters:
    ///   - bytes: the DNS message (for TCP without its length prefix).
    ///   - client: where it came from, for `allow`.
    ///   - overTCP: decides the size limit.
    ///   - later: makes the callback (called once, on any thread) for a reply that comes later; made only then,
    ///     so a cache hit allocates no callback.
    public func handle(
        _ bytes: [UInt8], client: StubClient, overTCP: Bool, refreshes: inout PendingRefreshes,
        later: () -> @Sendable ([UInt8]) -> Void
    ) -> Immediate {
        if overTCP { counters.tcpQueries.bump() } else { counters.udpQueries.bump() }
        let query: StubQuery
        do {
            query = try StubQuery.parse(bytes)
        } catch {
            if case .ignore = error { return .drop }
            counters.formatErrors.bump()
            guard isAllowed(client), let reply = StubReply.problem(error) else { return .drop }
            return .reply(reply)
        }
        let state = access.withLock { $0 }
        // Settings are read through `state` (one reference), never copied out: the hot path copies no StubSettings.
        let allowed = state.allows(client)
        let limit = StubReply.sizeLimit(for: query, overTCP: overTCP)
        guard allowed else {
            counters.refused.bump()
            // A stranger (maybe a spoofed victim) gets a bare REFUSED: header and question, no OPT and no EDE, so
            // never more bytes than it sent, and only as many a second as the rate limit lets through.
            guard state.refusals.admit(client) else { return .drop }
            return .reply(StubReply.bareRefusal(to: query))
        }
        if let edns = query.edns, edns.version != 0 {
            // RFC 6891 §6.1.3: only version 0 exists.
            return .reply(finish(query, code: .badVers, limit: limit))
        }
        if let immediate = special(query, limit: limit) { return .reply(immediate) }
        if !state.settings.proxy.domains.isEmpty,
            state.settings.proxy.domains.contains(where: { query.nameText.hasSuffix($0.text) }),
            let zone = DiscoveryProxy.zone(of: query.name, in: state.settings.proxy.domains)
        {
            let running = proxyLookups.wrappingAdd(1, ordering: .relaxed).newValue
            guard running <= state.settings.proxy.maxConcurrent else {
                proxyLookups.wrappingSubtract(1, ordering: .relaxed)
                counters.serverFailures.bump()
                return .reply(
                    finish(query, code: .servFail, error: .other("discovery proxy busy; try again"), limit: limit))
            }
            startTask(later()) {
                defer { self.proxyLookups.wrappingSubtract(1, ordering: .relaxed) }
                return await self.answerProxy(query, zone: zone, proxy: state.settings.proxy, limit: limit)
            }
            return .pending
        }
        // The name was decoded from the wire: lowercased and absolute already (StubQuery.nameText).
        let options = WalkOptions(
            optimistic: state.settings.optimistic, dnssecOK: query.edns?.dnssecOK ?? false, staleOnFailure: true,
            checkingDisabled: query.checkingDisabled, nameIsNormalized: true)
        if LocalZones.mayBeLocal(query.nameText), LocalZones.isLocal(query.name) {
            guard state.settings.answerLocal else {
                return .reply(
                    finish(query, code: .nxDomain, error: .notSupported(".local look-ups are off ([stub] local = no)"),
                        limit: limit))
            }
            guard let done = enterLocalGate(state.settings) else { return .reply(localBusy(query, limit: limit)) }
            startTask(later()) {
                defer { done() }
                return await self.answerLocal(query, limit: limit, timeout: state.settings.localTimeout)
            }
            return .pending
        }
        if state.settings.answerLocal, query.type == .ptr, LocalZones.isReverseZone(query.nameText),
            let address = LocalZones.reverseAddress(query.name),
            state.linkSubnets.contains(where: { $0.contains(address) })
        {
            guard let done = enterLocalGate(state.settings) else { return .reply(localBusy(query, limit: limit)) }
            // A host on our own link: its name is best known to mDNS (RFC 6762 §4); unicast DNS if nobody answers.
            startTask(later()) {
                defer { done() }
                var options = options
                options.client = client.queryClient
                return await self.answerLinkReverse(query, options: options, limit: limit, timeout: state.settings.localTimeout)
            }
            return .pending
        }
        // The one walk, from the cache alone: a hit (the whole alias chain cached) is answered here, its refreshes
        // handed to the caller to start after the write.
        var trace = WalkTrace(keepingSteps: true, keepingDependencies: false)
        if resolver.cachedWalk(query.nameText, type: query.type, class: query.class, options: options, trace: &trace)
            != nil
        {
            resolver.countHits(trace)
            refreshes.merge(trace.refreshes)
            return .reply(reply(query, parts: trace.steps, limit: limit))
        }
        // A question that can only be refused (its client, or everyone, at the limit of upstream queries in
        // flight) is answered here, without a task: a flood costs the stub no more than its replies.
        let queryClient = client.queryClient
        if let refused = resolver.refusalNow(
            query.nameText, type: query.type, class: query.class, dnssecOK: options.dnssecOK, client: queryClient,
            nameIsNormalized: true, after: trace)
        {
            return .reply(failure(query, refused, limit: limit))
        }
        // The miss: nothing cancels it, so the walk asks upstream in place, without a task where it can
        // (DNSResolver.walkInPlace).
        let reply = later()
        var missOptions = options
        missOptions.client = queryClient
        resolver.walkInPlace(
            query.nameText, type: query.type, class: query.class, options: missOptions, after: trace
        ) { result in
            switch result {
            case .success(let trace): reply(self.reply(query, parts: trace.steps, limit: limit))
            case .failure(let error): reply(self.failure(query, error, limit: limit))
            }
        }
        return .pending
    }

    /// Takes a place for a `.local` look-up; nil when `maxLocalLookups` run already. Call the result when done.
    private func enterLocalGate(_ settings: StubSettings) -> (@Sendable () -> Void)? {
        let running = localLookups.wrappingAdd(1, ordering: .relaxed).newValue
        guard running <= settings.maxLocalLookups else {
            localLookups.wrappingSubtract(1, ordering: .relaxed)
            return nil
        }
        return { self.localLookups.wrappingSubtract(1, ordering: .relaxed) }
    }

    private func localBusy(_ query: StubQuery, limit: Int) -> [UInt8] {
        counters.serverFailures.bump()
        return finish(query, code: .servFail, error: .other("too many .local look-ups in flight; try again"), limit: limit)
    }

    /// Starts the refreshes that ``handle(_:client:overTCP:refreshes:later:)`` handed out.
    public func startRefreshes(_ refreshes: PendingRefreshes) {
        if !refreshes.isEmpty { resolver.startRefreshes(refreshes) }
    }

    /// Runs `body` in a task and hands its reply to `later`. The task prefers the loop of the first upstream's kept
    /// connection when there is one (``DNSResolver/preferredExecutor``), as does the walk's upstream task: a DoT or
    /// DoH miss then changes threads once, when the UDP worker hands it over, and its async calls and resumptions
    /// continue in place on that loop.
    private func startTask(_ later: @escaping @Sendable ([UInt8]) -> Void, _ body: @escaping @Sendable () async -> [UInt8]) {
        Task(executorPreference: resolver.preferredExecutor) { later(await body()) }
    }

    /// Queries answered without the cache: meta types, ANY (RFC 8482), other classes than IN and CH.
    private func special(_ query: StubQuery, limit: Int) -> [UInt8]? {
        let type = query.type.rawValue
        if type == RRType.opt.rawValue {
            counters.formatErrors.bump()
            return finish(query, code: .formErr, limit: limit)
        }
        if (249...254).contains(type) || query.class == .any {
            // TKEY, TSIG, IXFR, AXFR, MAILB, MAILA: not for a stub. QCLASS * likewise.
            return finish(query, code: .notImp, error: .notSupported("\(query.type) queries are not supported"),
                limit: limit)
        }
        if query.type == .any {
            // RFC 8482 §4.2: answer ANY with one synthesized HINFO record instead of every RRset.
            let hinfo = ResourceRecord(
                name: query.name.text, type: RRType(13), class: query.class, ttl: 3600,
                rdata: [7] + Array("RFC8482".utf8) + [0])
            let part = AnswerPart(sections: EncodedSections(answer: [hinfo], authority: []), ttl: 3600)
            return finish(query, code: .noError, parts: [part], limit: limit)
        }
        return nil
    }

    // MARK: - Unicast: cache, upstream, CNAME chains

    /// A miss or a CNAME chain: the one walk fetches what the cache lacks and follows the chain.
    nonisolated(nonsending) private func resolve(_ query: StubQuery, options: WalkOptions, limit: Int) async -> [UInt8] {
        var trace = WalkTrace(keepingSteps: true, keepingDependencies: false)
        do {
            _ = try await resolver.walk(query.nameText, type: query.type, class: query.class, options: options, trace: &trace)
        } catch {
            return failure(query, error, limit: limit)
        }
        return reply(query, parts: trace.steps, limit: limit)
    }

    private func code(of answer: CacheAnswer<CachedRRset>) -> StubReply.Code {
        if case .nxdomain = answer { return .nxDomain }
        return .noError
    }

    /// The reply made of a walk's steps, with EDE 3 when any was stale; the last step decides the code (RFC 6604:
    /// the rcode is the chain end's). One pass, the steps borrowed (a cache hit copies no step).
    private func reply(_ query: StubQuery, parts: WalkSteps, limit: Int) -> [UInt8] {
        var stale = false
        var staleSeconds: UInt32?
        var forwarded = false
        var code = StubReply.Code.servFail
        var answerParts: [AnswerPart] = []
        answerParts.reserveCapacity(parts.count)
        // AD (RFC 6840 §5.7): every part validated secure and fresh, to a client that set DO or AD.
        var secure = (query.edns?.dnssecOK ?? false) || query.authenticData
        parts.forEach { part in
            if part.source == .expiredCache || part.answer.payload?.validation?.state != .secure { secure = false }
            switch part.source {
            case .expiredCache:
                stale = true
                staleSeconds = part.staleSeconds
            case .network: forwarded = true
            case .cache: break
            }
            if let payload = part.answer.payload { answerParts.append(AnswerPart(sections: payload.wire, ttl: part.ttl)) }
            code = self.code(of: part.answer)
        }
        if stale { counters.staleAnswers.bump() } else if forwarded { counters.forwarded.bump() } else {
            counters.cacheAnswers.bump()
        }
        // Only a client that sent EDNS gets the EDE (RFC 8914 §3), so only its answer pays for the text.
        var ede: ExtendedDNSError?
        if stale, query.edns != nil {
            let ago = staleSeconds.map { " \($0) s ago" } ?? ""
            ede = .staleAnswer("expired\(ago); refreshing")
        }
        return finish(query, code: code, parts: answerParts, error: ede, authenticated: secure, limit: limit)
    }

    /// SERVFAIL with an EDE naming the cause.
    private func failure(_ query: StubQuery, _ error: ResolverError, limit: Int) -> [UInt8] {
        counters.serverFailures.bump()
        let server = error.attempts.last?.server ?? resolver.upstreamDescription
        let ede: ExtendedDNSError
        switch error.code {
        case _ where error.dnssec != nil:
            // RFC 8914 §4.7–4.13: the exact DNSSEC code, with the name that failed and why.
            ede = .dnssec(error.dnssec?.ede ?? 6, error.dnssec?.reason ?? "\(error.name): DNSSEC bogus")
        case .timeout:
            // RFC 8914 §4.23: with what the tries failed with, when they failed rather than waited (a closed port).
            ede = .noReachableAuthority(
                error.reason.map { "no answer from \(resolver.upstreamDescription) (\($0))" }
                    ?? "no answer from \(resolver.upstreamDescription) in time")
        case .upstreamFailure:
            // The upstream's own EDE, when it gave one, is the more exact reason (a validating upstream's DNSSEC
            // Bogus, a forwarder's No Reachable Authority): its code passes on, its text after the upstream's name.
            let answered = "\(server) answered \(error.rcode ?? "an error")"
            ede =
                error.upstreamError.map {
                    .init(code: $0.code, text: $0.text.isEmpty ? answered : "\(answered): \($0.text)")
                } ?? .networkError(answered)
        case .networkError:
            // RFC 8914 §4.24: Network Error, with what failed (certificate, handshake, strict mode) in the text.
            ede = .networkError(error.reason ?? "no secure path to an upstream")
        case .tooManyQueries:
            // RFC 8914 has no code for "overloaded": EDE 0 with the limit in its text. SERVFAIL, not silence: the
            // client learns at once and its resolver may try another server; cached names keep being answered.
            ede = .other("not asked upstream: \(error.reason ?? "too many queries in flight")")
        default:
            ede = .other(error.description)
        }
        logger.debug("stub: upstream failure", metadata: ["dns.name": "\(query.name)", "error": "\(error)"])
        return finish(query, code: .servFail, error: ede, limit: limit)
    }

    // MARK: - mDNS

    private func answerLinkReverse(_ query: StubQuery, options: WalkOptions, limit: Int, timeout: Duration) async
        -> [UInt8]
    {
        if let local,
            let found = try? await local.lookup(
                name: query.name, type: query.type, class: query.class, interface: nil, window: timeout),
            !found.isEmpty
        {
            counters.local.bump()
            return localReply(query, found, limit: limit)
        }
        return await resolve(query, options: options, limit: limit)
    }

    /// A name under a discovery-proxy domain (RFC 8766): synthesized SOA/NS and browse-domain PTRs, everything
    /// else from `.local` on the link with names rewritten.
    private func answerProxy(_ query: StubQuery, zone: DNSName, proxy: DiscoveryProxySettings, limit: Int) async
        -> [UInt8]
    {
        counters.local.bump()
        let relative = Array(query.name.labels.dropLast(zone.labels.count))
        let soa = EncodedSections(answer: [], authority: [DiscoveryProxy.soa(zone)])
        func records(_ list: [ResourceRecord]) -> [UInt8] {
            let part = AnswerPart(sections: EncodedSections(answer: list, authority: []), ttl: DiscoveryProxy.maximumTTL)
            return finish(query, code: .noError, parts: [part], limit: limit)
        }
        func negative(_ code: StubReply.Code) -> [UInt8] {
            finish(query, code: code, parts: [AnswerPart(sections: soa, ttl: DiscoveryProxy.maximumTTL)], limit: limit)
        }
        if relative.isEmpty {
            switch query.type {
            case .soa: return records([DiscoveryProxy.soa(zone)])
            case .ns: return records([DiscoveryProxy.ns(zone)])
            default: return negative(.noError)
            }
        }
        if relative == [Array("ns".utf8)], query.type == .a || query.type == .aaaa {
            let family = query.type == .a ? 4 : 16
            let own = AddressRange.localAddresses().map(\.network).filter { (bytes: [UInt8]) -> Bool in
                guard bytes.count == family else { return false }
                if AddressRange.loopback.contains(where: { $0.contains(bytes) }) { return false }
                let linkLocal = bytes.count == 16 && bytes[0] == 0xFE && (bytes[1] & 0xC0) == 0x80
                return !linkLocal
            }
            let list = own.map { ResourceRecord(name: query.name.text, type: query.type, ttl: 10, rdata: $0) }
            return list.isEmpty ? negative(.noError) : records(list)
        }
        if DiscoveryProxy.isBrowseDomainQuery(relative) {
            guard query.type == .ptr else { return negative(.noError) }
            return records([ResourceRecord(name: query.name.text, type: .ptr, ttl: 10, rdata: zone.wire)])
        }
        guard let local, let localName = DiscoveryProxy.toLocal(query.name, zone: zone) else {
            return negative(.nxDomain)
        }
        do {
            let found = try await local.lookup(
                name: localName, type: query.type, class: query.class, interface: proxy.interfaceIndex,
                window: proxy.window)
            let rewritten = found.compactMap { DiscoveryProxy.rewrite($0, zone: zone) }
            if !rewritten.isEmpty { return records(rewritten) }
            // Nothing of this type: NODATA when the name has data of the other address family, else NXDOMAIN.
            if query.type == .a || query.type == .aaaa {
                let other = try await local.lookup(
                    name: localName, type: query.type == .a ? .aaaa : .a, class: query.class,
                    interface: proxy.interfaceIndex, window: .milliseconds(200))
                if !other.compactMap({ DiscoveryProxy.rewrite($0, zone: zone) }).isEmpty { return negative(.noError) }
            }
            return negative(found.isEmpty ? .nxDomain : .noError)
        } catch {
            counters.serverFailures.bump()
            return finish(query, code: .servFail, error: .networkError(error.message), limit: limit)
        }
    }

    private func localReply(_ query: StubQuery, _ found: [ResourceRecord], limit: Int) -> [UInt8] {
        // Link data changes fast and carries no SOA: keep client caching short, as a discovery proxy would.
        let ttl = min(found.map(\.ttl).min() ?? 10, 10)
        let part = AnswerPart(sections: EncodedSections(answer: found, authority: []), ttl: ttl)
        return finish(query, code: .noError, parts: [part], limit: limit)
    }

    private func answerLocal(_ query: StubQuery, limit: Int, timeout: Duration) async -> [UInt8] {
        guard let local else {
            counters.serverFailures.bump()
            return finish(query, code: .servFail, error: .networkError("no mDNS client (Avahi) in this daemon"),
                limit: limit)
        }
        counters.local.bump()
        do {
            // A and AAAA ask both families at once: an empty answer is NODATA when the other family exists
            // (so getaddrinfo can tell "no IPv6" from "no such host"), NXDOMAIN when neither does.
            let other: RRType? = query.type == .a ? .aaaa : query.type == .aaaa ? .a : nil
            async let records = local.lookup(
                name: query.name, type: query.type, class: query.class, interface: nil, window: timeout)
            async let otherRecords: [ResourceRecord] = {
                guard let other else { return [] }
                return try await local.lookup(
                    name: query.name, type: other, class: query.class, interface: nil, window: timeout)
            }()
            let found = try await records
            let otherFound = (try? await otherRecords) ?? []
            let exists = !found.isEmpty || !otherFound.isEmpty
            guard exists else { return finish(query, code: .nxDomain, limit: limit) }
            return localReply(query, found, limit: limit)
        } catch let error as LocalLookupError {
            counters.serverFailures.bump()
            return finish(query, code: .servFail, error: .networkError(error.message), limit: limit)
        } catch {
            counters.serverFailures.bump()
            return finish(query, code: .servFail, error: .other("\(error)"), limit: limit)
        }
    }

    // MARK: - Encoding

    private func finish(
        _ query: StubQuery, code: StubReply.Code, parts: [AnswerPart] = [], error: ExtendedDNSError? = nil,
        authenticated: Bool = false, limit: Int
    ) -> [UInt8] {
        let includeDNSSEC = (query.edns?.dnssecOK ?? false) || EncodedSections.isDNSSEC(query.type)
        let (bytes, truncated) = StubReply.make(
            to: query, code: code, parts: parts, includeDNSSEC: includeDNSSEC, error: error,
            authenticated: authenticated, limit: limit)
        if truncated { counters.truncated.bump() }
        return bytes
    }
}
