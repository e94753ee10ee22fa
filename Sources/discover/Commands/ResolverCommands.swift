import ArgumentParser
import DiscoverClient
import Foundation

struct HTTPSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "https",
        abstract: "Show a host's HTTPS records (RFC 9460) after client processing, every key included.",
        discussion: """
            Prints each usable ServiceMode record with all its keys in zone-file form (mandatory, alpn, \
            no-default-alpn, port, ipv4hint, ech as base64, ipv6hint, dohpath, unknown keys as keyNNN="..."), \
            the alias chain followed, and why records were set aside ("why:": an alias loop, a malformed \
            record, a mandatory key discoverd does not support). A port other than 443 queries _PORT._https.HOST.

            Examples:
              discover https example.com
              discover https example.com:8443 --json
              discover https example.com --watch     # a stale answer, then the refreshed one
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var host: HostTarget

    @Flag(name: .long, help: "Do not answer from expired cache.")
    var noOptimistic = false

    @Flag(name: .long, help: "When the answer is stale, also print the refreshed answer.")
    var watch = false

    func validate() throws {
        try host.requireName(for: "HTTPS", instead: "try: discover plan \(host.target)")
    }

    func run() async throws {
        let target = try host.parsed()
        let parameters = ResolveHTTPSParameters(
            name: target.host, port: target.port, optimistic: noOptimistic ? false : nil)
        let json = global.json
        try await runCommand(global, watch ? .live : .oneShot) { client in
            if watch {
                for try await reply in client.stream(Methods.resolveHTTPS, parameters) {
                    if json { try Output.json(reply) } else { BindingText.print(reply, recordType: "HTTPS") }
                }
            } else {
                let reply = try await client.call(Methods.resolveHTTPS, parameters)
                if json { try Output.json(reply) } else { BindingText.print(reply, recordType: "HTTPS") }
            }
            return 0
        }
    }
}

struct SVCBCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "svcb",
        abstract: "Show a name's SVCB records (RFC 9460, type 64), e.g. DNS resolver discovery (RFC 9461).",
        discussion: """
            Give the name with its scheme prefix (_dns.resolver.example); NAME:PORT queries _PORT.NAME \
            (RFC 9460 section 2.3). Records are printed like `discover https` prints them.

            Examples:
              discover svcb _dns.resolver.example
              discover svcb _dns.resolver.example:853
              discover svcb -j svc.example
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var host: HostTarget

    @Flag(name: .long, help: "Do not answer from expired cache.")
    var noOptimistic = false

    func validate() throws {
        try host.requireName(for: "SVCB", instead: "SVCB records belong to names")
    }

    func run() async throws {
        let target = try host.parsed()
        let parameters = ResolveSVCBParameters(
            name: target.host, port: target.port, optimistic: noOptimistic ? false : nil)
        let json = global.json
        try await runCommand(global) { client in
            let reply = try await client.call(Methods.resolveSVCB, parameters)
            if json { try Output.json(reply) } else { BindingText.print(reply, recordType: "SVCB") }
            return 0
        }
    }
}

struct H3Command: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "h3",
        abstract: "Does a host speak HTTP/3? Exit 0 yes, 1 no, 2 error.",
        discussion: """
            Evidence: the host's HTTPS records, or an Alt-Svc header reported earlier (`discover alt-svc`). \
            An address needs no DNS: only Alt-Svc reported for it counts.

            Examples:
              discover h3 example.com && echo "use QUIC"
              discover h3 example.com:8443
              discover h3 -j 192.0.2.10
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var host: HostTarget

    func run() async throws {
        let target = try host.parsed()
        let json = global.json
        try await runCommand(global) { client in
            let plan = try await client.call(
                Methods.connectionPlan, ConnectionPlanParameters(host: target.host, port: target.port))
            if json {
                try Output.json(
                    H3Answer(
                        host: plan.host, port: plan.port, h3: plan.h3, h3Source: plan.h3Source, source: plan.source,
                        dnssec: plan.dnssec))
            } else if plan.h3 {
                Output.line("\(target): h3 (from \(plan.h3Source ?? "https"), dnssec \(plan.dnssec.rawValue))")
            } else {
                Output.line("\(target): no h3")
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
        var dnssec: DNSSECStatus
    }
}

struct PlanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show the endpoints to try, in Happy Eyeballs v3 order.",
        discussion: """
            An address is its own plan (no DNS); Alt-Svc reported for it adds QUIC. When an endpoint has ECH, \
            ech-authenticated says whether its configuration came from an authenticated answer: DNSSEC-secure, \
            or over an encrypted upstream with a verified certificate (docs/DNSSEC.md).

            Examples:
              discover plan example.com
              discover plan example.com:8443 --assume-h3
              discover plan 192.0.2.10
              discover plan [2001:db8::10]:443
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var host: HostTarget

    @Flag(name: .long, help: "Plan QUIC even without evidence of h3 (like URLSession's assumesHTTP3Capable).")
    var assumeH3 = false

    @Flag(name: .long, help: "Do not answer from expired cache.")
    var noOptimistic = false

    func run() async throws {
        let target = try host.parsed()
        let parameters = ConnectionPlanParameters(
            host: target.host, port: target.port, optimistic: noOptimistic ? false : nil,
            assumeH3: assumeH3 ? true : nil)
        let json = global.json
        try await runCommand(global) { client in
            let plan = try await client.call(Methods.connectionPlan, parameters)
            if json {
                try Output.json(plan)
                return 0
            }
            let origin = HostPort(host: displayName(plan.host), port: plan.port)
            Output.line(
                "\(origin)  h3=\(plan.h3 ? "yes" : "no")\(plan.h3Source.map { " (\($0))" } ?? "")"
                    + "  source=\(plan.source.rawValue)  dnssec=\(plan.dnssec.rawValue)"
                    + (plan.echAuthentication.map { "  ech-authenticated=\(Self.describe($0))" } ?? "")
                    + "  \(String(format: "%.1f", plan.timing.totalMs)) ms")
            for (index, endpoint) in plan.endpoints.enumerated() {
                let address = HostPort(host: endpoint.address, port: endpoint.port)
                Output.line(
                    "  \(index + 1). \(Output.pad(endpoint.transport, 4)) \(address)"
                        + "  alpn=\(endpoint.alpn.joined(separator: ","))  target=\(displayName(endpoint.target))"
                        + "  priority=\(endpoint.priority)\(endpoint.ech.map { "  ech=\($0)" } ?? "")")
            }
            if plan.endpoints.isEmpty { Output.line("  (no endpoints)") }
            return 0
        }
    }
    /// `yes (dnssec)`, `yes (encrypted transport)` or `no`.
    static func describe(_ authentication: ECHAuthenticationStatus) -> String {
        switch authentication {
        case .dnssec: "yes (dnssec)"
        case .encryptedTransport: "yes (encrypted transport)"
        case .none: "no"
        }
    }
}

