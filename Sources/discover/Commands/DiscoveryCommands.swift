import ArgumentParser
import DNSSDModel
import DiscoverClient
import Foundation

struct ResolveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve one service instance: host, port, addresses, TXT (like dns-sd -L).",
        discussion: """
            Says on stderr what it is waiting for; gives up after --timeout seconds (default 5) with exit \
            status 1, the answer mDNS gives for a service that is not there.

            Examples:
              discover resolve "Game of Bob" _tictactoe._tcp
              discover resolve --timeout 2 -j "Living Room" _airplay._tcp
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Instance name, e.g. \"Living Room\".")
    var name: String

    @Argument(help: "Service type, e.g. _http._tcp.")
    var type: String

    @Option(name: .long, help: "Domain (default: local).")
    var domain: String?

    func run() async throws {
        let seconds = global.timeout ?? 5
        let parameters = ResolveServiceParameters(
            name: name, type: type, domain: domain, timeoutMs: Int((seconds * 1000).rounded(.up)))
        let (json, instance) = (global.json, "\"\(name)\" \(type) in \(domain ?? "local")")
        if !json { Output.error("Resolving \(instance) (up to \(ErrorText.seconds(seconds)))...") }
        // The daemon's own deadline ends the call; ours is a little later so its answer can arrive.
        var outer = global
        outer.timeout = seconds + 2
        try await runCommand(outer) { client in
            let reply: ResolveServiceReply
            do {
                reply = try await client.call(Methods.resolveService, parameters)
            } catch let error as DiscoverError where error.code == .discoveryTimeout || error.code == .notFound {
                Output.error("discover: \(instance): not found (no answer within \(ErrorText.seconds(seconds)))")
                return 1
            }
            if json { try Output.json(reply.service) } else { ServiceText.details(reply.service) }
            return 0
        }
    }
}

struct AdvertiseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Advertise a service until Ctrl-C (like dns-sd -R / avahi-publish -s).",
        discussion: """
            Prints the final name (Avahi renames on a collision) and keeps the advertisement alive; it \
            is withdrawn when this command ends (Ctrl-C ends it quietly with exit status 0; so does \
            --timeout).

            Example:
              discover advertise "Game of Bob" _tictactoe._tcp 4242 version=2 players=1
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Instance name.")
    var name: String

    @Argument(help: "Service type, e.g. _tictactoe._tcp.")
    var type: String

    @Argument(help: "Port.")
    var port: Int

    @Argument(help: "TXT entries: key=value, key= (empty value) or key (a boolean attribute).")
    var txt: [String] = []

    @Option(name: .long, help: "Subtype to register too; repeatable.")
    var subtype: [String] = []

    @Option(name: .long, help: "Domain (default: local).")
    var domain: String?

    @Option(name: .long, help: "Host name to point at (default: this host).")
    var host: String?

    func run() async throws {
        let entries: [String: String?]
        do { entries = try TXTText.attributes(txt) } catch { throw ValidationError(error.description) }
        let parameters = AdvertiseParameters(
            name: name, type: type, port: port, txt: entries.isEmpty ? nil : entries,
            subtypes: subtype.isEmpty ? nil : subtype, domain: domain, host: host)
        let (json, type, port) = (global.json, type, port)
        try await runCommand(global, .live) { client in
            for try await event in client.stream(Methods.advertise, parameters) {
                if json { try Output.timedJSON(event); continue }
                switch event.event {
                case .registered: Output.line("registered \"\(event.name)\" \(type) port \(port)")
                case .renamed: Output.line("renamed to \"\(event.name)\" (name conflict)")
                case .failed: Output.line("failed: \(event.error ?? "unknown error")")
                case .withdrawn: Output.line("withdrawn")
                }
            }
            return 0
        }
    }
}

struct TypesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "types", abstract: "List the service types seen on the network.")

    @OptionGroup var global: GlobalOptions

    @Option(name: .long, help: "Domain (default: local).")
    var domain: String?

    func run() async throws {
        try await runCommand(global) { client in
            let reply = try await client.call(Methods.browseTypes, BrowseTypesParameters(domain: domain))
            if global.json { try Output.json(reply) } else { reply.types.forEach(Output.line) }
            return 0
        }
    }
}

struct DomainsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "domains", abstract: "List the browse domains Avahi knows.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await runCommand(global) { client in
            let reply = try await client.call(Methods.browseDomains, VarlinkEmpty())
            if global.json { try Output.json(reply) } else { reply.domains.forEach(Output.line) }
            return 0
        }
    }
}

/// Text rendering of services.
enum ServiceText {
    /// `host:port  [addresses]  TXT` of a resolved service; nil when nothing is resolved yet.
    static func resolvedFields(_ service: DNSSDService) -> String? {
        var fields: [String] = []
        if let host = service.host { fields.append(service.port.map { "\(host):\($0)" } ?? host) }
        if !service.addresses.isEmpty { fields.append("[\(service.addresses.joined(separator: ", "))]") }
        if !service.txt.isEmpty || service.txtRaw != nil {
            fields.append(TXTText.display(service).joined(separator: " "))
        }
        return fields.isEmpty ? nil : fields.joined(separator: "  ")
    }

    static func details(_ service: DNSSDService) {
        Output.line("\(service.name).\(service.type).\(service.domain)")
        if let host = service.host { Output.line("  host:       \(host)\(service.port.map { ":\($0)" } ?? "")") }
        Output.line("  addresses:  \(service.addresses.joined(separator: ", "))")
        Output.line("  interfaces: \(service.interfaces.joined(separator: ", "))")
        for entry in TXTText.display(service) { Output.line("  txt:        \(entry)") }
    }
}
