import DiscoverClient
import Foundation
import LabSupport
import Testing

/// Runs `discover ARGS...` to completion, as root or (with `uid`) as that user through `setpriv`.
func discover(_ arguments: [String], uid: UInt32? = nil, timeout: Double = 30) throws -> CommandResult {
    let prefix = uid.map { ["/usr/bin/setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups"] } ?? []
    return try runCommand(prefix + [BuiltProducts.discover] + arguments, timeout: timeout)
}

/// The one JSON object a command printed.
func jsonObject(_ result: CommandResult, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
    return try #require(
        object, "not one JSON object: \(result.stdout) \(result.stderr)", sourceLocation: sourceLocation)
}

/// The CLI's habits without a network: socket errors, argument errors, global options.
@Suite("CLI habits")
struct CLIHabitTests {
    @Test func globalOptionsGoBeforeOrAfterTheSubcommand() throws {
        let daemon = try DaemonProcess()
        for arguments in [
            ["--json", "--socket", daemon.socketPath, "status"], ["status", "--json", "--socket", daemon.socketPath],
            ["-j", "--socket=\(daemon.socketPath)", "status"], ["--socket", daemon.socketPath, "status", "-j"],
            ["--timeout", "5", "-j", "status", "--socket", daemon.socketPath],
        ] {
            let result = try discover(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(try jsonObject(result)["version"] as? String == DiscoverdVersion.current, "\(arguments)")
        }
        // The subcommand's own options stay where they are, the global ones move.
        let call = try discover(["-j", "--socket", daemon.socketPath, "call", "io.discoverd.Daemon.Status"])
        #expect(call.status == 0, "\(call.stderr)")
        #expect(daemon.stop() == 0)
    }

    @Test func socketErrorsSayWhatTheSystemSaid() throws {
        let directory = TemporaryDirectory("clisock")
        let regular = directory.path + "/regular"
        FileManager.default.createFile(atPath: regular, contents: Data())
        let refused = directory.path + "/refused.sock"
        let listener = try boundUnixSocket(refused, listen: false)
        defer { close(listener) }
        let rootOnly = directory.path + "/root-only.sock"
        let privateListener = try boundUnixSocket(rootOnly, listen: true)
        defer { close(privateListener) }
        chmod(rootOnly, 0o600)

        let cases: [(path: String, uid: UInt32?, expected: String)] = [
            ("/nonexistent/discoverd.sock", nil, "No such file or directory"),
            (regular, nil, "is not a socket"),
            (directory.path, nil, "not a socket"),
            (refused, nil, "Connection refused"),
            (rootOnly, 65534, "Permission denied"),
        ]
        for (path, uid, expected) in cases {
            let result = try discover(["status", "--socket", path], uid: uid)
            #expect(result.status == 2, "\(path)")
            #expect(result.stderr.contains(expected), "\(path): \(result.stderr)")
            #expect(result.stderr.contains(path), "names the path: \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
            #expect(!result.stderr.contains("is it running?:"))
        }
    }

    @Test func validationErrorsShowTheSubcommandsUsageAndExitTwo() throws {
        for (arguments, usage, message) in [
            (["plan", "example.com:http"], "Usage: discover plan", "is not a number"),
            (["h3", "example.com:70000"], "Usage: discover h3", "between 1 and 65535"),
            (["https", "192.0.2.10"], "Usage: discover https", "is an IP address"),
            (["call", "io.discoverd.Daemon.Status", "{"], "Usage: discover call", "JSON object"),
            (["browse"], "Usage: discover browse", "which service type"),
            (["addresses", "-4", "-6", "example.com"], "Usage: discover addresses", "exclude each other"),
            (["--timeout", "0", "status"], "Usage: discover status", "positive number"),
        ] {
            let result = try discover(arguments + ["--socket", "/nonexistent/x"])
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains(usage), "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("discover <subcommand>"), "\(arguments): \(result.stderr)")
        }
    }

    @Test func everyCommandTeachesWithExamples() throws {
        for command in ["browse", "resolve", "advertise", "https", "svcb", "h3", "plan", "addresses", "alt-svc"] {
            let help = try discover([command, "--help"])
            #expect(help.status == 0)
            #expect(help.stdout.contains("discover \(command) "), "\(command) --help has examples: \(help.stdout)")
        }
        let browse = try discover(["browse", "--help"])
        for flag in ["-r, --resolve", "-t, --once", "-p, --parseable", "-a, --all", "-j, --json", "--timeout"] {
            #expect(browse.stdout.contains(flag), "browse --help lists \(flag)")
        }
    }

    /// A Unix stream socket bound at `path`, listening or not (connect then says ECONNREFUSED).
    private func boundUnixSocket(_ path: String, listen shouldListen: Bool) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw DaemonError("socket() failed") }
        let bound = withUnixAddress(path) { bind(fd, $0, $1) }
        guard bound == 0, !shouldListen || listen(fd, 1) == 0 else {
            close(fd)
            throw DaemonError("bind \(path): \(String(cString: strerror(errno)))")
        }
        return fd
    }
}

