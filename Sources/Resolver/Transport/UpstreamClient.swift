import DNSCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The `DNSTransport` of the daemon: asks a list of upstream DNS servers over UDP, with TCP fallback, on SwiftNIO.
///
/// ldns only builds and parses the messages; all I/O is non-blocking on the event loops of `group`. Each call of
/// `query(_:)` works through the upstreams as the `DNSTransport` contract says:
///
/// - Rounds: up to `configuration.attempts` passes over `upstreams`, in order. An upstream that answered with any
///   response code is not asked again in a later round; only those that gave nothing acceptable are retried.
/// - A try: UDP with EDNS(0) from a fresh socket (random source port) and a fresh random ID, waiting up to
///   `configuration.timeout` for an acceptable response; when that response has TC set, one TCP try to the same
///   upstream (new ID, up to `configuration.tcpTimeout`). A refused port (ICMP or RST) or a send error ends a try
///   before its timeout.
/// - NOERROR, NXDOMAIN and any other response code outside the failover set end the query. SERVFAIL, REFUSED,
///   NOTIMP and FORMERR move on to the next upstream; if no upstream does better, the last of them is returned.
/// - Every UDP and TCP try is one `QueryAttempt`, in order, in the result or in the thrown error.
///
/// Cancellation: cancelling the calling task closes the socket of the running try and `query(_:)` throws at once.
/// Because `query(_:)` throws only `DNSTransportError`, a cancelled query throws `DNSTransportError.Code.timeout`
/// whose message says it was cancelled; check `Task.isCancelled` to tell the two apart.
///
/// Upstream hosts must be numeric IPv4 or IPv6 addresses; the client never resolves names (it must not depend on
/// the system resolver). Upstreams whose host is not an address are left out and logged once.
public final class UpstreamClient: DNSTransport, Sendable {
    /// Timeouts, tries and EDNS size.
    public struct Configuration: Sendable, Hashable {
        /// How long one UDP try waits for an acceptable response.
        public var timeout: Duration
        /// Rounds over the upstreams: how many times an upstream that gave nothing acceptable is tried. At least 1.
        public var attempts: Int
        /// The UDP payload size advertised in the OPT record (RFC 6891 §6.2.5); 1232 avoids IP fragmentation.
        public var ednsBufferSize: UInt16
        /// How long one TCP try may take, connection set-up included.
        public var tcpTimeout: Duration
        /// Sockets to upstreams open at once (`[limits] upstream-sockets`). Every try still gets a fresh socket
        /// with a random source port and a random ID (RFC 5452: the poisoning defence); a try past the budget
        /// fails at once instead of opening one. A query holds one socket at a time, so the in-flight bounds of
        /// the resolver (``QueryLimits``) keep well below this unless it is set lower than them.
        public var maxSockets: Int
        /// `[resolver] encryption`: which upstreams may be asked in clear text.
        public var encryption: EncryptionMode
        /// `[resolver] ca-file`: the trusted roots for DoT and DoH; nil: the system trust store.
        public var caFile: String?
        /// How long a kept DoT or DoH connection stays open without queries.
        public var idleTimeout: Duration
        /// `[resolver] ddr`: ask plain upstreams for their designated encrypted resolvers (RFC 9462); not with
        /// `encryption = no`. Off by default for an embedded client (it asks only what it is told); the daemon
        /// turns it on unless `ddr = no`.
        public var ddr: Bool
        /// DoH queries with GET from the first one (RFC 8484 §4.1), as `kdig +https-get`; otherwise POST, and GET
        /// only for a server that refuses POST (HTTP 405, 415 or 501).
        public var dohGET: Bool

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - timeout: per UDP try; 1.5 s by default.
        ///   - attempts: rounds over the upstreams; 2 by default, values below 1 count as 1.
        ///   - ednsBufferSize: advertised UDP payload size; 1232 by default (DNS Flag Day 2020).
        ///   - tcpTimeout: per TCP try including the handshake; 3 s by default (two round trips).
        public init(
            timeout: Duration = .milliseconds(1500), attempts: Int = 2,
            ednsBufferSize: UInt16 = DNSQuery.defaultEDNSBufferSize, tcpTimeout: Duration = .seconds(3),
            maxSockets: Int = 1024, encryption: EncryptionMode = .opportunistic, caFile: String? = nil,
            idleTimeout: Duration = .seconds(30), ddr: Bool = false, dohGET: Bool = false
        ) {
            self.ddr = ddr
            self.dohGET = dohGET
            self.maxSockets = maxSockets
            self.encryption = encryption
            self.caFile = caFile
            self.idleTimeout = idleTimeout
            self.timeout = timeout
            self.attempts = attempts
            self.ednsBufferSize = ednsBufferSize
            self.tcpTimeout = tcpTimeout
        }
    }

