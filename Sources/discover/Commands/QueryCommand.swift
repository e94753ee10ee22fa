import ArgumentParser
import DNSCore
import Foundation
import Logging
import Resolver

/// Asks one upstream directly, without the daemon: checks a DoT or DoH server by hand, like `kdig +tls`.
struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Ask one upstream server directly (plain, DoT or DoH), without the daemon, like kdig +tls.",
        discussion: """
            The upstream is written as in discoverd.conf. The certificate of a DoT or DoH server is verified \
            against the system trust store (or --ca-file); a failure is reported, nothing is sent in clear text. \
            A DoH URL without #ADDR is reached at the address the system resolver gives for its host, as curl \
            and kdig do (the daemon itself never asks the system resolver: it takes #ADDR or a bootstrap line). \
            Exit status 0 for NOERROR and NXDOMAIN, 1 otherwise, 2 when a DoH host has no address.

            Examples:
              discover query example.com --upstream '9.9.9.9#dns.quad9.net'
              discover query example.com AAAA --upstream https://dns.example/dns-query#192.0.2.53
              discover query example.com --upstream https://dns.example/dns-query#192.0.2.53 --https-get
              discover query lab.test SOA --upstream tls://192.0.2.63 --ca-file /tmp/discoverd-lab/ca/ca.pem
              discover query example.com AAAA --upstream 9.9.9.9#dns.quad9.net --short
              discover query @9.9.9.9#dns.quad9.net example.com AAAA
              discover query @tls://192.168.1.1 example.com --pin-sha256 BASE64

            A server's key pin, for --pin-sha256 and for pin-sha256= in discoverd.conf, is in the output's \
            "server key" line, or in the reason a certificate no trusted CA signed is refused with (check it \
            on the server before you pin it).
            """)

    @Argument(help: "The name to ask for.")
    var name: String

    @Argument(help: "Record type: A, AAAA, HTTPS, SVCB, SOA, TXT... or a number (default A).")
    var type: String?

    @Argument(
        help: ArgumentHelp(
            "The upstream as dig and kdig take a server, in place of --upstream; before or after the name.",
            valueName: "@upstream"))
    var at: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "ADDR[:PORT], ADDR[:PORT]#NAME, tls://ADDR[:PORT][#NAME] or https://HOST[:PORT]/PATH#ADDR (PATH may be "
                + "a URI template: /dns-query{?dns})."))
    var upstream: String?

    @Option(name: .long, help: "Trusted roots (PEM) instead of the system trust store.")
    var caFile: String?

    @Option(
        name: .customLong("pin-sha256"),
        help: ArgumentHelp(
            "Authenticate a DoT or DoH server by its key instead of a CA (like kdig +tls-pin): base64 SHA-256 of its "
                + "SubjectPublicKeyInfo; repeat for several.",
            valueName: "base64"))
    var pins: [String] = []

    @Flag(name: .long, help: "DoH with GET (RFC 8484 §4.1, like kdig +https-get) instead of POST.")
    var httpsGet = false

    @Flag(name: .long, help: "Set the DO bit (RFC 3225), like kdig +dnssec: a signing server adds its RRSIGs.")
    var dnssec = false

    @Option(name: .long, help: "Seconds to wait (default 3).")
    var timeout: Double = 3

    @Flag(name: .shortAndLong, help: "JSON output.")
    var json = false

    @Flag(
        name: .long,
        help: "Only the answer's data, a record per line, like dig +short (nothing for NXDOMAIN); errors on stderr.")
    var short = false

    /// The name, the type and the upstream, wherever the words put them: `@UPSTREAM` may come first, as in
    /// `dig @server name type`, or last; the other words are the name and the type.
    private func words() throws -> (name: String, type: String, upstream: String) {
        let positional = [name, type, at].compactMap { $0 }
        let marked = positional.filter { $0.hasPrefix("@") }
        let rest = positional.filter { !$0.hasPrefix("@") }
        guard marked.count <= 1 else { throw ValidationError("one @UPSTREAM at most, got \(marked.count)") }
        guard let name = rest.first, rest.count <= 2 else {
            throw ValidationError("expected NAME [TYPE] and the upstream, got \(positional.joined(separator: " "))")
        }
        let server: String
        switch (marked.first, upstream) {
        case (let word?, nil): server = String(word.dropFirst())
        case (nil, let option?): server = option
        case (_?, _?): throw ValidationError("give the upstream once: @UPSTREAM or --upstream, not both")
        case (nil, nil): throw ValidationError("which upstream? --upstream ADDR or @ADDR, as in dig @9.9.9.9")
        }
        // --pin-sha256 is the upstream's pin-sha256= option, so that both are read (and refused) alike.
        let pinned = ([server] + pins.map { "pin-sha256=\($0)" }).joined(separator: " ")
        return (name, rest.count == 2 ? rest[1] : "A", pinned)
    }

    /// Here rather than in `run`, so that a bad value is shown with this command's usage, not the tool's.
    func validate() throws {
        if short && json { throw ValidationError("--short and --json do not go together: pick one") }
        let (_, type, upstream) = try words()
        do { _ = try UpstreamServer(parsing: upstream) } catch { throw ValidationError(error.description) }
        guard Self.type(type) != nil else { throw ValidationError("unknown record type '\(type)'") }
    }

    func run() async throws {
        let (name, type, upstream) = try words()
        var server: UpstreamServer
        do { server = try UpstreamServer(parsing: upstream) } catch { throw ValidationError(error.description) }
        var bootstrapped: String?
        if server.transport == .https, server.host.isEmpty, let host = server.tlsName {
            guard let address = Self.systemAddress(of: host) else { throw ExitCode(2) }
            server.host = address
            bootstrapped = address
        }
        guard let rrType = Self.type(type) else { throw ValidationError("unknown record type '\(type)'") }
        let milliseconds = Int(max(0.1, timeout) * 1000)
        let client = UpstreamClient(
            upstreams: [server],
            configuration: .init(
                timeout: .milliseconds(milliseconds), attempts: 1, tcpTimeout: .milliseconds(milliseconds),
                encryption: .opportunistic, caFile: caFile, dohGET: httpsGet),
            logger: Self.quietLogger)
        let started = ContinuousClock.now
        let result: Result<DNSExchange, DNSTransportError>
        do {
            let question = DNSQuestion(name: name, type: rrType, class: .in)
            result = .success(try await client.query(question, dnssecOK: dnssec))
        } catch {
            result = .failure(error)
        }
        let elapsed = ContinuousClock.now - started
        let status = client.upstreamStatus.first
        var report = Report(
            server: server.description, address: bootstrapped, tls: status?.tlsVersion, verified: status?.verifiedName,
            keyPin: status?.keyPin, keyPinned: status?.keyPinned,
            ms: (elapsed / .microseconds(100)).rounded() / 10)
        switch result {
        case .success(let exchange):
            let message = exchange.message
            let flags = Self.flags(message.header)
            if json {
                report.rcode = "\(message.rcode)"
                report.flags = flags
                report.question = message.questions.map(Report.Question.init)
                report.answer = message.answer.map(Report.Record.init)
                report.authority = message.authority.map(Report.Record.init)
                report.additional = message.additional.map(Report.Record.init)
                report.edns = message.edns.map(Report.EDNS.init)
                try Output.json(report)
            } else if short {
                for record in message.answer { Output.line(record.presentationData()) }
                if message.rcode != .noError && message.rcode != .nxDomain {
                    Output.error("discover: \(server) answered \(message.rcodeAndReasons)")
                }
            } else {
                let tls = report.tls.map {
                    " " + StatusCommand.tls($0, verifiedName: report.verified, keyPin: report.keyPin,
                        pinned: report.keyPinned == true)
                }
                Output.line(";; \(server) \(status?.transport ?? "")\(tls ?? "")")
                // What pin-sha256= takes, as kdig -d prints a server's "SHA-256 PIN".
                if let pin = report.keyPin, report.keyPinned != true { Output.line(";; server key: pin-sha256=\(pin)") }
                if let bootstrapped { Output.line(";; \(server.tlsName ?? "") is \(bootstrapped) (system resolver)") }
                if let note = Self.note(status, server) { Output.line(";; \(note)") }
                Output.line(
                    ";; status: \(message.rcode), flags: \(flags.joined(separator: " ")), "
                        + String(format: "%.1f ms", report.ms))
                // The header's counts, as dig gives them: ADDITIONAL counts the OPT record.
                Output.line(
                    ";; QUERY: \(message.questions.count), ANSWER: \(message.answer.count), "
                        + "AUTHORITY: \(message.authority.count), "
                        + "ADDITIONAL: \(message.additional.count + (message.edns == nil ? 0 : 1))")
                if let edns = message.edns {
                    // dig's OPT pseudosection: the server's EDNS and its Extended DNS Errors (RFC 8914).
                    Output.line("\n;; OPT PSEUDOSECTION:")
                    let flags = edns.dnssecOK ? " do" : ""
                    Output.line("; EDNS: version: \(edns.version), flags:\(flags); udp: \(edns.udpPayloadSize)")
                    // kdig's words for the reply's padding (RFC 7830): a server that pads over TLS shows it.
                    if let padding = edns.padding { Output.line("; PADDING: \(padding) B") }
                    for ede in edns.extendedErrors { Output.line("; EDE: \(ede)") }
                }
                if !message.questions.isEmpty {
                    Output.line("\n;; QUESTION SECTION:")
                    for question in message.questions {
                        Output.line(";\(question.name)\t\t\(question.class)\t\(question.type)")
                    }
                }
                // dig's layout, one tab between fields, so that what reads dig's output reads this.
                let sections = [
                    ("ANSWER", message.answer), ("AUTHORITY", message.authority), ("ADDITIONAL", message.additional),
                ]
                for (title, records) in sections where !records.isEmpty {
                    Output.line("\n;; \(title) SECTION:")
                    for record in records {
                        let data = record.presentationData(comments: true)
                        Output.line("\(record.name)\t\(record.ttl)\t\(record.class)\t\(record.type)\t\(data)")
                    }
                }
            }
            if message.rcode != .noError && message.rcode != .nxDomain { throw ExitCode(1) }
        case .failure(let error):
            report.error = error.message
            // The message names the upstream already when it is about one.
            let subject = error.message.hasPrefix(server.description) ? "" : "\(server): "
            if json {
                try Output.json(report)
            } else if short {
                Output.error("discover: \(subject)\(error.message)")
            } else {
                if let note = Self.note(status, server) { Output.line(";; \(note)") }
                Output.line(";; \(subject)\(error.code.rawValue): \(error.message)")
            }
            throw ExitCode(1)
        }
    }

    /// `--json`'s object; what is unknown (no TLS, no reply) is left out.
    struct Report: Encodable {
        var server: String
        var address: String?
        var tls: String?
        var verified: String?
        /// The pin of the server's key, and whether a --pin-sha256 authenticated it.
        var keyPin: String?
        var keyPinned: Bool?
        var ms: Double
        var rcode: String?
        var flags: [String]?
        var question: [Question]?
        var answer: [Record]?
        var authority: [Record]?
        var additional: [Record]?
        var edns: EDNS?
        var error: String?

        /// The reply's OPT record: its EDNS version, UDP size, flags, Extended DNS Errors and padding length.
        struct EDNS: Encodable {
            var version: UInt8
            var udp: UInt16
            var flags: [String]
            var ede: [ExtendedError]
            var padding: Int?

            /// One Extended DNS Error: its code, the code's IANA name when known, and the server's text.
            struct ExtendedError: Encodable {
                var code: UInt16
                var name: String?
                var text: String
            }

            init(_ edns: EDNSInfo) {
                self.version = edns.version
                self.udp = edns.udpPayloadSize
                self.flags = edns.dnssecOK ? ["do"] : []
                self.ede = edns.extendedErrors.map { ExtendedError(code: $0.code, name: $0.name, text: $0.text) }
                self.padding = edns.padding
            }
        }

        /// The question the reply echoes.
        struct Question: Encodable {
            var name: String
            var `class`: String
            var type: String

            init(_ question: DNSQuestion) {
                self.name = question.name
                self.class = "\(question.class)"
                self.type = "\(question.type)"
            }
        }

        /// A record with its RDATA in presentation format without comments, as a zone file has it.
        struct Record: Encodable {
            var name: String
            var ttl: UInt32
            var `class`: String
            var type: String
            var data: String

            init(_ record: ResourceRecord) {
                self.name = record.name
                self.ttl = record.ttl
                self.class = "\(record.class)"
                self.type = "\(record.type)"
                self.data = record.presentationData()
            }
        }
    }

    /// The status note worth printing: none for a plain upstream, which is plain because the user wrote it so
    /// (the library's "clear text: ddr = no" is for the daemon's status, where DDR could have found a way).
    private static func note(_ status: UpstreamStatus?, _ server: UpstreamServer) -> String? {
        server.transport == .plain ? nil : status?.note
    }

    /// The first address the system resolver (getaddrinfo) gives for `host`, for a DoH URL without #ADDR; nil
    /// after saying on stderr why there is none.
    private static func systemAddress(of host: String) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, "443", &hints, &list)
        defer { if let list { freeaddrinfo(list) } }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard code == 0, let first = list, let address = first.pointee.ai_addr,
            getnameinfo(address, first.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0
        else {
            let reason = code == 0 ? "no address" : String(cString: gai_strerror(code))
            Output.error("discover: cannot find an address for \(host) (\(reason)): add #ADDR to the URL")
            return nil
        }
        return String(cString: text)
    }

    /// The reasons are printed with the result; the library's own log lines would repeat them.
    private static var quietLogger: Logger {
        var logger = Logger(label: "discover.query")
        logger.logLevel = .critical
        return logger
    }

    private static func type(_ text: String) -> RRType? {
        let upper = text.uppercased()
        if let number = UInt16(upper) { return RRType(number) }
        if upper.hasPrefix("TYPE"), let number = UInt16(upper.dropFirst(4)) { return RRType(number) }
        for raw in UInt16(1)...UInt16(300) where RRType(raw).description == upper { return RRType(raw) }
        return nil
    }

    /// The header's flags as dig and kdig name them, in their order.
    private static func flags(_ header: DNSHeader) -> [String] {
        [
            ("qr", header.qr), ("aa", header.aa), ("tc", header.tc), ("rd", header.rd), ("ra", header.ra),
            ("ad", header.ad), ("cd", header.cd),
        ].filter(\.1).map(\.0)
    }
}
