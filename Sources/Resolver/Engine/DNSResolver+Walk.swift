import DNSCore

/// How a walk may use the cache and the network.
public struct WalkOptions: Sendable {
    /// Expired answers may be served (then refreshed in parallel).
    public var optimistic: Bool
    /// Ask upstream with DO and keep the RRSIGs and proofs; a cached entry fetched without DO does not serve.
    public var dnssecOK: Bool
    /// When the network fails for a hop, serve its expired data (negative answers too) if there is any
    /// (RFC 8767 §4; the stub does this always, an API caller only when it allowed optimistic answers).
    public var staleOnFailure: Bool
    /// Who upstream queries count against (``QueryLimits``).
    public var client: QueryClient?
    /// CD (RFC 4035 §3.2.2): bogus entries are served as they came, and nothing is called secure.
    public var checkingDisabled: Bool
    /// The name is a valid name's presentation text, lowercased and absolute (the DNS stub's, decoded from the
    /// wire): the walk and its cache keys take it as it is instead of checking and normalising it again.
    /// Default false (the API's names are text a client wrote).
    public var nameIsNormalized: Bool
    /// A hop nobody asks upstream yet is asked in the walk's own task instead of one of its own (other askers of
    /// the same question join it). Only for a caller whose task is never cancelled during the walk, since its
    /// joiners share the outcome: the DNS stub's. Default false.
    public var fetchInPlace = false

    public init(
        optimistic: Bool = true, dnssecOK: Bool = false, staleOnFailure: Bool = true, client: QueryClient? = nil,
        checkingDisabled: Bool = false, nameIsNormalized: Bool = false
    ) {
        self.checkingDisabled = checkingDisabled
        self.nameIsNormalized = nameIsNormalized
        self.optimistic = optimistic
        self.dnssecOK = dnssecOK
        self.staleOnFailure = staleOnFailure
        self.client = client
    }
}

/// What a walk collected besides its result: every hop's answer, where it came from, the entries it used and the
/// refreshes it was elected to run.
public struct WalkTrace: Sendable {
    /// Every hop's answer in chain order (kept only when the caller asked for them: the stub assembles its reply
    /// from them). The first is held inline: nearly every walk has one hop, and a cache hit allocates no array.
    public var steps: WalkSteps { WalkSteps(first: firstStep, rest: laterSteps) }
    private var firstStep: RecordAnswer?
    private var laterSteps: [RecordAnswer] = []
    var provenance = Provenance()
    var dependencies = CacheDependencies()
    /// Refreshes to start once the answer is written.
    public var refreshes = PendingRefreshes()
    var keepsSteps: Bool
    /// Whether the entries used are recorded (the API's kept replies revalidate them; the stub has no use for them).
    var keepsDependencies: Bool
    /// A stale hop that carried an alias was met: its refresh restarts the chain there, so the stale names behind
    /// it are not refreshed on their own.
    var restartsAtAlias = false
    /// The first hop's key when ``DNSResolver/cachedWalk(_:type:class:options:trace:)`` found nothing for it (fresh,
    /// or stale where allowed): what the walk after it asks upstream first, not hashed again.
    var firstKey: CacheKey?
    /// The first hop missed: the walk's first step is an upstream query.
    public var missedFirstHop: Bool { firstKey != nil }

    /// - Parameters:
    ///   - keepingSteps: record every hop's answer (the stub assembles its reply from them).
    ///   - keepingDependencies: record the entries used, for ``DNSResolver/revalidate(_:optimistic:)``.
    public init(keepingSteps: Bool, keepingDependencies: Bool = true) {
        keepsSteps = keepingSteps
        keepsDependencies = keepingDependencies
    }

    /// The weakest DNSSEC state of the entries the walk used (docs/DNSSEC.md).
    public var dnssec: DNSSECState { provenance.reportedDNSSEC }