    /// An upstream with its parsed socket address. Immutable, and a class: every try of a query hands it on,
    /// one reference instead of a copy of its dozen fields.
    private final class Target: Sendable {
        let server: UpstreamServer
        /// How the server is reached: plain DNS, a kept DoT or DoH connection, or not at all (strict mode).
        let transport: any UpstreamTransport
        /// What `Status` calls the transport (`udp`, `tls`, `https`, `none`).
        let kind: String
        let origin: UpstreamOrigin
        /// Why it is not used, when it is not.
        let note: String?
        let statistics: UpstreamStatistics
        /// DDR of a plain upstream: what it designated, once asked.
        let ddr: DDRDiscovery?
        let strict: Bool
        /// `server.description`, made once at set-up: every try records it (``QueryAttempt/server``).
        let label: String

        init(
            server: UpstreamServer, transport: any UpstreamTransport, kind: String, origin: UpstreamOrigin = .configured,
            note: String? = nil, statistics: UpstreamStatistics, ddr: DDRDiscovery? = nil, strict: Bool = false
        ) {
            self.server = server
            self.transport = transport
            self.kind = kind
            self.origin = origin
            self.note = note
            self.statistics = statistics
            self.ddr = ddr
            self.strict = strict
            label = server.description
        }

        /// How the upstream was found, as it is now (DDR may have upgraded it since the set-up): ``now``'s origin
        /// without its texts, for every reply (``UpstreamClient/authenticated(_:last:)``).
        var currentOrigin: UpstreamOrigin {
            guard let ddr else { return origin }
            guard let found = ddr.current, let designation = found.designation,
                designation.verificationFailure == nil
            else { return .configured }
            return designation.origin
        }

        /// Transport, origin and note as they are now (DDR may have upgraded the upstream since the set-up).
        var now: (kind: String, origin: UpstreamOrigin, note: String?) {
            guard let ddr else { return (kind, origin, note) }
            guard let found = ddr.current else {
                return (strict ? "none" : "udp", .configured, "DDR not done yet (it starts with the first query)")
            }
            if let designation = found.designation {
                if let failure = designation.verificationFailure {
                    return strict ? ("none", .configured, "not used: \(failure)") : ("udp", .configured, "clear text: \(failure)")
                }
                if !strict, let reason = designation.unreachableReason {
                    return ("udp", .configured, "clear text while the designation fails (\(reason)); \(found.note)")
                }
                return (designation.kind.rawValue, designation.origin, found.note)
            }
            return strict
                ? ("none", .configured, "not used: encryption = strict; \(found.note)")
                : ("udp", .configured, "clear text: \(found.note)")
        }
    }

    /// The upstreams, their parsed addresses and the tries; ``reconfigure(upstreams:configuration:)`` replaces it whole.
    private struct Setup: Sendable {
        var upstreams: [UpstreamServer]
        let configuration: Configuration
        var targets: [Target]
        var unusable: [String]
        /// Kept connections, reused by a reload that keeps their upstream and TLS settings.
        var connections: [ConnectionKey: any EncryptedConnection] = [:]
        /// Counters per upstream, kept across reloads.
        var statistics: [UpstreamServer: UpstreamStatistics] = [:]
        /// DDR per plain upstream, kept across reloads that keep its settings.
        var discoveries: [ConnectionKey: DDRDiscovery] = [:]
        /// `configuration.tcpTimeout` as a `TimeAmount`, made once with the configuration: a `Duration`'s
        /// conversion is 128-bit arithmetic, and every try on a kept connection needs it.
        let tryTimeout: TimeAmount

        init(upstreams: [UpstreamServer], configuration: Configuration, targets: [Target], unusable: [String]) {
            self.upstreams = upstreams
            self.configuration = configuration
            self.targets = targets
            self.unusable = unusable
            tryTimeout = TimeAmount(configuration.tcpTimeout)
        }
    }

    private struct ConnectionKey: Hashable {
        var server: UpstreamServer
        var caFile: String?
        var idleTimeout: Duration
        var encryption: EncryptionMode = .opportunistic
    }

    private let setup: Mutex<Setup>
    /// Sockets open now (one per running try).
    private let openSockets = Atomic<Int>(0)
    /// Tries refused because the socket budget was spent.
    private let socketRefusals = Atomic<UInt64>(0)
    private let group: any EventLoopGroup
    private let logger: Logger