/// The resolver commands against the lab: Knot's lab.test zone (and the fault server where a record cannot be
/// written in a zone file).
@Suite(
    "CLI on the lab", .enabled(if: ResolverLab.shouldRun, "network lab not up (Scripts/lab up); CI=true requires it"))
struct CLILabTests {
    @Test func addressLiteralsArePlannedWithoutDNS() async throws {
        let daemon = try labDaemon()  // the fault server: it counts what reaches it
        let socket = ["--socket", daemon.socketPath]
        let faults = try ResolverLab.faults
        func literalQueries() throws -> Int {
            try faults.count("192.0.2.10", qtype: nil) + faults.count("2001:db8::10", qtype: nil)
        }
        let before = try literalQueries()

        let v4 = try discover(["plan", "192.0.2.10", "-j"] + socket)
        #expect(v4.status == 0, "\(v4.stderr)")
        let plan = try JSONDecoder().decode(ConnectionPlanReply.self, from: Data(v4.stdout.utf8))
        #expect(plan.endpoints.map { "\($0.transport) \($0.address) \($0.port)" } == ["tcp 192.0.2.10 443"])
        #expect(plan.timing.queries.isEmpty)

        let v6 = try discover(["plan", "[2001:db8::10]:8443"] + socket)
        #expect(v6.status == 0, "\(v6.stderr)")
        #expect(v6.stdout.contains("1. tcp  [2001:db8::10]:8443"), "\(v6.stdout)")
        let bare = try discover(["-j", "plan", "2001:db8::10"] + socket)
        #expect(try JSONDecoder().decode(ConnectionPlanReply.self, from: Data(bare.stdout.utf8)).port == 443)

        let h3 = try discover(["h3", "192.0.2.10:443"] + socket)
        #expect(h3.status == 1, "no evidence of h3 for an address: \(h3.stdout) \(h3.stderr)")
        #expect(try literalQueries() == before, "an address literal went to DNS")
        #expect(daemon.stop() == 0)
    }

    @Test func hostColonPortIsOneSyntaxForH3PlanAndHTTPS() async throws {
        let daemon = try labDaemon(upstream: ResolverLab.knot)
        let socket = ["--socket", daemon.socketPath]
        // _8443._https.port.lab.test says alpn=h3; the bare name says h2.
        #expect(try discover(["h3", "port.lab.test:8443"] + socket).status == 0)
        #expect(try discover(["h3", "port.lab.test"] + socket).status == 1)
        #expect(try discover(["h3", "port.lab.test", "--port", "8443"] + socket).status == 0)
        let https = try discover(["https", "-j", "port.lab.test:8443"] + socket)
        let reply = try JSONDecoder().decode(ResolveHTTPSReply.self, from: Data(https.stdout.utf8))
        #expect(reply.queryName == "_8443._https.port.lab.test.")
        let plan = try discover(["plan", "-j", "port.lab.test:8443"] + socket)
        #expect(try JSONDecoder().decode(ConnectionPlanReply.self, from: Data(plan.stdout.utf8)).port == 8443)
        let nx = try discover(["h3", "nx.lab.test"] + socket)
        #expect(nx.status == 1, "no such name is a negative answer")
        #expect(nx.stderr == "discover: nx.lab.test: no such name (NXDOMAIN)\n")
        #expect(daemon.stop() == 0)
    }