    /// Records a hop the network answered.
    mutating func addFetched(_ answer: CacheAnswer<CachedRRset>, ttl: UInt32, attempts: [QueryAttempt]) {
        provenance.addDNSSEC(answer.payload, stale: false)
        provenance.sources.insert(.network)
        provenance.ttl = min(provenance.ttl, ttl)
        provenance.addAttempts(attempts)
        record(RecordAnswer(answer: answer, ttl: ttl, source: .network, staleSeconds: nil, attempts: attempts))
    }

    /// Records a hop's answer when steps are kept.
    mutating func record(_ step: @autoclosure () -> RecordAnswer) {
        guard keepsSteps else { return }
        if firstStep == nil { firstStep = step() } else { laterSteps.append(step()) }
    }
}

/// A walk's hops in chain order (``WalkTrace/steps``), without an array for the first.
public struct WalkSteps: Sequence, Sendable {
    @usableFromInline let first: RecordAnswer?
    @usableFromInline let rest: [RecordAnswer]

    public var count: Int { first == nil ? 0 : 1 + rest.count }
    /// The chain's end, whose answer decides the rcode.
    public var last: RecordAnswer? { rest.last ?? first }

    public struct Iterator: IteratorProtocol {
        var first: RecordAnswer?
        var rest: IndexingIterator<[RecordAnswer]>

        public mutating func next() -> RecordAnswer? {
            if let step = first {
                first = nil
                return step
            }
            return rest.next()
        }
    }

    public func makeIterator() -> Iterator { Iterator(first: first, rest: rest.makeIterator()) }

    /// Calls `body` with each step in chain order, without copying them (the stub's hot path).
    @inlinable public func forEach(_ body: (RecordAnswer) throws -> Void) rethrows {
        guard let first else { return }
        try body(first)
        for step in rest { try body(step) }
    }
}

extension DNSResolver {
    /// The one alias chase of the resolver, from the cache alone: the records of `type` at the end of the
    /// CNAME/DNAME chain from `name`, or nil when a hop is not cached (fresh, or stale when optimistic). Used by
    /// the API's cache hits and the DNS stub's hot path. Refreshes of stale hops are added to `trace` (start them
    /// after writing the answer); on a miss the ones elected so far are started at once.
    public func cachedWalk(
        _ name: String, type: RRType, class rrClass: RRClass = .in, options: WalkOptions, trace: inout WalkTrace
    ) -> RRsetResult? {
        let firstKey = CacheKey(
            name: name, isNormalized: options.nameIsNormalized, type: type.rawValue, dnsClass: rrClass.rawValue)
        var first = lookupHop(firstKey, type: type, options: options, counting: false, trace: &trace)
        // Nearly every hit: the first entry holds the records themselves (scrubbed entries hold the asked type at
        // the name first, no alias): no chain to build.
        if let hop = first, !options.checkingDisabled, hop.payload?.validation?.state == .bogus {
            // A bogus answer is not served from here: the async walk reports it (SERVFAIL with its EDE).
            return nil
        }
        switch first {
        case .positive(let rrset)?:
            if let head = rrset.records.first, head.type == type, head.name == firstKey.name {
                if !rrset.dnssecOK {
                    return RRsetResult(answer: .records(rrset.records, owner: firstKey.name), cnames: [], memo: rrset.memo)
                }
                // A signed entry also holds its RRSIGs: without an alias in it, the answer is the records of the
                // type at the name, as `cnameStep` would find them (and a validating resolver's hits stay here).
                if !rrset.records.contains(where: { $0.type == .cname || $0.type == ReplyScrubber.dname }) {
                    let records = rrset.records.filter { $0.type == type && $0.name == firstKey.name }
                    return RRsetResult(answer: .records(records, owner: firstKey.name), cnames: [], memo: rrset.memo)
                }
            }
        // A negative first hop ends the walk as `cnameStep` would end it, without building a chain.
        case .nxdomain?: return RRsetResult(answer: .nxdomain, cnames: [])
        case .nodata?: return RRsetResult(answer: .nodata, cnames: [])
        case nil: break
        }
        if first == nil {
            startRefreshes(trace.refreshes)
            trace.refreshes = PendingRefreshes()
            trace.firstKey = firstKey
            return nil
        }
        var chain = AliasChain(
            start: firstKey.name, isNormalized: options.nameIsNormalized, maximumHops: configuration.maximumAliasHops)
        while true {
            let entry: CacheAnswer<CachedRRset>?
            if let hop = first {
                entry = hop
                first = nil
            } else {
                // After the first hop: an alias target, a valid name the chain normalised.
                let key = CacheKey(normalizedName: chain.current, type: type.rawValue, dnsClass: rrClass.rawValue)
                entry = lookupHop(key, type: type, options: options, counting: false, trace: &trace)
            }
            guard let entry, options.checkingDisabled || entry.payload?.validation?.state != .bogus else {
                startRefreshes(trace.refreshes)
                trace.refreshes = PendingRefreshes()
                return nil
            }
            do {
                if let result = try cnameStep(entry, name: name, type: type, chain: &chain, provenance: trace.provenance)
                {
                    return result
                }
            } catch {
                startRefreshes(trace.refreshes)
                trace.refreshes = PendingRefreshes()
                return nil
            }
        }
    }

