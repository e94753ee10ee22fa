import DNSCore
import Logging
import NIOCore
import Synchronization

/// Discovery of Designated Resolvers (RFC 9462) for one plain upstream, done once, on its first query.
///
/// The plain upstream is asked `_dns.resolver.arpa SVCB` (RFC 9462 §4). ServiceMode records are tried in priority
/// order; one with ALPN `dot` (RFC 7858, port 853 unless `port`) or `h2` with a `dohpath` (RFC 9461) whose
/// `ipv4hint`/`ipv6hint` include the upstream's own address becomes the encrypted path to it. The connection
/// checks, at every handshake, the chain against the trust store and that the certificate names the original
/// address (an IP subjectAltName: §4.2 "Verified Discovery"), so the upgrade is verified or not used: with
/// `encryption = strict` an unverified or missing designation leaves the upstream unused; with `opportunistic`
/// the upstream stays plain and Status says why. Designations to other addresses would need the certificate
/// checked against an address other than the one connected to; they are reported and not followed.
final class DDRDiscovery: Sendable {
    /// What discovery found.
    struct Result: Sendable {
        /// The kept encrypted connection, when a designation was found.
        var connection: (any EncryptedConnection)?
        var kind: QueryTransport?
        /// The designated resolver, for Status.
        var designated: UpstreamServer?
        /// Why there is no upgrade (or what was found), for Status and the strict refusal.
        var note: String
    }

    private enum State {
        case idle
        case running([CheckedContinuation<Result, Never>])
        case done(Result)
    }

    let server: UpstreamServer
    private let address: SocketAddress
    private let configuration: UpstreamClient.Configuration
    private let statistics: UpstreamStatistics
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = Mutex(State.idle)
    /// Set when a verified handshake failed after the upgrade (opportunistic mode then stays plain).
    private let refused = Mutex<String?>(nil)

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

    /// What discovery found so far, without waiting (for Status).
    var current: Result? {
        state.withLock { if case .done(let result) = $0 { result } else { nil } }
    }

    /// Why the upgrade failed verification, if it did.
    var verificationFailure: String? { refused.withLock { $0 } }

    func upgradeFailed(_ reason: String) {
        refused.withLock { if $0 == nil { $0 = reason } }
    }

    /// The result, discovering it on the first call; concurrent callers wait for the same discovery.
    func result() async -> Result {
        enum Step { case run, wait, have(Result) }
        let step: Step = state.withLock {
            switch $0 {
            case .done(let result): return .have(result)
            case .running: return .wait
            case .idle:
                $0 = .running([])
                return .run
            }
        }
        switch step {
        case .have(let result):
            return result
        case .wait:
            return await withCheckedContinuation { continuation in
                let ready: Result? = state.withLock {
                    switch $0 {
                    case .done(let result): return result
                    case .running(var waiting):
                        waiting.append(continuation)
                        $0 = .running(waiting)
                        return nil
                    case .idle: return Result(note: "internal: discovery not started")
                    }
                }
                if let ready { continuation.resume(returning: ready) }
            }
        case .run:
            let result = await discover()
            let waiting: [CheckedContinuation<Result, Never>] = state.withLock {
                let waiting: [CheckedContinuation<Result, Never>]
                if case .running(let list) = $0 { waiting = list } else { waiting = [] }
                $0 = .done(result)
                return waiting
            }
            for continuation in waiting { continuation.resume(returning: result) }
            return result
        }
    }

    /// Starts discovery without waiting for it (opportunistic mode: queries go plain until it is done).
    func startInBackground() {
        let idle = state.withLock { if case .idle = $0 { true } else { false } }
        guard idle else { return }
        // Unstructured on purpose: no caller waits for it, and it ends by itself within one query's timeouts.
        Task { _ = await self.result() }
    }

    /// Closes the upgraded connection (reload).
    func shutdown() { current?.connection?.shutdown() }

