import DNSCore
import Logging
import NIOCore
import Synchronization

/// Discovery of Designated Resolvers (RFC 9462) for one plain upstream: on its first query, again before the
/// designation's TTL runs out, and after a reload.
///
/// The plain upstream is asked `_dns.resolver.arpa SVCB` (RFC 9462 §4). ServiceMode records are tried in priority
/// order; one with ALPN `dot` (RFC 7858, port 853 unless `port`) or `h2` with a `dohpath` (RFC 9461) becomes the
/// encrypted path to it. The designated resolver's address comes from `ipv4hint`/`ipv6hint`, else from A/AAAA
/// records of the TargetName in the additional section, else from asking the plain upstream for them; the
/// upstream's own address is preferred when designated.
///
/// How the designation is trusted (checked at every handshake of its connection):
/// - **Verified** (§4.2): the chain against the trust store and an iPAddress subjectAltName for the plain upstream's
///   original address, also when the designated resolver is at another address (§7). Used in `strict` and
///   `opportunistic` modes; Status says `ddr-verified`.
/// - **Opportunistic** (§4.3): a plain upstream on a private or local address (RFC 1918, RFC 6598, loopback,
///   link-local, ULA) whose designation is at that same address may be used with the Opportunistic Privacy
///   Profile of RFC 7858 §4.1: TLS without authentication (no certificate of a private address can be verified),
///   so passive observers see nothing. Only with `encryption = opportunistic`, never in `strict`, never for a
///   designation at another address (§7); its validity is capped at 5 minutes. Status says `ddr-opportunistic`.
///
/// Re-discovery: a query made after 80% of the designation's TTL (the smallest TTL of the SVCB answer; a negative
/// answer's SOA TTL; 30 s after no answer) starts discovery again in the background, and queries keep using the
/// current designation until the new one is in place; a designation found again with the same address, port and
/// profile keeps its connection. One that failed verification is not retried before its TTL is over (§4.2).
final class DDRDiscovery: Sendable {
    /// One designated resolver in use, with its kept connection.
    final class Designation: Sendable, CustomStringConvertible {
        let connection: any EncryptedConnection
        let kind: QueryTransport
        /// The designated resolver as it is reached; `host` is the plain upstream's address (the certificate's
        /// identity, and the URI host of DoH requests, RFC 9462 §6.3).
        let server: UpstreamServer
        /// The address connected to.
        let address: String
        let target: String
        /// RFC 9462 §4.3: TLS without authentication.
        let opportunistic: Bool
        private let failure = Mutex<String?>(nil)
        private let reachability = Mutex(Reachability())

        /// How Status names an upstream that uses this designation.
        var origin: UpstreamOrigin { opportunistic ? .ddrOpportunistic : .ddrVerified }

        init(
            connection: any EncryptedConnection, kind: QueryTransport, server: UpstreamServer, address: String,
            target: String, opportunistic: Bool
        ) {
            self.connection = connection
            self.kind = kind
            self.server = server
            self.address = address
            self.target = target
            self.opportunistic = opportunistic
        }

        /// Why a handshake refused the designation, if one did (the upgrade is then not used until re-discovery).
        var verificationFailure: String? { failure.withLock { $0 } }

        func failed(_ reason: String) { failure.withLock { if $0 == nil { $0 = reason } } }

        /// Why the last try over the designation got no DNS reply (refused, reset, an HTTP error), while no later
        /// one has; opportunistic mode sends those queries in clear text meanwhile.
        var unreachableReason: String? { reachability.withLock { $0.reason } }

        /// Records how a try over the designation ended; true when that changes whether it is reachable.
        func reached(_ outcome: ExchangeOutcome) -> Bool { reachability.withLock { $0.record(outcome) } }

        /// `tls://192.0.2.53:853` or `tls://198.51.100.7:853 for 192.0.2.53`, with the target name.
        var description: String {
            var reached = server
            reached.host = address
            let at = address == server.host ? "" : " for \(server.host)"
            return "\(reached)\(at) (\(target))" + (opportunistic ? ", opportunistic" : "")
        }

        func same(as candidate: Candidate) -> Bool {
            server == candidate.server && address == candidate.address && opportunistic == candidate.opportunistic
        }
    }

    /// Whether a designation's tries get DNS replies: a failure (refused, reset, an HTTP error) makes it
    /// unreachable until a try is answered again; a timeout or a cancel says nothing either way.
    struct Reachability: Sendable {
        private(set) var reason: String?