    /// The upstreams in effect, in failover order.
    public var upstreams: [UpstreamServer] { setup.withLock { $0.upstreams } }
    /// Timeouts, tries and EDNS size in effect.
    public var configuration: Configuration { setup.withLock { $0.configuration } }
    /// Sockets to upstreams open now.
    public var socketsOpen: Int { openSockets.load(ordering: .relaxed) }
    /// Tries not made because `maxSockets` sockets were open.
    public var socketsRefused: UInt64 { socketRefusals.load(ordering: .relaxed) }

    /// Creates a client; it opens sockets only while a query runs.
    ///
    /// - Parameters:
    ///   - upstreams: the servers to ask, in failover order; hosts are numeric IPv4 or IPv6 addresses.
    ///   - configuration: timeouts, tries and EDNS size.
    ///   - group: the event loops that run the sockets.
    ///   - logger: receives one debug line per try and per dropped message (metadata `dns.name`, `dns.type`,
    ///     `dns.server`).
    public init(
        upstreams: [UpstreamServer], configuration: Configuration = .init(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "discoverd.resolver.upstream")
    ) {
        self.group = group
        self.logger = logger
        self.setup = Mutex(
            Self.makeSetup(
                upstreams: upstreams, configuration: configuration, previous: nil, group: group, logger: logger))
    }

    /// Replaces the upstreams and tries (on configuration reload). Queries already running finish with the old
    /// ones; every query that starts afterwards uses the new ones.
    public func reconfigure(upstreams: [UpstreamServer], configuration: Configuration) {
        let previous = setup.withLock { $0 }
        let fresh = Self.makeSetup(
            upstreams: upstreams, configuration: configuration, previous: previous, group: group, logger: logger)
        setup.withLock { $0 = fresh }
        for (key, connection) in previous.connections where fresh.connections[key] == nil { connection.shutdown() }
        for (key, discovery) in previous.discoveries where fresh.discoveries[key] == nil { discovery.shutdown() }
        // RFC 9462: a reload asks kept plain upstreams again; their designations stay in use until then.
        for (key, discovery) in fresh.discoveries where previous.discoveries[key] === discovery { discovery.rediscover() }
    }

    /// Every upstream, what it travels on and what it did, for `Status`.
    public var upstreamStatus: [UpstreamStatus] {
        let targets = setup.withLock { $0.targets }
        return targets.map { target in
            let now = target.now
            var status = target.statistics.status(
                server: target.server, transport: now.kind, origin: now.origin, note: now.note)
            if now.origin == .ddrVerified && status.handshakes == 0 {
                // Designated, but no handshake has passed verification yet: not (yet) a verified upgrade.
                status.origin = .configured
                status.note = "\(now.note ?? "DDR"); not verified yet" + (status.lastFailure.map { ": \($0)" } ?? "")
            }
            if now.origin == .ddrOpportunistic {
                // RFC 7858 §4.1 opportunistic profile: encrypted, but nothing about the certificate was verified.
                status.verifiedName = nil
            }
            return status
        }
    }

