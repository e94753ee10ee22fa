import ArgumentParser
import DiscoverClient
import Foundation

struct HTTPSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "https",
        abstract: "Show a name's HTTPS records (RFC 9460) after client processing.",
        discussion: """
            Examples:
              discover https example.com
              discover https example.com --port 8443 --json
              discover https example.com --watch     # a stale answer, then the refreshed one
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Host name.")
    var name: String

    @Option(name: .long, help: "Port (queries _PORT._https.NAME when not 443).")
    var port: Int?

    @Flag(name: .long, help: "Do not answer from expired cache.")
    var noOptimistic = false

    @Flag(name: .long, help: "When the answer is stale, also print the refreshed answer.")
    var watch = false

    func run() async throws {
        let parameters = ResolveHTTPSParameters(name: name, port: port, optimistic: noOptimistic ? false : nil)
        try await runCommand(global) { client in
            if watch {
                for try await reply in client.stream(Methods.resolveHTTPS, parameters) { try print(reply) }
            } else {
                try print(try await client.call(Methods.resolveHTTPS, parameters))
            }
            return 0
        }
    }

    private func print(_ reply: ResolveHTTPSReply) throws {
        if global.json { return try Output.json(reply) }
        var source = reply.source.rawValue
        if let stale = reply.staleSeconds { source += " (expired \(stale)s ago, refreshing)" }
        Output.line(
            "\(displayName(reply.queryName))  h3=\(reply.h3 ? "yes" : "no")  source=\(source)  ttl=\(reply.ttl)"
                + "  \(String(format: "%.1f", reply.timing.totalMs)) ms")
        if !reply.aliasChain.isEmpty { Output.line("  via: \(reply.aliasChain.map(displayName).joined(separator: " -> "))") }
        for record in reply.records {
            var fields = ["\(record.priority)", displayName(record.target)]
            if !record.alpn.isEmpty { fields.append("alpn=\(record.alpn.joined(separator: ","))") }
            if record.noDefaultAlpn { fields.append("no-default-alpn") }
            if let port = record.port { fields.append("port=\(port)") }
            if !record.ipv4hint.isEmpty { fields.append("ipv4hint=\(record.ipv4hint.joined(separator: ","))") }
            if !record.ipv6hint.isEmpty { fields.append("ipv6hint=\(record.ipv6hint.joined(separator: ","))") }
            if record.ech != nil { fields.append("ech") }
            if let path = record.dohpath { fields.append("dohpath=\(path)") }
            Output.line("  " + fields.joined(separator: " "))
        }
        if reply.records.isEmpty { Output.line("  (no HTTPS records)") }
    }
}

struct H3Command: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "h3",
        abstract: "Does a host speak HTTP/3? Exit 0 yes, 1 no, 2 error.",
        discussion: """
            Example:
              discover h3 example.com && echo "use QUIC"
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Host name.")
    var host: String

    @Option(name: .long, help: "Port (default 443).")
    var port: Int?

    func run() async throws {
        try await runCommand(global) { client in
            let plan = try await client.call(Methods.connectionPlan, ConnectionPlanParameters(host: host, port: port))
            if global.json {
                try Output.json(H3Answer(host: plan.host, port: plan.port, h3: plan.h3, h3Source: plan.h3Source, source: plan.source))
            } else if plan.h3 {
                Output.line("\(displayName(host)): h3 (from \(plan.h3Source ?? "https"))")
            } else {
                Output.line("\(displayName(host)): no h3")
            }
            return plan.h3 ? 0 : 1
        }
    }

    struct H3Answer: Encodable {
        var host: String
        var port: Int
        var h3: Bool
        var h3Source: String?
        var source: AnswerSource
    }
}

struct PlanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show the endpoints to try, in Happy Eyeballs v3 order.",
        discussion: """
            Examples:
              discover plan example.com
              discover plan example.com:8443 --assume-h3
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "HOST or HOST:PORT ([V6]:PORT for addresses).")
    var target: String

    @Flag(name: .long, help: "Plan QUIC even without evidence of h3 (like URLSession's assumesHTTP3Capable).")
    var assumeH3 = false

    @Flag(name: .long, help: "Do not answer from expired cache.")
    var noOptimistic = false

    func run() async throws {
        let (host, port) = try Self.split(target)
        try await runCommand(global) { client in
            let plan = try await client.call(
                Methods.connectionPlan,
                ConnectionPlanParameters(
                    host: host, port: port, optimistic: noOptimistic ? false : nil, assumeH3: assumeH3 ? true : nil))
            if global.json { try Output.json(plan); return 0 }
            Output.line(
                "\(displayName(plan.host)):\(plan.port)  h3=\(plan.h3 ? "yes" : "no")\(plan.h3Source.map { " (\($0))" } ?? "")"
                    + "  source=\(plan.source.rawValue)  \(String(format: "%.1f", plan.timing.totalMs)) ms")
            for (index, endpoint) in plan.endpoints.enumerated() {
                let address = endpoint.address.contains(":") ? "[\(endpoint.address)]" : endpoint.address
                Output.line(
                    "  \(index + 1). \(endpoint.transport.padding(toLength: 4, withPad: " ", startingAt: 0)) "
                        + "\(address):\(endpoint.port)  alpn=\(endpoint.alpn.joined(separator: ","))"
                        + "  target=\(displayName(endpoint.target))  priority=\(endpoint.priority)\(endpoint.ech != nil ? "  ech" : "")")
            }
            if plan.endpoints.isEmpty { Output.line("  (no endpoints)") }
            return 0
        }
    }

    static func split(_ target: String) throws -> (String, Int?) {
        if target.hasPrefix("["), let close = target.firstIndex(of: "]") {
            let host = String(target[target.index(after: target.startIndex)..<close])
            let rest = target[target.index(after: close)...]
            if rest.isEmpty { return (host, nil) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()) else {
                throw ValidationError("expected [ADDRESS]:PORT, got \(target)")
            }
            return (host, port)
        }
        let parts = target.split(separator: ":")
        if parts.count == 2 {
            guard let port = Int(parts[1]) else { throw ValidationError("port '\(parts[1])' is not a number") }
            return (String(parts[0]), port)
        }
        return (target, nil)
    }
}

struct AltSvcCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "alt-svc",
        abstract: "Tell discoverd what an origin's Alt-Svc header said (RFC 7838).",
        discussion: """
            Example:
              discover alt-svc https://example.com 'h3=":443"; ma=86400'
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Origin, e.g. https://example.com or https://example.com:8443.")
    var origin: String

    @Argument(help: "The Alt-Svc header value.")
    var header: String

    func run() async throws {
        try await runCommand(global) { client in
            _ = try await client.call(Methods.reportAltSvc, ReportAltSvcParameters(origin: origin, header: header))
            if global.json { try Output.json(["origin": origin, "recorded": "yes"]) } else { Output.line("recorded") }
            return 0
        }
    }
}