struct AddressesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "addresses",
        abstract: "Look up a name's IPv6 and IPv4 addresses through discoverd's cache (like resolvectl query).",
        discussion: """
            Exit status 1 when the name has no address of the family asked (or does not exist).

            Examples:
              discover addresses example.com
              discover addresses -4 example.com
              discover addresses -j example.com
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Host name.")
    var name: String

    @Flag(name: .customShort("4"), help: "IPv4 addresses only.")
    var ipv4 = false

    @Flag(name: .customShort("6"), help: "IPv6 addresses only.")
    var ipv6 = false

    @Flag(name: .long, help: "Do not answer from expired cache.")
    var noOptimistic = false

    func validate() throws {
        if ipv4 && ipv6 { throw ValidationError("-4 and -6 exclude each other; give neither for both families") }
        let parsed: HostPort
        do { parsed = try HostPort(parsing: name) } catch { throw ValidationError(error.message) }
        if parsed.isAddressLiteral { throw ValidationError("\(parsed.host) is already an address") }
        if parsed.port != nil { throw ValidationError("addresses takes a name without a port, not \(name)") }
    }

    func run() async throws {
        let family: AddressFamily = ipv4 ? .ipv4 : ipv6 ? .ipv6 : .any
        let parameters = ResolveAddressesParameters(name: name, family: family, optimistic: noOptimistic ? false : nil)
        let json = global.json
        try await runCommand(global) { client in
            let reply = try await client.call(Methods.resolveAddresses, parameters)
            if json {
                try Output.json(reply)
                return reply.addresses.isEmpty ? 1 : 0
            }
            let label = "\(displayName(reply.name)): "
            guard !reply.addresses.isEmpty else {
                let kind = family == .ipv4 ? "IPv4 " : family == .ipv6 ? "IPv6 " : ""
                Output.line("\(label)no \(kind)addresses")
                return 1
            }
            for (index, address) in reply.addresses.enumerated() {
                Output.line((index == 0 ? label : String(repeating: " ", count: label.count)) + address)
            }
            let milliseconds = String(format: "%.1f", reply.timing.totalMs)
            Output.line(
                "-- source=\(reply.source.rawValue)  ttl=\(reply.ttl)  dnssec=\(reply.dnssec.rawValue)  \(milliseconds) ms")
            return 0
        }
    }
}

struct AltSvcCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "alt-svc",
        abstract: "Tell discoverd what an origin's Alt-Svc header said (RFC 7838).",
        discussion: """
            root's reports count for every user; another user's only for that user's own plans. \
            Alternatives a plan cannot use (draft versions such as h3-29, protocols other than h3, ma=0, an \
            address as alternative host) are listed as ignored, with the reason. Exit status 1 when nothing \
            was recorded.

            Examples:
              discover alt-svc https://example.com 'h3=":443"; ma=86400'
              discover alt-svc https://example.com:8443 clear
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Origin, e.g. https://example.com or https://example.com:8443.")
    var origin: String

    @Argument(help: "The Alt-Svc header value.")
    var header: String

    func run() async throws {
        let (origin, header, json) = (origin, header, global.json)
        try await runCommand(global) { client in
            let reply = try await client.call(
                Methods.reportAltSvc, ReportAltSvcParameters(origin: origin, header: header))
            if json {
                try Output.json(Output.Extended(value: reply, extra: ["origin": origin]))
            } else {
                let scope = reply.scope == .everyone ? "for every user" : "for your own plans (uid \(getuid()))"
                if reply.cleared { Output.line("cleared \(origin) \(scope)") }
                for alternative in reply.alternatives { Output.line("recorded \(scope): \(alternative)") }
                for ignored in reply.ignored { Output.line("ignored \(ignored.alternative): \(ignored.reason)") }
                if !reply.recorded && reply.ignored.isEmpty { Output.line("nothing recorded") }
            }
            return reply.recorded ? 0 : 1
        }
    }
}