    private static func makeSetup(
        upstreams: [UpstreamServer], configuration: Configuration, previous: Setup?, group: any EventLoopGroup,
        logger: Logger
    ) -> Setup {
        var result = Setup(upstreams: upstreams, configuration: configuration, targets: [], unusable: [])
        for server in upstreams {
            let statistics = previous?.statistics[server] ?? result.statistics[server] ?? UpstreamStatistics()
            result.statistics[server] = statistics
            let address: SocketAddress
            do {
                guard !server.host.isEmpty else {
                    throw UpstreamSyntaxError(text: "\(server)", reason: "no address (add #ADDR or a bootstrap line)")
                }
                address = try SocketAddress(ipAddress: server.host, port: server.port)
            } catch {
                result.unusable.append("\(server)")
                logger.info(
                    "upstream is not a numeric IP address and is ignored",
                    metadata: ["dns.server": "\(server)", "error": "\(error)"])
                continue
            }
            // `encryption=MODE` on the upstream line overrides `[resolver] encryption` for this plain upstream.
            var own = configuration
            own.encryption = server.encryption ?? configuration.encryption
            switch server.transport {
            case .plain where own.ddr && own.encryption != .no:
                let key = ConnectionKey(
                    server: server, caFile: own.caFile, idleTimeout: own.idleTimeout, encryption: own.encryption)
                let discovery =
                    previous?.discoveries[key] ?? result.discoveries[key]
                    ?? DDRDiscovery(
                        server: server, address: address, configuration: own, statistics: statistics, group: group,
                        logger: logger)
                result.discoveries[key] = discovery
                let strict = own.encryption == .strict
                result.targets.append(
                    Target(
                        server: server,
                        transport: DDRTransport(discovery: discovery, plain: PlainDNSTransport(address: address), strict: strict),
                        kind: "udp", statistics: statistics, ddr: discovery, strict: strict))
            case .plain where own.encryption == .strict:
                let reason = "\(server): encryption = strict and this upstream has no encrypted path (ddr = no)"
                result.targets.append(
                    Target(
                        server: server, transport: RefusedTransport(reason: reason), kind: "none",
                        note: "not used: encryption = strict and no encrypted path to it", statistics: statistics))
            case .plain:
                // Here either encryption = no, or opportunistic with DDR off: no encrypted path was looked for.
                let why = own.encryption == .no ? "clear text: encryption = no" : "clear text: ddr = no (opportunistic)"
                result.targets.append(
                    Target(server: server, transport: PlainDNSTransport(address: address), kind: "udp",
                        note: why, statistics: statistics))
            case .tls, .https:
                let key = ConnectionKey(server: server, caFile: configuration.caFile, idleTimeout: configuration.idleTimeout)
                let kind: QueryTransport = server.transport == .tls ? .tls : .https
                if let kept = previous?.connections[key] ?? result.connections[key] {
                    result.connections[key] = kept
                    result.targets.append(
                        Target(server: server, transport: EncryptedTransport(connection: kept, kind: kind),
                            kind: kind.rawValue, statistics: statistics))
                    continue
                }
                do {
                    let connection = try EncryptedConnections.make(
                        server, address: address, configuration: configuration, statistics: statistics, group: group,
                        logger: logger)
                    result.connections[key] = connection
                    result.targets.append(
                        Target(server: server, transport: EncryptedTransport(connection: connection, kind: kind),
                            kind: kind.rawValue, statistics: statistics))
                } catch {
                    let reason = "\(server): TLS set-up failed (ca-file \(configuration.caFile ?? TLSClientContext.systemTrustStore)): \(error)"
                    logger.info("encrypted upstream cannot be used", metadata: ["dns.server": "\(server)", "reason": "\(reason)"])
                    result.targets.append(
                        Target(server: server, transport: RefusedTransport(reason: reason), kind: "none",
                            note: "not used: \(reason)", statistics: statistics))
                }
            }
        }
        return result
    }