    /// The one alias chase of the resolver: like ``cachedWalk(_:type:class:options:trace:)``, asking the upstreams
    /// (through the in-flight table) for every hop the cache lacks. Refreshes of stale hops are started here.
    /// - Throws: ``ResolverError``: `timeout`, `upstreamFailure` (also for an alias loop or an overlong chain),
    ///   `tooManyQueries`, `invalidName`.
    nonisolated(nonsending) public func walk(
        _ name: String, type: RRType, class rrClass: RRClass = .in, options: WalkOptions, trace: inout WalkTrace
    ) async throws(ResolverError) -> RRsetResult {
        try await walk(name, type: type, class: rrClass, options: options, trace: &trace, firstHop: nil)
    }

    /// The DNS stub's miss: ``walk(_:type:class:options:trace:)`` with ``WalkOptions/fetchInPlace``, after
    /// ``cachedWalk(_:type:class:options:trace:)`` returned nil with `trace`, and without a task where it can be.
    ///
    /// When the first hop missed (``WalkTrace/missedFirstHop``), nobody asks its question yet, and the transport
    /// asks without a task (``DNSTransport/startQuery(_:dnssecOK:completion:)``: one upstream over its kept DoT or
    /// DoH connection), the hop is fetched by callback; when its answer ends the chain, as for nearly every miss,
    /// the walk ends in that callback, on the connection's loop. Everything else is the walk in a task, handed the
    /// hop fetched already if there is one (a longer chain, a failure and what RFC 8767 serves for it).
    ///
    /// `completion` runs exactly once, with the walk's trace (its steps kept, as the stub assembles its reply from
    /// them) or its error.
    public func walkInPlace(
        _ name: String, type: RRType, class rrClass: RRClass = .in, options: WalkOptions, after trace: WalkTrace,
        completion: @escaping @Sendable (Result<WalkTrace, ResolverError>) -> Void
    ) {
        let options = {
            var options = options
            options.fetchInPlace = true
            return options
        }()
        guard let key = trace.firstKey else {
            return walkInTask(name, type: type, class: rrClass, options: options, firstHop: nil, completion: completion)
        }
        let dnssecOK = options.dnssecOK || validator.active
        let inflightKey = InflightKey(cacheKey: key, dnssecOK: dnssecOK, checkingDisabled: false)
        // The first hop's lookup, made uncounted by cachedWalk, is the walk's: a miss.
        cache.countMiss()
        let fetch: InPlaceFetch
        switch inflight.admitInPlace(inflightKey, client: options.client) {
        case .run(let admitted):
            fetch = admitted
        case .joined(let running):
            Task(executorPreference: transport.preferredExecutor) { [self] in
                await walkReporting(
                    name, type: type, class: rrClass, options: options, firstHop: await running.value,
                    completion: completion)
            }
            return
        case .refused(let global):
            let error = refusal(name: name, type: type, global: global, client: options.client)
            return walkInTask(
                name, type: type, class: rrClass, options: options, firstHop: .failure(error), completion: completion)
        }
        let started = startQuery(name: key.name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key) {
            [self] (outcome: FetchOutcome, written: Bool) in
            // After the answer went out (or the walk's task was started): the cache, then the question in flight,
            // whose joiners get the outcome; a question asked in between joins it instead of asking again.
            defer {
                if !written { write(outcome, for: key) }
                inflight.finishInPlace(inflightKey, fetch, outcome: outcome)
            }
            guard case .answer(let answer, let ttl, let attempts) = outcome else {
                return walkInTask(name, type: type, class: rrClass, options: options, firstHop: outcome,
                    completion: completion)
            }
            var trace = WalkTrace(keepingSteps: true, keepingDependencies: false)
            trace.addFetched(answer, ttl: ttl, attempts: attempts)
            var chain = AliasChain(
                start: key.name, isNormalized: true, maximumHops: configuration.maximumAliasHops)
            do throws(ResolverError) {
                if try step(answer, name: name, type: type, options: options, chain: &chain, trace: trace) != nil {
                    return completion(.success(trace))
                }
            } catch {
                return completion(.failure(error))
            }
            // The chain goes on past this answer: the walk follows it, from this hop.
            walkInTask(name, type: type, class: rrClass, options: options, firstHop: outcome, completion: completion)
        }
        if !started {
            // The transport asks only in a task: the walk asks there, for the question admitted here.
            Task(executorPreference: transport.preferredExecutor) { [self] in
                let outcome = await query(name: key.name, type: type, class: rrClass, dnssecOK: dnssecOK, key: key)
                inflight.finishInPlace(inflightKey, fetch, outcome: outcome)
                await walkReporting(name, type: type, class: rrClass, options: options, firstHop: outcome,
                    completion: completion)
            }
        }
    }

