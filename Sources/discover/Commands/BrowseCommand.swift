import ArgumentParser
import DNSSDModel
import DiscoverClient
import Foundation
import Synchronization

struct BrowseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browse",
        abstract: "Watch services of a type come and go (like dns-sd -B / avahi-browse).",
        discussion: """
            Streams one line per event until Ctrl-C (which ends it with exit status 0): the time, Add, Rmv \
            or Chg, the interfaces, the domain, the type and, last because it may hold spaces, the instance \
            name. With -r each Add/Chg is followed by an indented line with host:port, addresses and TXT.

            -p prints avahi-browse's parseable lines, fields separated by ';' and the name escaped like \
            avahi does (space as \\032, '.' as \\.):
              +;IFACES;any;NAME;TYPE;DOMAIN                       an instance appeared
              -;IFACES;any;NAME;TYPE;DOMAIN                       it went away
              =;IFACES;IPv4|IPv6;NAME;TYPE;DOMAIN;HOST;ADDRESS;PORT;"k=v" ...
                                                                  resolved (-r), one line per address
            IFACES lists every interface the instance is seen on, comma-separated. JSON events (-j) carry \
            a "timestamp" (ISO 8601, UTC).

            Examples:
              discover browse _tictactoe._tcp
              discover browse -r _http._tcp
              discover browse -rt _ipp._tcp          # resolve, then exit at all-for-now
              discover browse -a -t                  # every type on the network, then exit
              discover browse -p -r _http._tcp | cut -d';' -f4,8,9
              discover browse -j _http._tcp
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Service type, e.g. _http._tcp (none with --all).")
    var type: String?

    @Flag(name: [.customShort("a"), .long], help: "Browse every service type seen on the network (avahi-browse -a).")
    var all = false

    @Flag(name: [.customShort("r"), .long], help: "Also resolve host, port, addresses and TXT, and report changes.")
    var resolve = false

    @Flag(
        name: [.customShort("t"), .customLong("once"), .customLong("terminate")],
        help: "Exit once the services present now are listed (all-for-now), like avahi-browse -t.")
    var once = false

    @Flag(name: [.customShort("p"), .long], help: "Parseable output: ';'-separated fields, like avahi-browse -p.")
    var parseable = false

    @Option(name: .long, help: "Browse only this domain (default: every browse domain).")
    var domain: String?

    @Option(name: .long, help: "Only this subtype, e.g. _printer.")
    var subtype: String?

    @Option(name: .long, help: "Only this network interface.")
    var interface: String?

    func validate() throws {
        if all && type != nil { throw ValidationError("give a service type or --all, not both") }
        if !all && type == nil { throw ValidationError("which service type? e.g. _http._tcp, or --all for every type") }
        if parseable && global.json { throw ValidationError("-p and --json are two output formats: choose one") }
    }

    func run() async throws {
        let printer = BrowsePrinter(
            style: global.json ? .json : parseable ? .parseable : .text, resolve: resolve)
        let command = self
        try await runCommand(global, .live) { client in
            if printer.style == .text {
                _ = try await client.status()  // fail with the usual line if the daemon is not there
                let what = command.type ?? "every service type"
                let stop = command.once ? "until all-for-now" : "until Ctrl-C"
                Output.line("Browsing for \(what)\(command.domain.map { " in \($0)" } ?? "") (\(stop))")
                printer.header()
            }
            if command.all { return try await command.browseAll(client, printer) }
            for try await event in client.stream(Methods.browse, command.parameters(command.type ?? "")) {
                printer.print(event)
                if event.event == .allForNow && command.once { break }
            }
            return 0
        }
    }

    func parameters(_ type: String) -> BrowseParameters {
        BrowseParameters(
            type: type, domain: domain, subtype: subtype, interface: interface, resolve: resolve ? true : nil)
    }

    private enum Step: Sendable {
        /// A type's stream ended (with --once: at its all-for-now).
        case ended
        /// The periodic look at the type list: the types not browsed yet.
        case newTypes([String])
    }

    /// Browses every type BrowseTypes reports, one stream each, and (live) types that show up later; one
    /// all-for-now once every type first seen has reported its own.
    private func browseAll(_ client: DiscoverClient, _ printer: BrowsePrinter) async throws -> Int32 {
        let types = try await client.call(Methods.browseTypes, BrowseTypesParameters(domain: domain)).types
        let pending = PendingTypes(types)
        if types.isEmpty { printer.allForNow() }
        let command = self
        try await withThrowingTaskGroup(of: Step.self) { group in
            @Sendable func browse(_ type: String) async throws -> Step {
                for try await event in client.stream(Methods.browse, command.parameters(type)) {
                    guard event.event == .allForNow else {
                        printer.print(event)
                        continue
                    }
                    if pending.reported(type) { printer.allForNow() }
                    if command.once { return .ended }
                }
                return .ended
            }
            @Sendable func poll(_ known: Set<String>) async throws -> Step {
                try await Task.sleep(for: .seconds(5))
                let now = try await client.call(Methods.browseTypes, BrowseTypesParameters(domain: command.domain))
                return .newTypes(now.types.filter { !known.contains($0) })
            }
            var known = Set(types)
            for type in types { group.addTask { try await browse(type) } }
            if !once { group.addTask { [known] in try await poll(known) } }
            while let step = try await group.next() {
                guard case .newTypes(let fresh) = step else { continue }
                for type in fresh {
                    known.insert(type)
                    group.addTask { try await browse(type) }
                }
                group.addTask { [known] in try await poll(known) }
            }
        }
        return 0
    }
}

/// What `browse -p` printed per instance, so repeated resolved lines are not printed again.
final class PrintedLines: Sendable {
    private let lines = Mutex<[String: Set<String>]>([:])

    /// The lines of `candidates` not printed before for `instance`; `reset` forgets the instance (it went away).
    func new(_ candidates: [String], for instance: String, reset: Bool) -> [String] {
        lines.withLock { lines in
            if reset {
                lines[instance] = nil
                return candidates
            }
            var seen = lines[instance, default: []]
            let fresh = candidates.filter { seen.insert($0).inserted }
            lines[instance] = seen
            return fresh
        }
    }
}

/// The types whose first all-for-now `browse --all` still waits for.
final class PendingTypes: Sendable {
    private let types: Mutex<Set<String>>

    init(_ types: [String]) { self.types = Mutex(Set(types)) }

    /// Marks `type` as reported; true when it was the last one awaited.
    func reported(_ type: String) -> Bool {
        types.withLock { $0.remove(type) != nil && $0.isEmpty }
    }
}

/// Prints browse events as text columns (dns-sd -B style), avahi-browse -p lines, or timestamped JSON.
struct BrowsePrinter: Sendable {
    enum Style: Sendable { case text, parseable, json }

    let style: Style
    let resolve: Bool
    /// The parseable lines already printed per instance: a `changed` event prints only what is new, as
    /// avahi-browse prints each resolved address once.
    private let printed = PrintedLines()

    init(style: Style, resolve: Bool) {
        self.style = style
        self.resolve = resolve
    }

    private static let widths = (time: 12, action: 3, interfaces: 10, domain: 8, type: 20)

    func header() {
        Output.line(Self.columns("Timestamp", "A/R", "Interfaces", "Domain", "Service Type", "Instance Name"))
    }

    func allForNow() {
        switch style {
        case .text: Output.line("\(Output.clock())  ---  all for now")
        case .json: try? Output.timedJSON(BrowseReply(event: .allForNow))
        case .parseable: break  // avahi-browse -p prints nothing for it either
        }
    }

    func print(_ event: BrowseReply) {
        guard let kind = event.event else { return }
        if kind == .allForNow { return allForNow() }
        guard let service = event.service else { return }
        switch style {
        case .json:
            try? Output.timedJSON(event)
        case .text:
            let action = kind == .added ? "Add" : kind == .removed ? "Rmv" : "Chg"
            Output.line(
                Self.columns(
                    Output.clock(), action, service.interfaces.joined(separator: ","), displayName(service.domain),
                    service.type, service.name))
            if resolve && kind != .removed, let details = ServiceText.resolvedFields(service) {
                Output.line(String(repeating: " ", count: Self.widths.time + 2) + details)
            }
        case .parseable:
            let instance = "\(service.name)\u{0}\(service.type)\u{0}\(service.domain)"
            for line in printed.new(
                Self.parseable(kind, service, resolve: resolve), for: instance, reset: kind == .removed)
            {
                Output.line(line)
            }
        }
    }

    private static func columns(
        _ time: String, _ action: String, _ interfaces: String, _ domain: String, _ type: String, _ name: String
    ) -> String {
        Output.pad(time, widths.time) + "  " + Output.pad(action, widths.action) + "  "
            + Output.pad(interfaces, widths.interfaces) + "  " + Output.pad(domain, widths.domain) + "  "
            + Output.pad(type, widths.type) + "  " + name
    }

    /// avahi-browse -p lines for one event.
    static func parseable(_ kind: BrowseEventKind, _ service: DNSSDService, resolve: Bool) -> [String] {
        let common = [
            service.interfaces.joined(separator: ","), "", escape(service.name), service.type,
            displayName(service.domain),
        ]
        func line(_ mark: String, _ protocolName: String, _ extra: [String] = []) -> String {
            var fields = common
            fields[1] = protocolName
            return ([mark] + fields + extra).joined(separator: ";")
        }
        if kind == .removed { return [line("-", "any")] }
        guard resolve, let host = service.host else { return [line("+", "any")] }
        // TXTText.display already escapes backslashes and bytes that are not UTF-8; quotes end the string here.
        let txt = TXTText.display(service).map { "\"\($0.replacingOccurrences(of: "\"", with: "\\\""))\"" }
            .joined(separator: " ")
        let port = service.port.map(String.init) ?? ""
        let addresses = service.addresses.isEmpty ? [""] : service.addresses
        var lines = kind == .added ? [line("+", "any")] : []
        for address in addresses {
            let family = address.isEmpty ? "any" : address.contains(":") ? "IPv6" : "IPv4"
            lines.append(line("=", family, [escape(host, dots: false), address, port, txt]))
        }
        return lines
    }

    /// Escapes a DNS label the way avahi-browse -p shows it: `.` and `\` with a backslash, spaces, `;` and
    /// control characters as `\DDD` (decimal); other characters, UTF-8 included, as they are.
    static func escape(_ text: String, dots: Bool = true) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x2E: out += dots ? "\\." : "."
            case 0x5C: out += "\\\\"
            case 0...0x20, 0x3B, 0x7F:
                let digits = String(scalar.value)
                out += "\\" + String(repeating: "0", count: 3 - digits.count) + digits
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
