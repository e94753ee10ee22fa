import ArgumentParser
import DiscoverClient
import Foundation

struct BrowseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browse",
        abstract: "Watch services of a type come and go (like dns-sd -B / avahi-browse).",
        discussion: """
            Streams one line per event until Ctrl-C; --once prints the services present at all-for-now \
            and exits.

            Examples:
              discover browse _tictactoe._tcp
              discover browse _http._tcp --resolve --json
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Service type, e.g. _http._tcp.")
    var type: String

    @Option(name: .long, help: "Browse only this domain (default: every browse domain).")
    var domain: String?

    @Option(name: .long, help: "Only this subtype, e.g. _printer.")
    var subtype: String?

    @Option(name: .long, help: "Only this network interface.")
    var interface: String?

    @Flag(name: .long, help: "Also resolve host, port, addresses and TXT, and report their changes.")
    var resolve = false

    @Flag(name: .long, help: "Print the services present at all-for-now, then exit.")
    var once = false

    func run() async throws {
        let parameters = BrowseParameters(
            type: type, domain: domain, subtype: subtype, interface: interface, resolve: resolve)
        try await runCommand(global) { client in
            if once {
                let reply = try await client.call(Methods.browse, parameters)
                for service in reply.services ?? [] {
                    if global.json { try Output.json(service) } else { Output.line(ServiceText.line(service)) }
                }
                return 0
            }
            if !global.json {
                _ = try await client.status()  // fail with the usual line if the daemon is not there
                Output.line("Browsing for \(type)\(domain.map { " in \($0)" } ?? "")")
            }
            for try await event in client.stream(Methods.browse, parameters) {
                if global.json { try Output.json(event); continue }
                guard let kind = event.event else { continue }
                if kind == .allForNow {
                    Output.line("\(ServiceText.timestamp())  -- all for now --")
                } else if let service = event.service {
                    Output.line("\(ServiceText.timestamp())  \(kind.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(ServiceText.line(service))")
                }
            }
            return 0
        }
    }
}

struct ResolveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve", abstract: "Resolve one service instance: host, port, addresses, TXT (like dns-sd -L).")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Instance name, e.g. \"Living Room\".")
    var name: String

    @Argument(help: "Service type, e.g. _http._tcp.")
    var type: String

    @Option(name: .long, help: "Domain (default: local).")
    var domain: String?

    @Option(name: .long, help: "Give up after this many milliseconds.")
    var timeoutMs: Int?

    func run() async throws {
        try await runCommand(global) { client in
            let reply = try await client.call(
                Methods.resolveService,
                ResolveServiceParameters(name: name, type: type, domain: domain, timeoutMs: timeoutMs))
            if global.json { try Output.json(reply.service) } else { ServiceText.details(reply.service) }
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
            is withdrawn when this command exits.

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
        try await runCommand(global) { client in
            for try await event in client.stream(Methods.advertise, parameters) {
                if global.json { try Output.json(event); continue }
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
    static func timestamp() -> String {
        let now = Date()
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss.SSS"
        return formatter.string(from: now)
    }

    static func line(_ service: Service) -> String {
        var text = "\(service.interfaces.joined(separator: ",").padding(toLength: 8, withPad: " ", startingAt: 0)) "
            + "\(service.name)  \(service.type)  \(service.domain)"
        if let host = service.host, let port = service.port { text += "  \(host):\(port)" }
        if !service.addresses.isEmpty { text += "  [\(service.addresses.joined(separator: ", "))]" }
        if !service.txt.isEmpty || service.txtRaw != nil {
            text += "  " + TXTText.display(service).joined(separator: " ")
        }
        return text
    }

    static func details(_ service: Service) {
        Output.line("\(service.name).\(service.type).\(service.domain)")
        if let host = service.host { Output.line("  host:       \(host)\(service.port.map { ":\($0)" } ?? "")") }
        Output.line("  addresses:  \(service.addresses.joined(separator: ", "))")
        Output.line("  interfaces: \(service.interfaces.joined(separator: ", "))")
        for entry in TXTText.display(service) { Output.line("  txt:        \(entry)") }
    }
}