        /// Records how a try ended; true when that changed whether the designation is reachable.
        mutating func record(_ outcome: ExchangeOutcome) -> Bool {
            switch outcome {
            case .response, .truncated:
                defer { reason = nil }
                return reason != nil
            case .failed(let why):
                defer { reason = why }
                return reason == nil
            case .timedOut, .insecure, .cancelled:
                return false
            }
        }
    }

    /// What one discovery found.
    struct Result: Sendable {
        var designation: Designation?
        /// What was found or why there is no upgrade, for Status and the strict refusal.
        var note: String
        /// When a query starts the next discovery.
        var refreshAt: NIODeadline
    }

    /// A designation before its connection exists (``designations(_:addresses:for:encryption:skipped:)``).
    struct Candidate: Sendable {
        var server: UpstreamServer
        var address: String
        var target: String
        var identity: TLSClientContext.Identity
        var opportunistic: Bool
    }

    private struct State {
        var result: Result?
        var running = false
        var waiting: [CheckedContinuation<Result, Never>] = []
    }

    let server: UpstreamServer
    private let address: SocketAddress
    private let configuration: UpstreamClient.Configuration
    private let statistics: UpstreamStatistics
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = Mutex(State())
    private let runs = Atomic<Int>(0)

    init(
        server: UpstreamServer, address: SocketAddress, configuration: UpstreamClient.Configuration,
        statistics: UpstreamStatistics, group: any EventLoopGroup, logger: Logger
    ) {
        self.server = server
        self.address = address
        self.configuration = configuration
        self.statistics = statistics
        self.group = group
        var logger = logger
        logger[metadataKey: "dns.server"] = "\(server)"
        self.logger = logger
    }

    /// The latest result, without waiting and without starting anything (for Status).
    var current: Result? { state.withLock { $0.result } }

    /// How many discoveries have run (for Status and tests).
    var discoveries: Int { runs.load(ordering: .relaxed) }

    /// What the last discovery found, without starting one (``usable()`` may).
    var known: Result? { state.withLock { $0.result } }

    /// The latest result without waiting; starts discovery in the background when there is none yet or it is due.
    func usable() -> Result? {
        let (result, start) = state.withLock { state -> (Result?, Bool) in
            let due = state.result.map { NIODeadline.now() >= $0.refreshAt } ?? true
            guard due, !state.running else { return (state.result, false) }
            state.running = true
            return (state.result, true)
        }
        if start {
            // Unstructured on purpose: no caller waits for it, and it ends by itself within one query's timeouts.
            Task { await self.run() }
        }
        return result
    }