    /// Sends `question` to the upstreams and returns the first acceptable, final response (see the type's
    /// documentation for the order of tries).
    ///
    /// - Parameter question: the name, type and class to ask for.
    /// - Returns: the response and every attempt made. Its rcode may be SERVFAIL, REFUSED, NOTIMP or FORMERR when
    ///   every upstream that answered said so.
    /// - Throws: `DNSTransportError` with code `noUpstreams` (no usable upstream), `invalidQuery` (the name cannot
    ///   be encoded) or `timeout` (no acceptable response, or the calling task was cancelled), with the attempts.
    nonisolated(nonsending) public func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
        try await query(question, dnssecOK: false)
    }

    /// Like ``query(_:)``, with the DO bit (RFC 3225) set as given.
    nonisolated(nonsending) public func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange {
        let (targets, unusable, configuration) = setup.withLock { ($0.targets, $0.unusable, $0.configuration) }
        guard !targets.isEmpty else {
            let detail = unusable.isEmpty ? "" : " (not numeric addresses: \(unusable.joined(separator: ", ")))"
            throw DNSTransportError(code: .noUpstreams, message: "no upstream DNS server configured\(detail)")
        }
        let request = try Self.request(question, dnssecOK: dnssecOK, configuration: configuration)

        var attempts: [QueryAttempt] = []
        var lastFailure: DNSMessage?
        var answered = Set<Int>()
        var insecure: [Int: String] = [:]
        var failures: [Int: String] = [:]
        for _ in 0..<max(1, configuration.attempts) {
            for (index, target) in targets.enumerated() where !answered.contains(index) {
                if Task.isCancelled { throw cancelled(request, attempts) }
                switch await ask(target, request, configuration, &attempts) {
                case .final(let message):
                    return DNSExchange(
                        message: message, attempts: attempts,
                        authenticatedTransport: Self.authenticated(target, last: attempts.last?.transport))
                case .failover(let message):
                    // RFC 1035 §7.2 / RFC 8499: a server failure is local to that server; ask the next one.
                    lastFailure = message
                    answered.insert(index)
                case .nothing(let failure):
                    failures[index] = failure
                case .insecure(let reason):
                    insecure[index] = reason
                case .cancelled:
                    throw cancelled(request, attempts)
                }
            }
            if answered.count == targets.count { break }
        }
        return try Self.ending(
            lastFailure: lastFailure, insecure: insecure.keys.sorted().map { insecure[$0]! },
            failures: failures.keys.sorted().map { failures[$0]! }, attempts: attempts, request: request,
            targets: targets
        ).get()
    }

    /// The query of `question` in wire format, written once with ID 0 (each try stamps its own): a plain name
    /// (letters, digits, `-`, `_`) goes from its text straight into it in one pass; anything else through
    /// DNSName's parser (escapes, and the error for an invalid name).
    private static func request(
        _ question: DNSQuestion, dnssecOK: Bool, configuration: Configuration
    ) throws(DNSTransportError) -> Request {
        var template: [UInt8] = []
        template.reserveCapacity(12 + question.name.utf8.count + 2 + DNSQuery.trailerLength)
        DNSQuery.appendHeader(id: 0, to: &template)
        let nameText: String
        if let plain = DNSName.appendPlainWireNormalized(question.name, to: &template) {
            nameText = plain
        } else {
            do {
                let name = try DNSName(question.name)
                template.append(contentsOf: name.wire)
                nameText = name.text
            } catch {
                throw DNSTransportError(code: .invalidQuery, message: "cannot encode a query for \(question): \(error)")
            }
        }
        let nameLength = template.count - 12
        DNSQuery.appendTrailer(
            type: question.type, class: question.class, dnssecOK: dnssecOK,
            ednsBufferSize: configuration.ednsBufferSize, to: &template)
        return Request(
            question: DNSQuestion(normalizedName: nameText, type: question.type, class: question.class),
            template: template, nameLength: nameLength)
    }

    /// How a query ends when no upstream gave a final response: the last failure response, else why not.
    /// `failures`: what the last plain try of each upstream that failed outright said (ICMP port unreachable...).
    private static func ending(
        lastFailure: DNSMessage?, insecure: [String], failures: [String], attempts: [QueryAttempt], request: Request,
        targets: [Target]
    ) -> Result<DNSExchange, DNSTransportError> {
        if let lastFailure {
            return .success(DNSExchange(message: lastFailure, attempts: attempts))
        }
        if !insecure.isEmpty {
            // Nothing answered, and at least one upstream could not be reached securely: say why (EDE 23).
            return .failure(
                DNSTransportError(code: .networkError, message: insecure.joined(separator: "; "), attempts: attempts))
        }
        return .failure(
            DNSTransportError(
                code: .timeout,
                message: "no acceptable response for \(request.question) from "
                    + targets.map(\.server.description).joined(separator: ", ")
                    + (failures.isEmpty ? "" : " (\(failures.joined(separator: "; ")))"),
                attempts: attempts, failures: failures))
    }

    /// Every upstream as `QueryAttempt.server` names it, in failover order.
    public var upstreamNames: [String] { setup.withLock { $0.targets.map(\.server.description) } }

    /// The first upstream's kept connection's loop (DoT, DoH, a verified DDR designation); nil for plain DNS, whose
    /// tasks run where NIO's global-executor hook puts them.
    public var preferredExecutor: (any TaskExecutor)? {
        setup.withLock { $0.targets.first?.transport.connectionExecutor }
    }

    /// `question` to every upstream at once, each on its own (its own rounds of tries, no failover): what each one
    /// answered, nil where nothing usable came (allow-downgrade's probe).
    public func queryEach(_ question: DNSQuestion, dnssecOK: Bool) async -> [UpstreamReply] {
        let (targets, configuration) = setup.withLock { ($0.targets, $0.configuration) }
        guard let name = try? DNSName(question.name),
            let template = try? DNSQuery.make(
                name: name, type: question.type, class: question.class, id: 0, dnssecOK: dnssecOK,
                ednsBufferSize: configuration.ednsBufferSize)
        else { return targets.map { UpstreamReply(server: $0.server.description, message: nil) } }
        let request = Request(
            question: DNSQuestion(name: name.text, type: question.type, class: question.class), template: template,
            nameLength: name.wire.count)
        return await withTaskGroup(of: (Int, DNSMessage?).self) { group in
            for (index, target) in targets.enumerated() {
                group.addTask {
                    var attempts: [QueryAttempt] = []
                    for _ in 0..<max(1, configuration.attempts) {
                        switch await self.ask(target, request, configuration, &attempts) {
                        case .final(let message), .failover(let message): return (index, message)
                        case .nothing: continue
                        case .insecure, .cancelled: return (index, nil)
                        }
                    }
                    return (index, nil)
                }
            }
            var replies = targets.map { UpstreamReply(server: $0.server.description, message: nil) }
            for await (index, message) in group { replies[index].message = message }
            return replies
        }
    }

    /// Whether a reply from `target` on the try `last` came over a verified encrypted connection: DoT or DoH (not a
    /// plain fallback) to a configured encrypted upstream or a verified DDR designation, never the opportunistic
    /// profile (RFC 7858 §4.1: encrypted, but nothing about the certificate was verified).
    private static func authenticated(_ target: Target, last: QueryTransport?) -> Bool {
        guard last == .tls || last == .https else { return false }
        switch target.currentOrigin {
        case .configured: return target.server.isEncrypted
        case .ddrVerified: return true
        case .ddrOpportunistic: return false
        }
    }

    /// Response codes that say "this server cannot help", so the next upstream is asked: FORMERR, SERVFAIL,
    /// NOTIMP, REFUSED. A switch on the numbers, not a `Set<RCode>`: every miss asks, and the set cost a hash and
    /// a lazy global's check each time.
    static func failsOver(_ code: RCode) -> Bool {
        switch code.rawValue {
        case 1, 2, 4, 5: true
        default: false
        }
    }

    /// What a query needs for every try.
    private struct Request {
        /// Normalised: lowercased and absolute.
        var question: DNSQuestion
        /// The query in wire format with ID 0.
        var template: [UInt8]
        var nameLength: Int

        func pending() -> PendingQuery {
            // RFC 5452 §9.2: an unpredictable ID per try, from the system RNG (getrandom on Linux).
            PendingQuery(template: template, id: QueryID.random(), question: question, nameLength: nameLength)
        }
    }

    private enum UpstreamResult {
        case final(DNSMessage)
        case failover(DNSMessage)
        /// No usable response: the try timed out (nil) or failed, with the reason naming the upstream.
        case nothing(String?)
        /// Not reachable as securely as required, or an encrypted upstream failed on the network; the reason names
        /// the upstream.
        case insecure(String)
        case cancelled
    }

    /// One UDP try to `target`, and a TCP try when the UDP response is truncated.
    nonisolated(nonsending) private func ask(
        _ target: Target, _ request: Request, _ configuration: Configuration, _ attempts: inout [QueryAttempt]
    ) async -> UpstreamResult {
        let logger = tryLogger(target, request)
        // The loop this task runs on when it is one of the group's (a plain try then needs no thread change).
        let loop = group.any()
        // Whether the try went encrypted: a DDR upgrade is, though the upstream is written as plain.
        var encrypted = target.server.isEncrypted
        let tries = attempts.count
        let outcome = await target.transport.attempt(configuration, on: loop, logger: logger) { transport, exchange in
            encrypted = transport == .tls || transport == .https
            return await timed(
                transport, target, request, &attempts, maxSockets: configuration.maxSockets, logger: logger,
                exchange: exchange)
        }
        if case .insecure(let reason) = outcome, attempts.count == tries {
            // Refused before any try (strict mode without a verified encrypted path): a failed query all the same.
            target.statistics.tried(milliseconds: nil, failure: "not secure: \(reason)")
        }
        return Self.result(of: outcome, from: target, encrypted: encrypted)
    }

    /// The logger of a try: the per-try metadata is for its debug lines; below debug nothing logs it per query,
    /// and setting it costs three copies of the handler's metadata on every miss.
    private func tryLogger(_ target: Target, _ request: Request) -> Logger {
        var logger = self.logger
        if logger.logLevel <= .debug {
            logger[metadataKey: "dns.name"] = "\(request.question.name)"
            logger[metadataKey: "dns.type"] = "\(request.question.type)"
            logger[metadataKey: "dns.server"] = "\(target.label)"
        }
        return logger
    }

    /// What a try's outcome means for the query: a final response, one to fail over from, or nothing usable.
    /// `encrypted`: the try went over DoT or DoH (configured, or a DDR upgrade of a plain upstream).
    private static func result(of outcome: ExchangeOutcome, from target: Target, encrypted: Bool) -> UpstreamResult {
        switch outcome {
        case .response(let message):
            return Self.failsOver(message.rcode) ? .failover(message) : .final(message)
        case .cancelled:
            return .cancelled
        case .insecure(let reason):
            return .insecure(reason.hasPrefix("\(target.server)") ? reason : "\(target.server): \(reason)")
        case .failed(let reason) where encrypted:
            // An encrypted upstream that answered unusably (HTTP 500, wrong type, a closed connection): a network
            // error with its reason, not a silent timeout.
            return .insecure("\(target.server): \(reason)")
        case .failed(let reason):
            return .nothing("\(target.server): \(reason)")
        case .truncated, .timedOut:
            return .nothing(nil)
        }
    }

    /// `www.example. A: SERVFAIL, EDE 7 (Signature Expired): ...`: an error answer as `Status` shows it.
    static func errorAnswer(_ message: DNSMessage, _ question: DNSQuestion) -> String {
        "\(question.name) \(question.type): \(message.rcodeAndReasons)"
    }

    /// Runs one try with a new ID, records it as a `QueryAttempt` and logs it.
    nonisolated(nonsending) private func timed(
        _ transport: QueryTransport, _ target: Target, _ request: Request, _ attempts: inout [QueryAttempt],
        maxSockets: Int, logger: Logger, exchange: nonisolated(nonsending) (PendingQuery) async -> ExchangeOutcome
    ) async -> ExchangeOutcome {
        let query = request.pending()
        // NIO's monotonic clock: a difference in nanoseconds, where Duration's components cost 128-bit arithmetic.
        let started = NIODeadline.now()
        let outcome: ExchangeOutcome
        if let refusal = takeSocket(maxSockets: maxSockets) {
            outcome = refusal
        } else {
            outcome = await exchange(query)
            openSockets.wrappingSubtract(1, ordering: .relaxed)
        }
        ended(outcome, transport, target, request, query, started: started, &attempts, logger: logger)
        return outcome
    }

    /// Counts a try's socket against the budget; the refusal when `maxSockets` are open already.
    private func takeSocket(maxSockets: Int) -> ExchangeOutcome? {
        guard openSockets.wrappingAdd(1, ordering: .relaxed).newValue > maxSockets else { return nil }
        openSockets.wrappingSubtract(1, ordering: .relaxed)
        socketRefusals.add(1, ordering: .relaxed)
        return .failed("\(maxSockets) upstream sockets open ([limits] upstream-sockets)")
    }

    /// Records a try that ended: the upstream's counters, a `QueryAttempt`, a debug line.
    private func ended(
        _ outcome: ExchangeOutcome, _ transport: QueryTransport, _ target: Target, _ request: Request,
        _ query: PendingQuery, started: NIODeadline, _ attempts: inout [QueryAttempt], logger: Logger
    ) {
        let milliseconds = Double((NIODeadline.now() - started).nanoseconds) / 1e6
        let rcode: String
        switch outcome {
        case .response(let message): rcode = message.rcode.description
        case .truncated(let code): rcode = code.description
        case .timedOut, .failed, .cancelled, .insecure: rcode = "TIMEOUT"
        }
        switch outcome {
        case .response(let message) where Self.failsOver(message.rcode):
            target.statistics.tried(
                milliseconds: milliseconds, failure: nil, errorAnswer: Self.errorAnswer(message, request.question))
        case .response, .truncated: target.statistics.tried(milliseconds: milliseconds, failure: nil)
        case .cancelled: break
        case .timedOut:
            target.statistics.tried(milliseconds: nil, failure: Self.describe(outcome), timedOutSince: started)
        case .failed, .insecure: target.statistics.tried(milliseconds: nil, failure: Self.describe(outcome))
        }
        attempts.append(
            QueryAttempt(
                name: request.question.name, type: request.question.type, server: target.label,
                transport: transport, milliseconds: milliseconds, rcode: rcode))
        logger.debug(
            "upstream try ended",
            metadata: [
                "dns.transport": "\(transport.rawValue)", "dns.id": "\(query.id)", "dns.rcode": "\(rcode)",
                "dns.ms": "\(milliseconds)", "dns.outcome": "\(Self.describe(outcome))",
            ])
    }

    private static func describe(_ outcome: ExchangeOutcome) -> String {
        switch outcome {
        case .response: "response"
        case .truncated: "truncated"
        case .timedOut: "timeout"
        case .failed(let reason): "failed: \(reason)"
        case .insecure(let reason): "not secure: \(reason)"
        case .cancelled: "cancelled"
        }
    }

    private func cancelled(_ request: Request, _ attempts: [QueryAttempt]) -> DNSTransportError {
        DNSTransportError(code: .timeout, message: "query for \(request.question) cancelled", attempts: attempts)
    }
}

