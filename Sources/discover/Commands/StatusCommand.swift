import ArgumentParser
import DiscoverClient
import Foundation

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the daemon's state: Avahi, upstreams, cache, the DNS stub, clients, and the limits in effect.")

    @OptionGroup var global: GlobalOptions

    @Flag(name: .long, help: "Keep printing the status every --interval seconds until Ctrl-C.")
    var watch = false

    @Option(name: .long, help: "Seconds between updates with --watch.")
    var interval: Double = 1

    func run() async throws {
        try await runCommand(global, watch ? .live : .oneShot) { client in
            if watch {
                for try await status in client.watchStatus(every: .milliseconds(Int(max(0.001, interval) * 1000))) {
                    try show(status, socket: client.socketPath)
                    if !global.json { Output.line("") }
                }
                return 0
            }
            try show(try await client.status(), socket: client.socketPath)
            return 0
        }
    }

    private func show(_ status: StatusReply, socket: String) throws {
            if global.json {
                try Output.json(status)
                return
            }
            let cache = status.cache
            Output.line("discoverd \(status.version), up \(Self.duration(status.uptimeSeconds))")
            Output.line("socket:     \(socket)")
            Output.line("avahi:      \(status.avahi.rawValue)")
            Output.line("upstreams:  \(status.upstreams.isEmpty ? "none" : status.upstreams.joined(separator: ", "))")
            Output.line(
                "cache:      \(cache.entries) entries, \(cache.hits) hits, \(cache.misses) misses, "
                    + "\(cache.staleServed) served stale, \(cache.refreshes) refreshes (\(cache.refreshFailures) failed)")
            if let stub = status.stub {
                Output.line("dns stub:   \(stub.listen.joined(separator: ", "))")
                Output.line(
                    "            \(stub.queries.udp) udp + \(stub.queries.tcp) tcp queries: \(stub.cacheAnswers) from cache, "
                        + "\(stub.staleAnswers) stale, \(stub.forwarded) forwarded, \(stub.local) mDNS, "
                        + "\(stub.refused) refused, \(stub.truncated) truncated, \(stub.serverFailures) SERVFAIL")
                if let line = Self.stubLimits(stub) { Output.line(line) }
                if let nearest = stub.nearestToCaps, !nearest.isEmpty {
                    let text = nearest.map { "\($0.address): \($0.connections) tcp" }
                    Output.line("            busiest: " + text.joined(separator: "; "))
                }
            } else {
                Output.line("dns stub:   off")
            }
            if let queries = status.upstreamQueries {
                var line =
                    "upstream:   \(queries.inflight) queries in flight (limit \(queries.limit), "
                    + "\(queries.perClientLimit) per client; peak \(queries.peak)), \(queries.socketsOpen) sockets "
                    + "(limit \(queries.socketLimit)), \(queries.coalesced) coalesced, "
                    + "\(queries.refused + queries.refusedPerClient) refused, \(queries.scrubbedRecords) records scrubbed"
                if let busiest = queries.busiestClient { line += "; busiest: \(busiest) (\(queries.busiestClientInflight))" }
                Output.line(line)
            }
            for server in status.upstreamServers ?? [] {
                Output.line(Self.describe(server))
            }
            if let dnssec = status.dnssec {
                var line =
                    "dnssec:     \(dnssec.mode) (upstreams \(dnssec.upstreams)): \(dnssec.secure) secure, "
                    + "\(dnssec.insecure) insecure, \(dnssec.bogus) bogus"
                if let name = dnssec.lastBogusName {
                    line += "; last bogus: \(name)\(dnssec.lastBogusReason.map { " (\($0))" } ?? "")"
                } else if dnssec.bogus > 0 {
                    line += "; last bogus: \(Self.namesHidden)"
                }
                Output.line(line)
                for upstream in dnssec.upstreamStates ?? [] {
                    var detail = [upstream.evidence, upstream.sinceSeconds.map { "since \(Self.duration($0)) ago" }]
                        .compactMap { $0 }.joined(separator: ", ")
                    if !detail.isEmpty { detail = " (\(detail))" }
                    Output.line("            \(upstream.server): \(upstream.state)\(detail)")
                }
            }
            Output.line(
                "clients:    \(status.connections) connections, \(status.subscriptions) streams, "
                    + "\(status.registrations) registrations")
            if let settings = status.settings, let perConnections = settings.maxConnectionsPerUid,
                let perCalls = settings.maxCallsPerUid
            {
                Output.line(
                    "limits:     \(settings.maxConnections) connections (+\(settings.reservedConnections ?? 0) for root "
                        + "and admins), per uid \(perConnections) connections and \(perCalls) calls, idle timeout "
                        + "\(settings.idleTimeout.map { $0 == 0 ? "none" : "\($0)s" } ?? "none")")
            }
            if let nearest = status.nearestToCaps, !nearest.isEmpty {
                let text = nearest.map { "uid \($0.uid): \($0.connections) connections, \($0.calls) calls" }
                Output.line("busiest:    " + text.joined(separator: "; "))
            }
    }

    /// `            limits: 3 of 1024 tcp connections (0 refused at a cap), 32 per address, idle 10s, 5 refusals/s per
    /// network, cookies off`; nil when the daemon does not report the stub's caps.
    static func stubLimits(_ stub: StubStatus) -> String? {
        guard let limits = stub.limits else { return nil }
        let open = stub.tcpConnections ?? 0
        let refused = stub.tcpRefused ?? 0
        let cookies = limits.cookies ? "on" : "off"
        var line = "            limits: \(open) of \(limits.maxTcp) tcp connections (\(refused) refused at a cap), "
        line += "\(limits.maxTcpPerAddress) per address, idle \(limits.tcpIdleTimeout)s, "
        line += "\(limits.refusalsPerSecond) refusals/s per network, cookies \(cookies)"
        return line
    }

    /// `  tls://192.0.2.56:853#dns.lab.test: tls (configured), TLSv1.3 verified dns.lab.test, 1 connection (1 open),
    /// 1 handshake (0 resumed), 1000 queries, p50 0.8 ms, 0 failures`, then `, 2 error answers (last: www.example.
    /// A: SERVFAIL, EDE 7 (Signature Expired): ...)` when it answered with an error code.
    static func describe(_ server: UpstreamServerStatus) -> String {
        var line = "  \(server.server): \(server.transport) (\(server.origin))"
        if let note = server.note { line += ", \(note)" }
        if let version = server.tlsVersion {
            line += ", " + tls(version, verifiedName: server.verifiedName, keyPin: server.keyPin,
                pinned: server.keyPinned == true)
        }
        if server.transport == "tls" || server.transport == "https" {
            line += ", \(server.connectionsOpened) connections (\(server.connectionsOpen) open), "
                + "\(server.handshakes) handshakes (\(server.resumptions) resumed)"
        }
        line += ", \(server.queries) queries"
        if let p50 = server.p50Ms { line += ", p50 \(String(format: "%.1f", p50)) ms" }
        line += ", \(server.failures) failures"
        if let last = server.lastFailure { line += " (last: \(last))" }
        if server.errorAnswers > 0 {
            line += ", \(server.errorAnswers) error answers"
            line += " (last: \(server.lastErrorAnswer ?? Self.namesHidden))"
        }
        return line
    }

    /// `TLSv1.3 verified dns.example`, `TLSv1.3 verified key pin-sha256=BASE64` (a configured pin matched the
    /// server's key) or `TLSv1.3 not authenticated` (DDR's opportunistic profile, RFC 9462 §4.3).
    static func tls(_ version: String, verifiedName: String?, keyPin: String?, pinned: Bool) -> String {
        if let verifiedName { return "\(version) verified \(verifiedName)" }
        if pinned, let keyPin { return "\(version) verified key pin-sha256=\(keyPin)" }
        return "\(version) not authenticated"
    }

    /// What stands for a name looked up when the daemon leaves it out (the caller is neither root nor an admin).
    static let namesHidden = "shown to root and the admin group"

    static func duration(_ seconds: Int) -> String {
        if seconds < 60 { return "\(seconds)s" }
        if seconds < 3600 { return "\(seconds / 60)m \(seconds % 60)s" }
        if seconds < 86400 { return "\(seconds / 3600)h \(seconds % 3600 / 60)m" }
        return "\(seconds / 86400)d \(seconds % 86400 / 3600)h"
    }
}