    /// The latest result; waits for the first discovery when there is none yet (strict mode: nothing may go out
    /// in clear text before it is known). A due re-discovery runs in the background meanwhile.
    func result() async -> Result {
        if let result = usable() { return result }
        return await withCheckedContinuation { continuation in
            let ready: Result? = state.withLock { state in
                if let result = state.result { return result }
                state.waiting.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Makes the next query start discovery again (reload, a changed network); the current designation stays in
    /// use until the new one is known.
    func rediscover() {
        state.withLock { state in
            if var result = state.result {
                result.refreshAt = .now()
                state.result = result
            }
        }
    }

    /// Closes the upgraded connection (reload, when the upstream is gone).
    func shutdown() { current?.designation?.connection.shutdown() }

    private func run() async {
        runs.add(1, ordering: .relaxed)
        let previous = current
        let fresh = await discover(previous: previous)
        let waiting = state.withLock { state -> [CheckedContinuation<Result, Never>] in
            state.result = fresh
            state.running = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume(returning: fresh) }
        if let old = previous?.designation, old !== fresh.designation {
            // Tries already on the old connection get their answers before it closes.
            let connection = old.connection
            group.next().scheduleTask(in: TimeAmount(configuration.tcpTimeout) + .seconds(1)) {
                connection.shutdown()
            }
        }
    }

    private func discover(previous: Result?) async -> Result {
        let now = NIODeadline.now()
        let answer = await ask("_dns.resolver.arpa.", .svcb)
        guard case .response(let message) = answer else {
            if let kept = previous?.designation, kept.verificationFailure == nil {
                // RFC 9462 §7: a dropped answer must not undo a verified upgrade; ask again soon.
                logger.info("DDR: no answer to re-discovery; keeping the designation", metadata: ["reason": "\(answer.reason)"])
                return Result(
                    designation: kept, note: "DDR: designated \(kept); re-discovery got no answer (\(answer.reason))",
                    refreshAt: now + .seconds(30))
            }
            return finish(
                Result(
                    designation: nil, note: "DDR: no answer to _dns.resolver.arpa SVCB (\(answer.reason))",
                    refreshAt: now + .seconds(30)))
        }
        let svcb = message.answer.filter { $0.type == .svcb }
        let records = svcb.compactMap { try? $0.svcb() }.filter { !$0.isAliasMode }
        guard !records.isEmpty else {
            let negative = message.authority.first { $0.type == .soa }.map { soa in
                min(soa.ttl, (try? soa.soa().minimum) ?? soa.ttl)
            }
            return finish(
                Result(
                    designation: nil, note: "DDR: no designation (\(message.rcode), \(message.answer.count) records)",
                    refreshAt: now + Self.refresh(ttl: negative ?? 300)))
        }
        let ttl = svcb.map(\.ttl).min() ?? 300

        // Addresses of TargetNames without hints: the additional section, else the plain upstream itself.
        var addresses: [String: [String]] = [:]
        for record in message.additional where record.type == .a || record.type == .aaaa {
            let text = record.type == .a ? (try? record.ipv4Address()) : (try? record.ipv6Address())
            if let text { addresses[record.name.lowercased(), default: []].append(text) }
        }
        for record in records where record.params.ipv4hint.isEmpty && record.params.ipv6hint.isEmpty {
            let target = record.target.text.lowercased()
            guard addresses[target] == nil, Self.usableTarget(target) else { continue }
            var found: [String] = []
            for type in [RRType.a, .aaaa] {
                guard case .response(let reply) = await ask(target, type) else { continue }
                found += reply.answer.filter { $0.type == type }.compactMap {
                    type == .a ? (try? $0.ipv4Address()) : (try? $0.ipv6Address())
                }
            }
            addresses[target] = found
        }

        var skipped: [String] = []
        let candidates = Self.designations(
            records, addresses: addresses, for: server.host, encryption: configuration.encryption, skipped: &skipped)
        for candidate in candidates {
            let lifetime = candidate.opportunistic ? min(ttl, 300) : ttl
            if let kept = previous?.designation, kept.same(as: candidate), kept.verificationFailure == nil {
                return Result(
                    designation: kept, note: "DDR: designated \(kept)", refreshAt: now + Self.refresh(ttl: lifetime))
            }
            do {
                let connection = try EncryptedConnections.make(
                    candidate.server, address: SocketAddress(ipAddress: candidate.address, port: candidate.server.port),
                    configuration: configuration, statistics: statistics, group: group, logger: logger,
                    identity: candidate.identity)
                let designation = Designation(
                    connection: connection, kind: candidate.server.transport == .tls ? .tls : .https,
                    server: candidate.server, address: candidate.address, target: candidate.target,
                    opportunistic: candidate.opportunistic)
                logger.info("DDR: upgrading the plain upstream", metadata: ["dns.designated": "\(designation)"])
                return Result(
                    designation: designation, note: "DDR: designated \(designation)",
                    refreshAt: now + Self.refresh(ttl: lifetime))
            } catch {
                skipped.append("\(candidate.server): TLS set-up failed: \(error)")
            }
        }
        return finish(
            Result(
                designation: nil, note: "DDR: no usable designation (\(skipped.joined(separator: "; ")))",
                refreshAt: now + Self.refresh(ttl: ttl)))
    }

    /// One question to the plain upstream.
    private func ask(_ name: String, _ type: RRType) async -> ExchangeOutcome {
        let question = DNSQuestion(name: name, type: type, class: .in)
        let wireName: DNSName
        let template: [UInt8]
        do {
            wireName = try DNSName(name)
            template = try DNSQuery.make(name: wireName, type: type, id: 0, ednsBufferSize: configuration.ednsBufferSize)
        } catch {
            return .failed("cannot build the query: \(error)")
        }
        let plain = PlainDNSTransport(address: address)
        return await plain.attempt(configuration, on: group.next(), logger: logger) { _, exchange in
            await exchange(
                PendingQuery(
                    template: template, id: QueryID.random(), question: question,
                    nameLength: wireName.wire.count))
        }
    }

    /// When to discover again: at 80% of `ttl`, within 5 seconds and a day.
    static func refresh(ttl: UInt32) -> TimeAmount {
        .milliseconds(Int64(min(max(ttl, 5), 86400)) * 800)
    }

    /// RFC 9462 §4: ServiceMode designations must not target "." or "resolver.arpa".
    static func usableTarget(_ target: String) -> Bool {
        let bare = target.hasSuffix(".") ? String(target.dropLast()) : target
        return !bare.isEmpty && bare != "resolver.arpa"
    }

    /// The encrypted resolvers `records` designate for the plain upstream at `address`, best first (RFC 9462 §4):
    /// ServiceMode records by priority, ALPN `dot` (port 853 unless given) or `h2` with a `dohpath` (RFC 9461),
    /// each at the upstream's own address when designated there, else at the first designated address of its
    /// family (`addresses` holds the A/AAAA of TargetNames without hints). Why each other record was passed over
    /// goes to `skipped`.
    static func designations(
        _ records: [SVCBRecord], addresses: [String: [String]] = [:], for address: String,
        encryption: EncryptionMode = .opportunistic, skipped: inout [String]
    ) -> [Candidate] {
        var found: [Candidate] = []
        let own = TLSClientContext.addressBytes(address)
        let ownIsV6 = own?.count == 16
        let local = isPrivateOrLocal(address)
        for record in records.filter({ !$0.isAliasMode }).sorted(by: { $0.priority < $1.priority }) {
            let target = record.target.text.lowercased()
            guard usableTarget(target) else {
                skipped.append("priority \(record.priority): TargetName '\(target)' (RFC 9462 §4 forbids it)")
                continue
            }
            if record.params.port == 0 {
                skipped.append("\(target): port 0")
                continue
            }
            let hints = record.params.ipv4hint + record.params.ipv6hint
            let named = hints.isEmpty ? addresses[target] ?? [] : hints
            // An unspecified, multicast or broadcast address designates no server (connecting to 0.0.0.0 or ::
            // would reach this host itself).
            let designated = named.filter(isUnicast)
            if designated.isEmpty && !named.isEmpty {
                skipped.append("\(target): no unicast address (\(named.joined(separator: ", ")))")
                continue
            }
            let chosen: String
            if let same = designated.first(where: { TLSClientContext.addressBytes($0) == own }) {
                chosen = same
            } else if let family = designated.first(where: { (TLSClientContext.addressBytes($0)?.count == 16) == ownIsV6 })
                ?? designated.first
            {
                chosen = family
            } else {
                skipped.append("\(target): no address (no hints, no A/AAAA)")
                continue
            }
            let sameAddress = TLSClientContext.addressBytes(chosen) == own
            // §4.3: a private or local address cannot be verified; TLS without authentication, same address only.
            let opportunistic = sameAddress && local && encryption == .opportunistic
            let identity: TLSClientContext.Identity =
                opportunistic ? .unauthenticated
                // §4.2, §7: at another address, only the certificate's proof for the original address counts.
                : sameAddress ? .configured : .address(address)
            let alpn = record.params.alpn
            let port = record.params.port.map(Int.init)
            if alpn.contains("dot") {
                found.append(
                    Candidate(
                        server: UpstreamServer(transport: .tls, host: address, port: port, tlsName: nil),
                        address: chosen, target: target, identity: identity, opportunistic: opportunistic))
            }
            if alpn.contains("h2"), let dohpath = record.params.dohpath {
                // RFC 9461 §5: dohpath is a URI template relative to the target, and it must name `dns`.
                do {
                    let template = try DoHPathTemplate(dohpath)
                    guard template.hasDNSVariable else {
                        skipped.append("\(target): dohpath '\(dohpath)' without the dns variable (RFC 9461 §5)")
                        continue
                    }
                    found.append(
                        Candidate(
                            server: UpstreamServer(
                                transport: .https, host: address, port: port, tlsName: nil, path: template.template),
                            address: chosen, target: target, identity: identity, opportunistic: opportunistic))
                } catch {
                    skipped.append("\(target): dohpath unusable: \(error.reason)")
                }
            }
            if !alpn.contains("dot") && !(alpn.contains("h2") && record.params.dohpath != nil) {
                skipped.append("\(target): ALPN \(alpn.joined(separator: ",")) without dot or h2 + dohpath")
            }
        }
        return found
    }

    /// Whether `address` can be a designated resolver's: not unspecified (`0.0.0.0/8`, `::`), multicast, or IPv4's
    /// reserved and broadcast space (240.0.0.0/4).
    static func isUnicast(_ address: String) -> Bool {
        guard let bytes = TLSClientContext.addressBytes(address) else { return false }
        if bytes.count == 4 { return bytes[0] != 0 && bytes[0] < 224 }
        return !bytes.allSatisfy { $0 == 0 } && bytes[0] != 0xFF
    }

    /// Private and local addresses (RFC 9462 §4.3): RFC 1918, RFC 6598 shared space, loopback, link-local, ULA.
    static func isPrivateOrLocal(_ address: String) -> Bool {
        guard var bytes = TLSClientContext.addressBytes(address) else { return false }
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            bytes = Array(bytes[12...])  // IPv4-mapped
        }
        if bytes.count == 4 {
            let (a, b) = (bytes[0], bytes[1])
            return a == 10 || a == 127 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168)
                || (a == 169 && b == 254) || (a == 100 && (64...127).contains(b))
        }
        let loopback = bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
        return loopback || bytes[0] & 0xFE == 0xFC || (bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80)
    }

    private func finish(_ result: Result) -> Result {
        if result.designation == nil {
            logger.info("DDR found no encrypted path", metadata: ["reason": "\(result.note)"])
        }
        return result
    }
}

/// A plain upstream reached through what DDR designated: the encrypted connection once discovery found one; else
/// plain DNS (`opportunistic`) or nothing (`strict`).
struct DDRTransport: UpstreamTransport {
    let discovery: DDRDiscovery
    let plain: PlainDNSTransport
    let strict: Bool