extension UpstreamClient {
    /// ``query(_:dnssecOK:)`` without a task, when the only upstream is reached over its kept DoT or DoH
    /// connection (the DNS stub's misses): the same tries, rounds, records and errors, each try a callback on the
    /// connection's loop instead of an async frame, a continuation and a task's executor checks.
    ///
    /// - Returns: false, with nothing started, for any other set-up (several upstreams, plain DNS, DDR): call
    ///   ``query(_:dnssecOK:)``. True: `completion` runs exactly once, on the connection's loop, or on the calling
    ///   thread when the query cannot be written (an invalid name) or the socket budget refuses its tries.
    public func startQuery(
        _ question: DNSQuestion, dnssecOK: Bool,
        completion: @escaping @Sendable (Result<DNSExchange, DNSTransportError>) -> Void
    ) -> Bool {
        let (targets, configuration, tryTimeout) = setup.withLock { ($0.targets, $0.configuration, $0.tryTimeout) }
        guard targets.count == 1, let kept = targets[0].transport.keptConnection else { return false }
        let request: Request
        do {
            request = try Self.request(question, dnssecOK: dnssecOK, configuration: configuration)
        } catch {
            completion(.failure(error))
            return true
        }
        StartedQuery(
            client: self, target: targets[0], kept: kept, request: request, configuration: configuration,
            tryTimeout: tryTimeout, completion: completion
        ).next()
        return true
    }