    /// The walk in a task of its own (on the first upstream's connection's loop), with its first hop's outcome
    /// when it was fetched already.
    private func walkInTask(
        _ name: String, type: RRType, class rrClass: RRClass, options: WalkOptions, firstHop: FetchOutcome?,
        completion: @escaping @Sendable (Result<WalkTrace, ResolverError>) -> Void
    ) {
        Task(executorPreference: transport.preferredExecutor) { [self] in
            await walkReporting(name, type: type, class: rrClass, options: options, firstHop: firstHop,
                completion: completion)
        }
    }

    /// The walk, its trace or its error handed to `completion`.
    nonisolated(nonsending) private func walkReporting(
        _ name: String, type: RRType, class rrClass: RRClass, options: WalkOptions, firstHop: FetchOutcome?,
        completion: @Sendable (Result<WalkTrace, ResolverError>) -> Void
    ) async {
        var trace = WalkTrace(keepingSteps: true, keepingDependencies: false)
        do {
            _ = try await walk(name, type: type, class: rrClass, options: options, trace: &trace, firstHop: firstHop)
            completion(.success(trace))
        } catch {
            completion(.failure(error))
        }
    }

    /// One hop of the walk with its entry in hand: a bogus entry ends it (RFC 4035 §5.5: SERVFAIL with the
    /// verdict's reason, unless CD), otherwise ``cnameStep(_:name:type:chain:provenance:)`` follows the chain.
    private func step(
        _ entry: CacheAnswer<CachedRRset>, name: String, type: RRType, options: WalkOptions, chain: inout AliasChain,
        trace: WalkTrace
    ) throws(ResolverError) -> RRsetResult? {
        if !options.checkingDisabled, let validation = entry.payload?.validation, validation.state == .bogus {
            throw ResolverError(
                code: .upstreamFailure, name: chain.current, rcode: "SERVFAIL",
                reason: "DNSSEC: \(validation.reason ?? "bogus")", attempts: trace.provenance.attempts,
                dnssec: validation)
        }
        return try cnameStep(entry, name: name, type: type, chain: &chain, provenance: trace.provenance)
    }