    private func discover() async -> Result {
        let question = DNSQuestion(name: "_dns.resolver.arpa.", type: .svcb, class: .in)
        let name: DNSName
        let template: [UInt8]
        do {
            name = try DNSName(question.name)
            template = try DNSQuery.make(name: name, type: .svcb, id: 0, ednsBufferSize: configuration.ednsBufferSize)
        } catch {
            return Result(note: "DDR: cannot build the query: \(error)")
        }
        let plain = PlainDNSTransport(address: address)
        let outcome = await plain.attempt(configuration, on: group.next(), logger: logger) { _, exchange in
            await exchange(
                PendingQuery(
                    template: template, id: UInt16.random(in: .min ... .max), question: question,
                    nameLength: name.wire.count))
        }
        guard case .response(let message) = outcome else {
            return finish(Result(note: "DDR: no answer to _dns.resolver.arpa SVCB (\(outcome.reason))"))
        }
        let records = message.answer.filter { $0.type == .svcb }.compactMap { try? $0.svcb() }
            .filter { !$0.isAliasMode }
        guard !records.isEmpty else {
            return finish(Result(note: "DDR: no designation (\(message.rcode), \(message.answer.count) records)"))
        }
        var skipped: [String] = []
        for (designated, target) in Self.designations(records, for: server.host, skipped: &skipped) {
            do {
                let connection = try EncryptedConnections.make(
                    designated, address: SocketAddress(ipAddress: designated.host, port: designated.port),
                    configuration: configuration, statistics: statistics, group: group, logger: logger)
                logger.info("DDR: upgrading the plain upstream", metadata: ["dns.designated": "\(designated)"])
                return finish(
                    Result(
                        connection: connection, kind: designated.transport == .tls ? .tls : .https,
                        designated: designated, note: "DDR: designated \(designated) (\(target))"))
            } catch {
                skipped.append("\(designated): TLS set-up failed: \(error)")
            }
        }
        return finish(Result(note: "DDR: no usable designation (\(skipped.joined(separator: "; ")))"))
    }

    /// The encrypted resolvers `records` designate for the plain upstream at `address`, best first (RFC 9462 §4):
    /// ServiceMode records by priority, ALPN `dot` (port 853 unless given) or `h2` with a `dohpath` (RFC 9461), and
    /// only those whose hints include `address`, so the certificate can be checked for it (§4.2). Why each other
    /// record was passed over goes to `skipped`.
    static func designations(_ records: [SVCBRecord], for address: String, skipped: inout [String])
        -> [(server: UpstreamServer, target: String)]
    {
        var found: [(server: UpstreamServer, target: String)] = []
        for record in records.filter({ !$0.isAliasMode }).sorted(by: { $0.priority < $1.priority }) {
            let hints = record.params.ipv4hint + record.params.ipv6hint
            guard hints.contains(address) else {
                skipped.append("\(record.target.text) at \(hints.joined(separator: ",")) is not \(address)")
                continue
            }
            let alpn = record.params.alpn
            let port = record.params.port.map(Int.init)
            if alpn.contains("dot") {
                found.append((UpstreamServer(transport: .tls, host: address, port: port, tlsName: nil), record.target.text))
            }
            if alpn.contains("h2"), let template = record.params.dohpath {
                // RFC 9461 §5: dohpath is a URI template relative to the target; POST needs only its path.
                let path = String(template.prefix { $0 != "{" })
                found.append(
                    (UpstreamServer(transport: .https, host: address, port: port, tlsName: nil, path: path),
                        record.target.text))
            }
            if !alpn.contains("dot") && !(alpn.contains("h2") && record.params.dohpath != nil) {
                skipped.append("\(record.target.text): ALPN \(alpn.joined(separator: ",")) without dot or h2 + dohpath")
            }
        }
        return found
    }

    private func finish(_ result: Result) -> Result {
        if result.connection == nil { logger.info("DDR found no encrypted path", metadata: ["reason": "\(result.note)"]) }
        return result
    }
}

/// A plain upstream reached through what DDR designated: the encrypted connection once discovery found one; else
/// plain DNS (`opportunistic`) or nothing (`strict`).
struct DDRTransport: UpstreamTransport {
    let discovery: DDRDiscovery
    let plain: PlainDNSTransport
    let strict: Bool

    func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome {
        let found: DDRDiscovery.Result
        if strict {
            // Nothing may go out in clear text: wait for discovery.
            found = await discovery.result()
        } else if let done = discovery.current {
            found = done
        } else {
            // Opportunistic: do not make this query wait for discovery; it goes plain, later ones are upgraded.
            discovery.startInBackground()
            return await plain.attempt(configuration, on: loop, logger: logger, run: run)
        }
        if let connection = found.connection, let kind = found.kind {
            if strict || discovery.verificationFailure == nil {
                let outcome = await run(kind) { query in
                    await connection.exchange(query, timeout: TimeAmount(configuration.tcpTimeout))
                }
                guard case .insecure(let reason) = outcome, !strict else { return outcome }
                // RFC 9462 §4.2: a designation that fails verification is not used; opportunistic mode goes on
                // in clear text, and Status says so.
                discovery.upgradeFailed("DDR designation not verified: \(reason)")
                logger.info("DDR designation not verified; using plain DNS", metadata: ["reason": "\(reason)"])
            }
        } else if strict {
            return .insecure("\(discovery.server): encryption = strict and no encrypted path to it (\(found.note))")
        }
        return await plain.attempt(configuration, on: loop, logger: logger, run: run)
    }
}