    @Test func addressesCommand() async throws {
        let daemon = try labDaemon(upstream: ResolverLab.knot)
        let socket = ["--socket", daemon.socketPath]
        let all = try discover(["addresses", "multi.lab.test"] + socket)
        #expect(all.status == 0, "\(all.stderr)")
        let lines = all.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("multi.lab.test: 2001:db8::2") == true, "\(all.stdout)")
        #expect(
            Set(lines.prefix(4).map { $0.split(separator: " ").last.map(String.init) ?? "" })
                == ["2001:db8::26", "2001:db8::27", "192.0.2.26", "192.0.2.27"])
        #expect(lines.last?.hasPrefix("-- source=") == true)

        let v4 = try discover(["addresses", "-4", "-j", "multi.lab.test"] + socket)
        let reply = try JSONDecoder().decode(ResolveAddressesReply.self, from: Data(v4.stdout.utf8))
        #expect(Set(reply.addresses) == ["192.0.2.26", "192.0.2.27"])
        let v6 = try discover(["-j", "addresses", "-6", "multi.lab.test"] + socket)
        #expect(
            Set(try JSONDecoder().decode(ResolveAddressesReply.self, from: Data(v6.stdout.utf8)).addresses)
                == ["2001:db8::26", "2001:db8::27"])

        let none = try discover(["addresses", "-4", "v6only.lab.test"] + socket)
        #expect(none.status == 1)
        #expect(none.stdout == "v6only.lab.test: no IPv4 addresses\n")
        #expect(try discover(["addresses", "nx.lab.test"] + socket).status == 1)
        let literal = try discover(["addresses", "192.0.2.10"] + socket)
        #expect(literal.status == 2)
        #expect(literal.stderr.contains("already an address"))
        #expect(daemon.stop() == 0)
    }

    @Test func svcbCommandPrintsTheProcessedBindingsOfAnSVCBName() async throws {
        let daemon = try labDaemon(upstream: ResolverLab.knot)
        let socket = ["--socket", daemon.socketPath]
        let text = try discover(["svcb", "_dns.svcb.lab.test"] + socket)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.hasPrefix("_dns.svcb.lab.test  SVCB  "), "\(text.stdout)")
        #expect(text.stdout.contains("  1 svcb.lab.test alpn=h2 dohpath=/dns-query{?dns}\n"), "\(text.stdout)")

        let json = try discover(["svcb", "-j", "svcb.lab.test"] + socket)
        let reply = try JSONDecoder().decode(ResolveHTTPSReply.self, from: Data(json.stdout.utf8))
        #expect(reply.records.map(\.alpn) == [["h2"]])
        #expect(reply.timing.queries.map(\.type) == ["SVCB"])
        // With a port, the query name gets the _PORT prefix (which has no records here).
        let port = try discover(["svcb", "-j", "_dns.svcb.lab.test:853"] + socket)
        #expect(port.status == 0, "\(port.stderr)")
        let prefixed = try JSONDecoder().decode(ResolveHTTPSReply.self, from: Data(port.stdout.utf8))
        #expect(prefixed.queryName == "_853._dns.svcb.lab.test.")
        #expect(prefixed.records.isEmpty)
        // The method is in the IDL the daemon serves.
        let idl = try discover(
            ["call", "org.varlink.service.GetInterfaceDescription", #"{"interface":"io.discoverd.Resolver"}"#] + socket)
        #expect(idl.stdout.contains("method ResolveSVCB(name: string, port: ?int, optimistic: ?bool)"))
        #expect(daemon.stop() == 0)
    }

    @Test func httpsShowsEveryKeyAndWhyRecordsWereSetAside() async throws {
        let daemon = try labDaemon()  // through the fault server, which relays Knot
        let socket = ["--socket", daemon.socketPath]
        func https(_ name: String) throws -> (text: String, json: ResolveHTTPSReply) {
            let text = try discover(["https", name] + socket)
            #expect(text.status == 0, "\(name): \(text.stderr)")
            let json = try discover(["https", "--json", name] + socket)
            return (text.stdout, try JSONDecoder().decode(ResolveHTTPSReply.self, from: Data(json.stdout.utf8)))
        }

        let unknown = try https("unknownkey.lab.test")
        #expect(unknown.text.contains("  1 unknownkey.lab.test alpn=h3 key667=\"hello\"\n"), "\(unknown.text)")
        #expect(unknown.json.records.first?.unknown == [UnknownSvcParam(key: 667, value: "aGVsbG8=")])

        let echConfig =
            "AEX+DQBBpAAgACCd0YV1Vvw6sQ0aX2h0a2sX3k5zJ1gQ1cTzq/8zL0bCHwAEAAEAAQASY2xvdWRmbGFyZS1lY2guY29tAAA="
        let ech = try https("ech.lab.test")
        #expect(ech.text.contains("alpn=h3,h2 ech=\(echConfig)\n"), "\(ech.text)")
        #expect(ech.json.records.first?.ech == echConfig)

        let mandatory = try https("mandatoryunknown.lab.test")
        #expect(mandatory.text.contains("(no usable HTTPS records)"), "\(mandatory.text)")
        #expect(mandatory.text.contains("why: record 1 . ignored: mandatory key key999 is not supported"))
        #expect(mandatory.json.note?.contains("key999") == true)
        #expect(mandatory.json.records.isEmpty)

        let loop = try https("aliasloop1.lab.test")
        #expect(loop.text.contains("why: alias chain loop"), "\(loop.text)")
        #expect(loop.json.note?.contains("loop") == true)

        // A malformed record (an SvcParam running past the end) rejects the whole set (RFC 9460 §2.2).
        let faults = try ResolverLab.faults
        let name = ResolverLab.uniqueName("malformed")
        try faults.raw(
            name, [SVCBWire.h3, SVCBWire.rdata(params: [.alpn(["h3"])], trailing: [0, 4, 0, 9, 1])], ttl: 60)
        defer { faults.clear(name) }
        let malformed = try https(name)
        #expect(malformed.text.contains("why: malformed HTTPS RRset ignored (RFC 9460 §2.2)"), "\(malformed.text)")
        #expect(malformed.json.note?.contains("malformed") == true)
        #expect(daemon.stop() == 0)
    }

    @Test func dnsFailuresNameTheNameAndTheServer() async throws {
        let daemon = try labDaemon(config: "[resolver]\ntimeout-ms = 300\nattempts = 1\n")
        let faults = try ResolverLab.faults
        let failing = ResolverLab.uniqueName("servfail")
        try faults.set(failing, "servfail", qtype: nil)
        defer { faults.clear(failing, qtype: nil) }
        let servfail = try discover(["addresses", failing, "--socket", daemon.socketPath])
        #expect(servfail.status == 2)
        #expect(servfail.stderr == "discover: \(failing): the DNS server \(ResolverLab.fault):53 answered SERVFAIL\n")

        let silent = ResolverLab.uniqueName("drop")
        try faults.set(silent, "drop", qtype: nil)
        defer { faults.clear(silent, qtype: nil) }
        let timeout = try discover(["addresses", silent, "--socket", daemon.socketPath])
        #expect(timeout.status == 2)
        #expect(timeout.stderr == "discover: \(silent): no answer from \(ResolverLab.fault):53 in time\n")
        for result in [servfail, timeout] { #expect(!result.stderr.contains("io.discoverd")) }
        #expect(daemon.stop() == 0)
    }

    @Test func aClosedUpstreamPortIsNamedNotCalledSlow() async throws {
        // Nothing listens on port 9 of the fault host: its ICMP port unreachable ends the try at once, and the
        // error says so instead of "in time" (the try's 5 s never ran out).
        let daemon = try labDaemon(
            upstream: "\(ResolverLab.fault):9", config: "[resolver]\ntimeout-ms = 5000\nattempts = 1\n")
        let name = ResolverLab.uniqueName("closed")
        let started = Date()
        let refused = try discover(["addresses", name, "--socket", daemon.socketPath])
        #expect(Date().timeIntervalSince(started) < 4.5, "the try waited for its timeout")
        #expect(refused.status == 2)
        #expect(
            refused.stderr
                == "discover: \(name): no answer from \(ResolverLab.fault):9 (\(ResolverLab.fault):9: receive: Connection "
                + "refused)\n")
        #expect(daemon.stop() == 0)
    }

    @Test func altSvcEvidenceBelongsToTheUserWhoReportedIt() async throws {
        let daemon = try labDaemon(upstream: ResolverLab.knot)
        let socket = ["--socket", daemon.socketPath]
        let (alice, bob): (UInt32, UInt32) = (65534, 65533)

        // A user's report: recorded for that user's own plans only.
        let report = try discover(["alt-svc", "https://h2only.lab.test", #"h3=":443"; ma=600"#] + socket, uid: alice)
        #expect(report.status == 0, "\(report.stderr)")
        #expect(report.stdout == "recorded for your own plans (uid \(alice)): h3=\":443\"; ma=600\n")
        #expect(try discover(["h3", "h2only.lab.test"] + socket, uid: alice).status == 0)
        #expect(try discover(["h3", "h2only.lab.test"] + socket, uid: bob).status == 1)
        #expect(try discover(["h3", "h2only.lab.test"] + socket).status == 1, "root does not take a user's word")

        // Root's report counts for everyone; a user's clear does not undo it.
        let rootReport = try discover(["-j", "alt-svc", "https://plain.lab.test", #"h3=":443""#] + socket)
        let object = try jsonObject(rootReport)
        #expect(object["scope"] as? String == "everyone")
        #expect(rootReport.stdout.contains(#""recorded":true"#), "a JSON boolean: \(rootReport.stdout)")
        for uid in [alice, bob] {
            #expect(try discover(["h3", "plain.lab.test"] + socket, uid: uid).status == 0)
        }
        #expect(try discover(["alt-svc", "https://plain.lab.test", "clear"] + socket, uid: bob).status == 0)
        #expect(try discover(["h3", "plain.lab.test"] + socket, uid: bob).status == 0)

        // What a plan cannot use is reported as ignored, with the reason, and changes nothing.
        let draft = try discover(["--json", "alt-svc", "https://h2only.lab.test", #"h3-29=":443""#] + socket)
        #expect(draft.status == 1)
        #expect(draft.stdout.contains(#""recorded":false"#))
        let ignored = try #require((try jsonObject(draft))["ignored"] as? [[String: Any]])
        #expect(ignored.first?["alternative"] as? String == #"h3-29=":443""#)
        #expect((ignored.first?["reason"] as? String)?.contains("draft") == true)
        let text = try discover(["alt-svc", "https://h2only.lab.test", #"h2="other.lab.test:443""#] + socket)
        #expect(text.stdout.hasPrefix(#"ignored h2="other.lab.test:443": h2 is not HTTP/3"#), "\(text.stdout)")
        #expect(try discover(["h3", "h2only.lab.test"] + socket).status == 1)
        #expect(daemon.stop() == 0)
    }
}

/// The DNS-SD commands against peers on lab host b.
@Suite(
    "CLI browse and advertise on the lab",
    .enabled(if: DiscoveryLab.shouldRun, "network lab not up (Scripts/lab up); CI=true requires it"))
struct CLIDiscoveryLabTests {
    @Test func browsePrintsAHeaderTheNameLastAndStopsQuietlyOnCtrlC() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        let fixture = try await DiscoveryLabTests.Fixture()
        let daemon = fixture.daemon
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Game of Bob")
        let peer = try await LabPeer.avahiPublish(name, type, port: 4242, txt: ["version=2"])

        let browse = try BackgroundCommand([
            BuiltProducts.discover, "browse", "-r", type, "--socket", daemon.socketPath,
        ])
        let added = await browse.line { $0.contains(" Add ") && $0.hasSuffix(name) }
        #expect(added != nil, "an Add line ending with the instance name: \(browse.stdout) \(browse.stderr)")
        #expect(browse.lines.dropFirst().first?.hasPrefix("Timestamp     A/R  Interfaces") == true, "\(browse.stdout)")
        #expect(browse.lines.first == "Browsing for \(type) (until Ctrl-C)")
        let details = await browse.line { $0.hasPrefix("              ") && $0.contains(":4242") }
        #expect(details?.contains("version=2") == true, "resolved details under the event: \(browse.stdout)")

        kill(browse.process.pid, SIGINT)
        #expect(await browse.waitForExit() == 0, "Ctrl-C ends browse with status 0")
        #expect(browse.stderr.isEmpty, "nothing on stderr: \(browse.stderr)")

        // -t: the same, ending by itself at all-for-now; JSON events carry a timestamp.
        let once = try discover(["browse", "-t", "-j", type, "--socket", daemon.socketPath])
        #expect(once.status == 0, "\(once.stderr)")
        let events = once.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(events.last?["event"] as? String == "allForNow")
        #expect(events.contains { ($0["service"] as? [String: Any])?["name"] as? String == name })
        #expect(events.allSatisfy { ($0["timestamp"] as? String)?.hasSuffix("Z") == true }, "\(once.stdout)")

        // -p: avahi-browse's parseable lines.
        let parseable = try discover(["browse", "-ptr", type, "--socket", daemon.socketPath])
        let escaped = name.replacingOccurrences(of: " ", with: "\\032")
        #expect(parseable.stdout.contains(";any;\(escaped);\(type);local\n"), "\(parseable.stdout)")
        let resolved = parseable.stdout.split(separator: "\n").first { $0.hasPrefix("=;") && $0.contains(";IPv4;") }
        let fields = resolved.map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) } ?? []
        #expect(fields.count == 10, "\(parseable.stdout)")
        #expect(fields.count == 10 && fields[3] == escaped && fields[8] == "4242" && fields[9] == "\"version=2\"")

        // -a -t: every type, this one among them.
        let all = try discover(["browse", "-a", "-t", "--socket", daemon.socketPath], timeout: 60)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("  \(type)  ") && all.stdout.contains(name), "\(all.stdout)")
        #expect(all.stdout.hasSuffix("all for now\n"), "\(all.stdout)")

        await peer.stop()
        await fixture.stop()
    }

    @Test func ctrlCOnAdvertiseWithdrawsAndExitsZero() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        let fixture = try await DiscoveryLabTests.Fixture()
        let daemon = fixture.daemon
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Interrupted")
        let advertise = try BackgroundCommand([
            BuiltProducts.discover, "--socket", daemon.socketPath, "advertise", name, type, "2004",
        ])
        #expect(await advertise.line { $0.hasPrefix("registered") } != nil, "\(advertise.stderr)")
        await DiscoveryLab.expectOnB(type, "b sees the advertisement") { $0.map(\.name).contains(name) }
        kill(advertise.process.pid, SIGINT)
        #expect(await advertise.waitForExit() == 0)
        #expect(advertise.stderr.isEmpty, "\(advertise.stderr)")
        await DiscoveryLab.expectOnB(type, "withdrawn after Ctrl-C") { !$0.map(\.name).contains(name) }
        await fixture.stop()
    }

    @Test func resolveSaysWhatItWaitsForAndHonoursTimeout() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        let fixture = try await DiscoveryLabTests.Fixture()
        let daemon = fixture.daemon
        let type = DiscoveryLab.uniqueType()
        let (result, ms) = try await measure {
            try discover(["resolve", "--timeout", "1", "Nobody Here", type, "--socket", daemon.socketPath])
        }
        #expect(result.status == 1, "not found is a negative answer: \(result.stderr)")
        #expect(
            result.stderr.hasPrefix("Resolving \"Nobody Here\" \(type) in local (up to 1 s)...\n"), "\(result.stderr)")
        #expect(result.stderr.contains("not found (no answer within 1 s)"))
        #expect(ms < 4000, "--timeout 1 took \(ms) ms")
        await fixture.stop()
    }
}