    /// ``walk(_:type:class:options:trace:)``, its first hop's outcome given when it was fetched already.
    nonisolated(nonsending) func walk(
        _ name: String, type: RRType, class rrClass: RRClass, options: WalkOptions, trace: inout WalkTrace,
        firstHop: FetchOutcome?
    ) async throws(ResolverError) -> RRsetResult {
        var given = firstHop
        defer {
            // Registered now, not handed to another loop: a `more` caller waits for these very refreshes next, and
            // each refresh yields before its query, so the answer still goes out first.
            beginRefreshes(trace.refreshes)
            trace.refreshes = PendingRefreshes()
        }
        var chain = AliasChain(
            start: name, isNormalized: options.nameIsNormalized, maximumHops: configuration.maximumAliasHops)
        while true {
            let current = chain.current
            // An alias target is a valid name from the wire, normalised by the chain; the start may be any text
            // (an invalid name is left as written there), so the key normalises it unless the caller did.
            let key = CacheKey(
                name: current, isNormalized: chain.names.count > 1 || options.nameIsNormalized, type: type.rawValue,
                dnsClass: rrClass.rawValue)
            var entry = given == nil ? lookupHop(key, type: type, options: options, counting: true, trace: &trace) : nil
            if entry == nil {
                let outcome: FetchOutcome
                if let fetched = given {
                    outcome = fetched
                    given = nil
                } else if options.fetchInPlace {
                    outcome = await fetchInPlace(
                        for: key, name: current, type: type, class: rrClass, dnssecOK: options.dnssecOK,
                        client: options.client)
                } else {
                    outcome = await upstreamTask(
                        for: key, name: current, type: type, class: rrClass, dnssecOK: options.dnssecOK,
                        isRefresh: false, client: options.client
                    ).value
                }
                switch outcome {
                case .answer(let answer, let ttl, let attempts):
                    trace.addFetched(answer, ttl: ttl, attempts: attempts)
                    entry = answer
                case .failure(let error):
                    trace.provenance.addAttempts(error.attempts)
                    // RFC 8767 §4: when the network fails, expired data (negative answers included) beats an error.
                    guard options.staleOnFailure,
                        case .stale(let stale, let seconds, let staleTTL, _) = cache.lookup(key, afterFailure: true)
                    else {
                        var error = error
                        error.attempts = trace.provenance.attempts
                        throw error
                    }
                    // Never past the expiry of the signatures that proved it (docs/DNSSEC.md).
                    if Self.signaturesExpired(stale, now: cache.clock.now()) {
                        var error = error
                        error.attempts = trace.provenance.attempts
                        throw error
                    }
                    trace.provenance.addDNSSEC(stale.payload, stale: true)
                    trace.provenance.sources.insert(.expiredCache)
                    trace.provenance.ttl = min(trace.provenance.ttl, staleTTL)
                    trace.provenance.staleSeconds = max(trace.provenance.staleSeconds ?? 0, seconds)
                    trace.record(
                        RecordAnswer(
                            answer: stale, ttl: staleTTL, source: .expiredCache, staleSeconds: seconds,
                            attempts: error.attempts))
                    entry = stale
                }
            }
            if let result = try step(entry!, name: name, type: type, options: options, chain: &chain, trace: trace) {
                return result
            }
        }
    }