    /// The designated connection's loop once discovery found a verified one.
    var connectionExecutor: EventLoopTaskExecutor? {
        guard let designation = discovery.known?.designation, designation.verificationFailure == nil else {
            return nil
        }
        return designation.connection.taskExecutor
    }

    nonisolated(nonsending) func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome {
        let found: DDRDiscovery.Result
        if strict {
            // Nothing may go out in clear text: wait for the first discovery.
            found = await discovery.result()
        } else if let known = discovery.usable() {
            found = known
        } else {
            // Opportunistic: do not make this query wait for discovery; it goes plain, later ones are upgraded.
            return await plain.attempt(configuration, on: loop, logger: logger, run: run)
        }
        if let designation = found.designation {
            if designation.verificationFailure == nil {
                // What the connection itself answered (nil: the try never reached it, the socket budget refused).
                var reached: ExchangeOutcome?
                let exchange: nonisolated(nonsending) (PendingQuery) async -> ExchangeOutcome = { query in
                    let outcome = await designation.connection.exchange(
                        query, timeout: TimeAmount(configuration.tcpTimeout))
                    reached = outcome
                    return outcome
                }
                var outcome = await run(designation.kind, exchange)
                // RFC 7766 §6.2.3, as for a configured DoT or DoH upstream (``EncryptedTransport``): a query the
                // server closed its connection on is sent again, on the next connection.
                for _ in 0..<EncryptedTransport.maximumResends where EncryptedTransport.resends(outcome) {
                    reached = nil
                    outcome = await run(designation.kind, exchange)
                }
                guard let reached else { return outcome }
                if designation.reached(reached) {
                    logReachability(designation, strict: strict, logger: logger)
                }
                switch outcome {
                case .insecure(let reason):
                    // RFC 9462 §4.2: a designation that fails verification is not used (until its TTL is over);
                    // opportunistic mode goes on in clear text, and Status says so.
                    designation.failed("DDR designation not verified: \(reason)")
                    if strict { return outcome }
                    logger.info(
                        "DDR designation not verified; using plain DNS",
                        metadata: ["reason": "\(reason)", "dns.server": "\(discovery.server)"])
                case .failed where !strict:
                    // Opportunistic: the designated resolver cannot be reached (refused, reset, an HTTP error);
                    // plain DNS is used where no encrypted path exists, so this query goes in clear text, and
                    // Status says so until a try over the designation is answered again.
                    break
                default:
                    return outcome
                }
            } else if strict {
                return .insecure("\(discovery.server): \(designation.verificationFailure ?? "")")
            }
        } else if strict {
            return .insecure("\(discovery.server): encryption = strict and no encrypted path to it (\(found.note))")
        }
        return await plain.attempt(configuration, on: loop, logger: logger, run: run)
    }

    /// One line when a designation stops or starts answering, not one per query.
    private func logReachability(_ designation: DDRDiscovery.Designation, strict: Bool, logger: Logger) {
        var metadata: Logger.Metadata = ["dns.server": "\(discovery.server)", "dns.designated": "\(designation)"]
        if let reason = designation.unreachableReason {
            metadata["reason"] = "\(reason)"
            logger.info(
                strict
                    ? "DDR designation not reachable; queries fail (encryption = strict)"
                    : "DDR designation not reachable; using plain DNS until it answers again",
                metadata: metadata)
        } else {
            logger.info("DDR designation answers again", metadata: metadata)
        }
    }
}