    /// One ``startQuery(_:dnssecOK:completion:)`` in flight: its rounds of tries to the one upstream, one try at
    /// a time, as ``query(_:dnssecOK:)`` makes them for one upstream (``ask(_:_:_:_:)`` and
    /// ``EncryptedTransport``'s resend included).
    private final class StartedQuery: @unchecked Sendable {
        // @unchecked Sendable: the state changes between tries only, in the callback of the try that ended, which
        // runs on the connection's loop; each try is started after the previous one ended.
        private let client: UpstreamClient
        private let target: Target
        private let kept: (connection: any EncryptedConnection, kind: QueryTransport)
        private let request: Request
        private let configuration: Configuration
        private let tryTimeout: TimeAmount
        private let completion: @Sendable (Result<DNSExchange, DNSTransportError>) -> Void
        private let logger: Logger
        private var attempts: [QueryAttempt] = []
        private var round = 0
        /// How often the current try sent its query again after the server closed the connection on it.
        private var resent = 0
        private var insecure: String?

        init(
            client: UpstreamClient, target: Target, kept: (connection: any EncryptedConnection, kind: QueryTransport),
            request: Request, configuration: Configuration, tryTimeout: TimeAmount,
            completion: @escaping @Sendable (Result<DNSExchange, DNSTransportError>) -> Void
        ) {
            self.client = client
            self.target = target
            self.kept = kept
            self.request = request
            self.configuration = configuration
            self.tryTimeout = tryTimeout
            self.completion = completion
            logger = client.tryLogger(target, request)
        }