struct CallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Call any varlink method with JSON parameters and print the reply (like varlinkctl call).",
        discussion: """
            Examples:
              discover call io.discoverd.Daemon.Status
              discover call io.discoverd.Resolver.ResolveHTTPS '{"name":"example.com"}'
              discover call --more io.discoverd.Discovery.Browse '{"type":"_http._tcp"}'
            """)

    @OptionGroup var global: GlobalOptions

    @Flag(name: .long, help: "Call with more: true and print every reply.")
    var more = false

    @Argument(help: "Fully qualified method, e.g. io.discoverd.Daemon.Status.")
    var method: String

    @Argument(help: "Parameters as a JSON object.")
    var parameters: String = "{}"

    func validate() throws {
        _ = try object()
    }

    private func object() throws -> [String: JSONValue] {
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(parameters.utf8)) else {
            throw ValidationError("parameters must be a JSON object, e.g. '{\"name\":\"example.com\"}'")
        }
        return object
    }

    func run() async throws {
        let (object, method, more) = (try object(), method, more)
        try await runCommand(global, more ? .live : .oneShot) { client in
            if more {
                for try await reply in client.rawStream(method: method, parameters: object) { try Output.json(reply) }
            } else {
                try Output.json(try await client.rawCall(method: method, parameters: object))
            }
            return 0
        }
    }
}

struct FlushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flush", abstract: "Drop cached DNS answers for a name, or all of them (root or admin group).")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Only this name.")
    var name: String?

    func run() async throws {
        try await runCommand(global) { client in
            let reply = try await client.call(Methods.flush, FlushParameters(name: name))
            if global.json { try Output.json(reply) } else { Output.line("flushed \(reply.flushed) entries") }
            return 0
        }
    }
}