    /// The cache part of one hop: a special-use name's answer, a fresh or stale entry (recorded in `trace`, its
    /// refresh elected under the CNAME restart rule), or nil for a miss.
    private func lookupHop(
        _ key: CacheKey, type: RRType, options: WalkOptions, counting: Bool, trace: inout WalkTrace
    ) -> CacheAnswer<CachedRRset>? {
        if let special = SpecialUseNames.answer(key.name, type: type, class: RRClass(key.dnsClass)) {
            trace.provenance.sources.insert(.cache)
            trace.provenance.cacheLookups += 1
            trace.provenance.addDNSSEC(nil, stale: false)
            trace.record(
                RecordAnswer(
                    answer: special, ttl: SpecialUseNames.ttl, source: .cache, staleSeconds: nil, attempts: []))
            return special
        }
        let lookup = cache.lookup(
            key, optimistic: options.optimistic, counting: counting, electRefresh: !trace.restartsAtAlias)
        // An entry fetched without DO lacks the signatures a DO client asks for: fetch it again, with DO.
        if options.dnssecOK, let answer = lookup.answer, !(answer.payload?.dnssecOK ?? false) { return nil }
        switch lookup {
        case .fresh(let answer, let remaining):
            trace.provenance.addDNSSEC(answer.payload, stale: false)
            trace.provenance.sources.insert(.cache)
            trace.provenance.ttl = min(trace.provenance.ttl, remaining)
            trace.provenance.cacheLookups += 1
            if trace.keepsDependencies {
                trace.dependencies.entries.append(
                    .init(key: key, type: type, generation: CacheDependencies.generation(of: answer)))
            }
            trace.record(RecordAnswer(answer: answer, ttl: remaining, source: .cache, staleSeconds: nil, attempts: []))
            return answer
        case .stale(let answer, let staleSeconds, let answerTTL, let shouldRefresh):
            // Validated data is never served past its signatures' expiry: a miss, fetched again.
            if Self.signaturesExpired(answer, now: cache.clock.now()) { return nil }
            trace.provenance.addDNSSEC(answer.payload, stale: true)
            trace.provenance.sources.insert(.expiredCache)
            trace.provenance.ttl = min(trace.provenance.ttl, answerTTL)
            trace.provenance.staleSeconds = max(trace.provenance.staleSeconds ?? 0, staleSeconds)
            trace.provenance.staleKeys.append(key)
            trace.provenance.cacheLookups += 1
            if trace.keepsDependencies {
                trace.dependencies.entries.append(
                    .init(key: key, type: type, generation: CacheDependencies.generation(of: answer)))
            }
            // draft-gakiwate-dnsop-optimistic-dns, "CNAME Handling": the network query starts at the first
            // expired CNAME and follows the chain from there; the names behind it are not refreshed on their own.
            let carriesAlias = type != .cname && Self.hasAlias(answer, at: key.name)
            if shouldRefresh {
                trace.refreshes.items.append(
                    .init(
                        key: key, name: key.name, type: type, rrClass: RRClass(key.dnsClass),
                        dnssecOK: options.dnssecOK, followsChain: carriesAlias))
            }
            if carriesAlias { trace.restartsAtAlias = true }
            trace.record(
                RecordAnswer(
                    answer: answer, ttl: answerTTL, source: .expiredCache, staleSeconds: staleSeconds, attempts: []))
            return answer
        case .miss:
            return nil
        }
    }

    /// Whether the signatures that proved a secure entry have expired (`now` in seconds since the epoch).
    static func signaturesExpired(_ answer: CacheAnswer<CachedRRset>, now: Double) -> Bool {
        guard let expiration = answer.payload?.validation?.expiration else { return false }
        return Double(expiration) <= now
    }

    /// Whether a positive answer holds a CNAME (or DNAME) on its way from `name`.
    static func hasAlias(_ answer: CacheAnswer<CachedRRset>, at name: String) -> Bool {
        guard case .positive(let rrset) = answer else { return false }
        return rrset.records.contains { ($0.type == .cname && $0.name == name) || $0.type == ReplyScrubber.dname }
    }

    /// A refresh that restarts at an expired alias: after the alias's own answer, the chain it now names is
    /// followed to its end (network for whatever is not fresh), so the next lookup finds it complete.
    func refreshChain(_ refresh: PendingRefreshes.Refresh, first: Task<FetchOutcome, Never>) {
        Task {
            guard case .answer(let answer, _, _) = await first.value, case .positive(let rrset) = answer else { return }
            var chain = AliasChain(start: refresh.name, maximumHops: configuration.maximumAliasHops)
            guard (try? chain.followCNAMEs(type: refresh.type, in: rrset.records))?.isEmpty == true,
                !chain.aliases.isEmpty
            else { return }
            var trace = WalkTrace(keepingSteps: false)
            _ = try? await walk(
                chain.current, type: refresh.type, class: refresh.rrClass,
                options: WalkOptions(optimistic: false, dnssecOK: refresh.dnssecOK, staleOnFailure: false),
                trace: &trace)
        }
    }
}