        /// Sends the next exchange: a new ID, the socket budget, the try's timeout.
        func next() {
            let query = request.pending()
            let started = NIODeadline.now()
            if let refusal = client.takeSocket(maxSockets: configuration.maxSockets) {
                ended(refusal, query, started: started)
                return
            }
            kept.connection.exchange(query, timeout: tryTimeout) { outcome in
                self.client.openSockets.wrappingSubtract(1, ordering: .relaxed)
                self.ended(outcome, query, started: started)
            }
        }

        private func ended(_ outcome: ExchangeOutcome, _ query: PendingQuery, started: NIODeadline) {
            client.ended(outcome, kept.kind, target, request, query, started: started, &attempts, logger: logger)
            if resent < EncryptedTransport.maximumResends, EncryptedTransport.resends(outcome) {
                resent += 1
                next()
                return
            }
            resent = 0
            switch UpstreamClient.result(of: outcome, from: target, encrypted: true) {
            case .final(let message):
                completion(
                    .success(
                        DNSExchange(
                            message: message, attempts: attempts,
                            authenticatedTransport: UpstreamClient.authenticated(target, last: attempts.last?.transport))))
                return
            case .failover(let message):
                // The only upstream answered: nobody else to ask.
                completion(.success(DNSExchange(message: message, attempts: attempts)))
                return
            case .insecure(let reason):
                insecure = reason
            case .nothing, .cancelled:
                break
            }
            round += 1
            if round < max(1, configuration.attempts) {
                next()
                return
            }
            completion(
                UpstreamClient.ending(
                    lastFailure: nil, insecure: insecure.map { [$0] } ?? [], failures: [], attempts: attempts,
                    request: request, targets: [target]))
        }
    }
}
