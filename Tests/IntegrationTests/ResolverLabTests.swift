import DiscoverAPI
import DiscoverClient
import Foundation
import LabSupport
import Testing

/// The resolver of the real daemon binary against real DNS servers in the network lab: Knot serving `lab.test`
/// (RFC 9460 behaviour, compared with `kdig`), the fault server (timeouts, bad rcodes, truncation, garbage,
/// malformed SvcParams) and optimistic DNS (RFC 8767). The daemon runs in namespace dlab-a; the tests talk to its
/// socket from the root namespace. Every test starts its own daemon and uses names of its own on the fault
/// server, so the tests run in parallel.
@Suite("Resolver on the lab", .enabled(if: ResolverLab.shouldRun, "network lab not up (Scripts/lab up); CI=true requires it"))
struct ResolverLabTests {}

/// A ServiceBinding reduced to what both `kdig` and the daemon print, to compare the two.
struct BindingSummary: Equatable, CustomStringConvertible {
    var priority: Int
    var target: String
    var alpn: [String] = []
    var port: Int?
    var noDefaultAlpn = false
    var ipv4hint: [String] = []
    var ipv6hint: [String] = []
    var ech: String?
    var mandatory: [String] = []
    var dohpath: String?
    var unknown: [UnknownSvcParam] = []

    init(_ binding: DiscoverAPI.ServiceBinding) {
        priority = binding.priority
        target = binding.target
        alpn = binding.alpn
        port = binding.port
        noDefaultAlpn = binding.noDefaultAlpn
        ipv4hint = binding.ipv4hint
        ipv6hint = binding.ipv6hint
        ech = binding.ech
        mandatory = binding.mandatory
        dohpath = binding.dohpath
        unknown = binding.unknown
    }

    /// Parses one `kdig +short` HTTPS line (`1 . alpn=h3,h2 port=8443 key667="hello"`) owned by `owner`.
    init?(kdig line: String, owner: String) {
        let fields = line.split(separator: " ").map(String.init)
        guard fields.count >= 2, let priority = Int(fields[0]) else { return nil }
        self.priority = priority
        target = fields[1] == "." ? owner : fields[1]
        for field in fields.dropFirst(2) {
            let parts = field.split(separator: "=", maxSplits: 1).map(String.init)
            var value = parts.count > 1 ? parts[1] : ""
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            switch parts[0] {
            case "alpn": alpn = value.split(separator: ",").map(String.init)
            case "port": port = Int(value)
            case "no-default-alpn": noDefaultAlpn = true
            case "ipv4hint": ipv4hint = value.split(separator: ",").map(String.init)
            case "ipv6hint": ipv6hint = value.split(separator: ",").map(String.init)
            case "ech": ech = value
            case "mandatory": mandatory = value.split(separator: ",").map(String.init)
            case "key7": dohpath = value
            case let key where key.hasPrefix("key"):
                unknown.append(UnknownSvcParam(key: Int(key.dropFirst(3)) ?? -1, value: Data(value.utf8).base64EncodedString()))
            default: return nil
            }
        }
    }

    var description: String {
        "\(priority) \(target) alpn=\(alpn) port=\(port.map(String.init) ?? "-") ech=\(ech != nil) unknown=\(unknown)"
    }
}

/// The ServiceMode bindings `kdig @Knot` sees at `name`, sorted by priority (Knot sends RRsets in canonical order).
func kdigBindings(_ name: String) throws -> [BindingSummary] {
    let owner = name.hasSuffix(".") ? name : name + "."
    return try ResolverLab.kdig(name, "HTTPS").compactMap { BindingSummary(kdig: $0, owner: owner) }
        .filter { $0.priority > 0 }.sorted { $0.priority < $1.priority }
}

extension ResolverLabTests {
    /// RFC 9460 client processing against Knot (upstream 192.0.2.53, no fault server in between).
    @Suite("RFC 9460 against Knot", .enabled(if: ResolverLab.shouldRun, "network lab not up (Scripts/lab up)"))
    struct RFC9460 {
        @Test func h3VersusH2OnlyVersusPlain() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)

            let h3 = try await client.resolveHTTPS("h3.lab.test")
            #expect(h3.name == "h3.lab.test.")
            #expect(h3.queryName == "h3.lab.test.")
            #expect(h3.h3)
            #expect(h3.source == .network)
            #expect(h3.aliasChain.isEmpty)
            #expect(h3.records.map(\.alpn) == [["h3", "h2"]])
            #expect(h3.records.map(\.target) == ["h3.lab.test."])
            #expect(h3.ttl > 0 && h3.ttl <= 300)
            #expect(h3.timing.queries.contains { $0.type == "HTTPS" && $0.server.hasPrefix(ResolverLab.knot) && $0.rcode == "NOERROR" },
                    "\(h3.timing.queries)")
            #expect(try kdigBindings("h3.lab.test") == h3.records.map(BindingSummary.init))

            let cached = try await client.resolveHTTPS("h3.lab.test")
            #expect(cached.source == .cache)
            #expect(cached.timing.queries.isEmpty)
            #expect(cached.records == h3.records)

            let h2 = try await client.resolveHTTPS("h2only.lab.test")
            #expect(!h2.h3)
            #expect(h2.records.map(\.alpn) == [["h2"]])
            #expect(try kdigBindings("h2only.lab.test") == h2.records.map(BindingSummary.init))

            // NODATA: no records, no h3, and no error.
            let plain = try await client.resolveHTTPS("plain.lab.test")
            #expect(plain.records.isEmpty)
            #expect(!plain.h3)
            #expect(plain.source == .network)
            #expect(try ResolverLab.kdig("plain.lab.test", "HTTPS").isEmpty)
            #expect(daemon.stop() == 0)
        }

        @Test func aliasModeChains() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let h3Records = try await client.resolveHTTPS("h3.lab.test").records

            let alias = try await client.resolveHTTPS("alias.lab.test")
            #expect(alias.name == "alias.lab.test.")
            #expect(alias.aliasChain == ["h3.lab.test."])
            #expect(alias.records == h3Records)
            #expect(alias.h3)

            let alias2 = try await client.resolveHTTPS("alias2.lab.test")
            #expect(alias2.aliasChain == ["alias.lab.test.", "h3.lab.test."])
            #expect(alias2.records == h3Records)
            #expect(alias2.h3)

            // RFC 9460 §2.4.2: AliasMode wins over ServiceMode in the same RRset (aliasmixed also has alpn=h2).
            let mixed = try await client.resolveHTTPS("aliasmixed.lab.test")
            #expect(try ResolverLab.kdig("aliasmixed.lab.test", "HTTPS").count == 2)
            #expect(mixed.aliasChain == ["h3.lab.test."])
            #expect(mixed.records == h3Records)

            // A dangling alias target only means "no HTTPS records", not NXDOMAIN for the asked name.
            let dangling = try await client.resolveHTTPS("aliasnx.lab.test")
            #expect(dangling.aliasChain == ["nx.lab.test."])
            #expect(dangling.records.isEmpty)
            #expect(!dangling.h3)
            #expect(daemon.stop() == 0)
        }

        @Test func aliasLoopIsBounded() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let (loop, ms) = try await measure { try await client.resolveHTTPS("aliasloop1.lab.test") }
            #expect(loop.records.isEmpty)
            #expect(!loop.h3)
            #expect(loop.aliasChain.count <= 9)
            #expect(loop.aliasChain.first == "aliasloop2.lab.test.")
            #expect(ms < 5000)
            // The loop from the other side, answered from cache, is just as bounded.
            let other = try await client.resolveHTTPS("aliasloop2.lab.test")
            #expect(other.records.isEmpty)
            #expect(try await client.status().cache.entries >= 2)
            #expect(daemon.stop() == 0)
        }

        @Test func cnamesAreChased() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let cname = try await client.resolveHTTPS("cname.lab.test")
            #expect(cname.name == "cname.lab.test.")
            #expect(cname.aliasChain == ["h3.lab.test."])
            #expect(cname.records.map(\.alpn) == [["h3", "h2"]])
            #expect(cname.records.map(\.target) == ["h3.lab.test."])
            #expect(cname.h3)

            let addresses = try await client.resolveAddresses("cname.lab.test")
            #expect(addresses.addresses == ["2001:db8::10", "192.0.2.10"])

            // CNAME, then AliasMode.
            let cnameAlias = try await client.resolveHTTPS("cnamealias.lab.test")
            #expect(cnameAlias.aliasChain == ["alias.lab.test.", "h3.lab.test."])
            #expect(cnameAlias.records.map(\.alpn) == [["h3", "h2"]])
            #expect(cnameAlias.h3)
            #expect(daemon.stop() == 0)
        }

        @Test func portPrefixAndDotTarget() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)

            let p8443 = try await client.resolveHTTPS("port.lab.test", port: 8443)
            #expect(p8443.name == "port.lab.test.")
            #expect(p8443.queryName == "_8443._https.port.lab.test.")
            #expect(p8443.records.map(\.target) == ["port.lab.test."])
            #expect(p8443.records.map(\.port) == [8443])
            #expect(p8443.records.map(\.alpn) == [["h3"]])
            #expect(p8443.h3)
            #expect(try kdigBindings("_8443._https.port.lab.test") == p8443.records.map(BindingSummary.init))

            // "." in ServiceMode is the owner, i.e. the port-prefixed name (RFC 9460 §2.5.2).
            let p9443 = try await client.resolveHTTPS("port.lab.test", port: 9443)
            #expect(p9443.queryName == "_9443._https.port.lab.test.")
            #expect(p9443.records.map(\.target) == ["_9443._https.port.lab.test."])
            #expect(p9443.records.first?.port == nil)

            // Port 443 asks the bare name, which says h2 only.
            let p443 = try await client.resolveHTTPS("port.lab.test")
            #expect(p443.queryName == "port.lab.test.")
            #expect(p443.records.map(\.alpn) == [["h2"]])

            // A port with no _PORT._https records: none, and not an error.
            let p8080 = try await client.resolveHTTPS("port.lab.test", port: 8080)
            #expect(p8080.queryName == "_8080._https.port.lab.test.")
            #expect(p8080.records.isEmpty)

            let plan = try await client.connectionPlan(host: "port.lab.test", port: 8443)
            #expect(plan.port == 8443)
            #expect(plan.h3)
            #expect(plan.h3Source == "https")
            let first = try #require(plan.endpoints.first)
            #expect(first.transport == "quic")
            #expect(first.address == "2001:db8::14")
            #expect(first.port == 8443)
            #expect(first.target == "port.lab.test.")
            #expect(plan.endpoints.allSatisfy { $0.port == 8443 })
            #expect(daemon.stop() == 0)
        }

        @Test func bindingsComeInPriorityOrderAsKdigSeesThem() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let prio = try await client.resolveHTTPS("prio.lab.test")
            #expect(prio.records.map(\.priority) == [1, 2, 3])
            #expect(prio.records.map(\.target) == ["prio-1.lab.test.", "prio-2.lab.test.", "prio-3.lab.test."])
            #expect(try kdigBindings("prio.lab.test") == prio.records.map(BindingSummary.init))

            let plan = try await client.connectionPlan(host: "prio.lab.test")
            let summary = plan.endpoints.map { "\($0.transport) \($0.address)" }
            #expect(summary == [
                "quic 2001:db8::21", "quic 192.0.2.21", "tcp 2001:db8::21", "tcp 192.0.2.21",
                "quic 2001:db8::22", "quic 192.0.2.22", "tcp 2001:db8::22", "tcp 192.0.2.22",
                "tcp 2001:db8::23", "tcp 192.0.2.23",
            ])
            #expect(plan.endpoints.map(\.priority) == plan.endpoints.map(\.priority).sorted())
            #expect(daemon.stop() == 0)
        }

        @Test func bindingsWithUnsupportedMandatoryKeysAreSetAside() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let usable = try await client.resolveHTTPS("mandatory.lab.test")
            #expect(usable.records.count == 1)
            #expect(usable.records.first?.mandatory == ["alpn", "port"])
            #expect(usable.records.first?.port == 8443)
            #expect(usable.records.first?.alpn == ["h3"])
            #expect(try kdigBindings("mandatory.lab.test") == usable.records.map(BindingSummary.init))

            // mandatory=key999: a key this client does not know, so the only record is unusable (RFC 9460 §8).
            #expect(try ResolverLab.kdig("mandatoryunknown.lab.test", "HTTPS").count == 1)
            let unusable = try await client.resolveHTTPS("mandatoryunknown.lab.test")
            #expect(unusable.records.isEmpty)
            #expect(!unusable.h3)
            #expect(daemon.stop() == 0)
        }

        @Test func hintsAreUsedUntilAddressesAreKnown() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let hints = try await client.resolveHTTPS("hints.lab.test")
            #expect(hints.records.first?.ipv4hint == ["192.0.2.80"])
            #expect(hints.records.first?.ipv6hint == ["2001:db8::80"])
            #expect(try kdigBindings("hints.lab.test") == hints.records.map(BindingSummary.init))

            // hints.lab.test has no A/AAAA at all: the hints are the only addresses to connect to.
            #expect(try ResolverLab.kdig("hints.lab.test", "A").isEmpty)
            let plan = try await client.connectionPlan(host: "hints.lab.test")
            #expect(plan.h3)
            #expect(plan.endpoints.map { "\($0.transport) \($0.address)" }
                    == ["quic 2001:db8::80", "quic 192.0.2.80", "tcp 2001:db8::80", "tcp 192.0.2.80"],
                    "\(plan.endpoints)")

            // hintsplus: hints say .81, the real A/AAAA say .82; once known, the real addresses win.
            let plus = try await client.connectionPlan(host: "hintsplus.lab.test")
            let addresses = Set(plus.endpoints.map(\.address))
            #expect(addresses == ["2001:db8::82", "192.0.2.82"], "\(plus.endpoints)")
            let again = try await client.connectionPlan(host: "hintsplus.lab.test")
            #expect(Set(again.endpoints.map(\.address)) == ["2001:db8::82", "192.0.2.82"])
            #expect(daemon.stop() == 0)
        }

        @Test func echNoDefaultAlpnAndUnknownKeys() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let ech = try await client.resolveHTTPS("ech.lab.test")
            let kdigECH = try kdigBindings("ech.lab.test")
            #expect(ech.records.first?.ech == kdigECH.first?.ech)
            #expect(ech.records.first?.ech?.hasPrefix("AEX+DQBBpAAgACCd0YV1Vvw6sQ0aX2h0a2sX3k5zJ1gQ1cT") == true)
            #expect(ech.records.first.flatMap { $0.ech.flatMap { Data(base64Encoded: $0) } }?.count == 71)
            let echPlan = try await client.connectionPlan(host: "ech.lab.test")
            #expect(!echPlan.endpoints.isEmpty)
            #expect(echPlan.endpoints.allSatisfy { $0.ech == ech.records.first?.ech })

            let nodefault = try await client.resolveHTTPS("nodefault.lab.test")
            #expect(nodefault.records.first?.noDefaultAlpn == true)
            #expect(nodefault.records.first?.alpn == ["h3"])
            #expect(try kdigBindings("nodefault.lab.test") == nodefault.records.map(BindingSummary.init))
            // The ALPN set is {h3}: nothing to offer over TCP.
            let nodefaultPlan = try await client.connectionPlan(host: "nodefault.lab.test")
            #expect(nodefaultPlan.endpoints.map { "\($0.transport) \($0.address)" } == ["quic 192.0.2.18"])

            let unknown = try await client.resolveHTTPS("unknownkey.lab.test")
            #expect(unknown.records.count == 1)
            #expect(unknown.records.first?.unknown == [UnknownSvcParam(key: 667, value: "aGVsbG8=")])
            #expect(unknown.h3)
            #expect(try kdigBindings("unknownkey.lab.test") == unknown.records.map(BindingSummary.init))

            let doh = try await client.resolveHTTPS("doh.lab.test")
            #expect(doh.records.first?.dohpath == "/dns-query{?dns}")
            #expect(daemon.stop() == 0)
        }

        @Test func nxdomainAndInvalidNames() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let https = await discoverError { try await client.resolveHTTPS("nx.lab.test") }
            #expect(https?.code == .noSuchName)
            #expect(https?.parameters["name"]?.stringValue?.hasPrefix("nx.lab.test") == true)
            #expect(await discoverError { try await client.resolveAddresses("nx.lab.test") }?.code == .noSuchName)
            #expect(await discoverError { try await client.connectionPlan(host: "nx.lab.test") }?.code == .noSuchName)

            for bad in ["a..b", String(repeating: "x", count: 64) + ".lab.test", "ex ample.com"] {
                #expect(await discoverError { try await client.resolveHTTPS(bad) }?.code == .invalidDNSName, "\(bad)")
                #expect(await discoverError { try await client.connectionPlan(host: bad) }?.code == .invalidDNSName, "\(bad)")
                #expect(await discoverError { try await client.resolveAddresses(bad) }?.code == .invalidDNSName, "\(bad)")
            }
            // 63 is the longest legal label: not an invalid name (it does not exist).
            let longest = String(repeating: "x", count: 63) + ".lab.test"
            #expect(await discoverError { try await client.resolveHTTPS(longest) }?.code == .noSuchName)
            #expect(try await client.status().cache.entries >= 1)
            #expect(daemon.stop() == 0)
        }

        @Test func connectionPlanOrder() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)

            let h3 = try await client.connectionPlan(host: "h3.lab.test")
            #expect(h3.host == "h3.lab.test.")
            #expect(h3.port == 443)
            #expect(h3.h3)
            #expect(h3.h3Source == "https")
            #expect(h3.endpoints.map { "\($0.transport) \($0.address)" }
                    == ["quic 2001:db8::10", "quic 192.0.2.10", "tcp 2001:db8::10", "tcp 192.0.2.10"])
            for endpoint in h3.endpoints where endpoint.transport == "quic" {
                #expect(endpoint.alpn == ["h3"])
            }
            for endpoint in h3.endpoints where endpoint.transport == "tcp" {
                #expect(endpoint.alpn.contains("h2") && !endpoint.alpn.contains("h3"))
            }
            #expect(h3.endpoints.allSatisfy { $0.port == 443 && $0.target == "h3.lab.test." && $0.priority == 1 })
            // Cold plan: HTTPS, A and AAAA went out for this call.
            #expect(Set(h3.timing.queries.map(\.type)).isSuperset(of: ["HTTPS", "A", "AAAA"]), "\(h3.timing.queries)")

            // Two addresses per family: QUIC group then TCP group, each interleaved IPv6 first.
            let multi = try await client.connectionPlan(host: "multi.lab.test")
            #expect(multi.endpoints.map { "\($0.transport) \($0.address)" } == [
                "quic 2001:db8::26", "quic 192.0.2.26", "quic 2001:db8::27", "quic 192.0.2.27",
                "tcp 2001:db8::26", "tcp 192.0.2.26", "tcp 2001:db8::27", "tcp 192.0.2.27",
            ])
            let kdigAAAA = try ResolverLab.kdig("multi.lab.test", "AAAA").sorted()
            let kdigA = try ResolverLab.kdig("multi.lab.test", "A").sorted()
            #expect(Set(multi.endpoints.map(\.address)) == Set(kdigAAAA + kdigA))

            // Distinct targets with their own addresses.
            let target = try await client.connectionPlan(host: "target.lab.test")
            #expect(target.endpoints.first?.target == "target-a.lab.test.")
            #expect(target.endpoints.first?.transport == "quic")
            #expect(target.endpoints.last?.target == "target-b.lab.test.")
            #expect(target.endpoints.last?.address == "192.0.2.32")

            // v6only: no IPv4 endpoint is invented.
            let v6 = try await client.connectionPlan(host: "v6only.lab.test")
            #expect(v6.endpoints.map(\.address).allSatisfy { $0 == "2001:db8::25" })
            #expect(v6.endpoints.first?.transport == "quic")

            // plain: no HTTPS records, so TCP only, and no h3 ...
            let plain = try await client.connectionPlan(host: "plain.lab.test")
            #expect(!plain.h3)
            #expect(plain.h3Source == nil)
            #expect(plain.endpoints.map { "\($0.transport) \($0.address)" } == ["tcp 2001:db8::12", "tcp 192.0.2.12"])
            // ... unless the caller assumes HTTP/3.
            let assumed = try await client.connectionPlan(host: "plain.lab.test", assumeH3: true)
            #expect(assumed.h3)
            #expect(assumed.h3Source == "assumed")
            #expect(assumed.endpoints.map { "\($0.transport) \($0.address)" }
                    == ["quic 2001:db8::12", "quic 192.0.2.12", "tcp 2001:db8::12", "tcp 192.0.2.12"])
            #expect(daemon.stop() == 0)
        }

        @Test func altSvcMakesPlainH3() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            let client = DiscoverClient(socketPath: daemon.socketPath)
            #expect(try await !client.h3Capability(host: "plain.lab.test"))

            try await client.reportAltSvc(origin: "https://plain.lab.test:443", header: #"h3=":443"; ma=3600"#)
            let plan = try await client.connectionPlan(host: "plain.lab.test")
            #expect(plan.h3)
            #expect(plan.h3Source == "altsvc")
            #expect(plan.endpoints.map { "\($0.transport) \($0.address) \($0.port)" } == [
                "quic 2001:db8::12 443", "quic 192.0.2.12 443", "tcp 2001:db8::12 443", "tcp 192.0.2.12 443",
            ])
            #expect(plan.endpoints.first?.alpn == ["h3"])
            #expect(try await client.h3Capability(host: "plain.lab.test"))
            // The Alt-Svc of one origin says nothing about another.
            #expect(try await !client.h3Capability(host: "h2only.lab.test"))

            for (origin, header) in [
                ("https://plain.lab.test", "h3"), ("https://plain.lab.test", "h3=:443"),
                ("http://plain.lab.test", #"h3=":443""#), ("plain.lab.test", #"h3=":443""#),
            ] {
                let error = await discoverError { try await client.reportAltSvc(origin: origin, header: header) }
                #expect(error?.code == .invalidDNSName, "\(origin) \(header)")
            }
            // A malformed report changes nothing.
            #expect(try await client.connectionPlan(host: "plain.lab.test").h3Source == "altsvc")
            #expect(daemon.stop() == 0)
        }

        @Test func cliExitCodesAndJSON() async throws {
            let daemon = try labDaemon(upstream: ResolverLab.knot)
            func sub(_ command: String, _ arguments: String...) throws -> CommandResult {
                try runCommand([BuiltProducts.discover, command, "--socket", daemon.socketPath] + arguments)
            }
            let yes = try sub("h3", "h3.lab.test")
            #expect(yes.status == 0, "\(yes.stderr)")
            #expect(yes.stdout.contains("h3"))
            #expect(try sub("h3", "h2only.lab.test").status == 1)
            #expect(try sub("h3", "plain.lab.test").status == 1)
            let nx = try sub("h3", "nx.lab.test")
            #expect(nx.status == 1, "no such name is a negative answer")
            #expect(!nx.stderr.isEmpty)
            #expect(try sub("h3", "a..b").status == 2)

            let json = try sub("https", "--json", "prio.lab.test")
            #expect(json.status == 0, "\(json.stderr)")
            let reply = try JSONDecoder().decode(ResolveHTTPSReply.self, from: Data(json.stdout.utf8))
            #expect(reply.records.map(\.priority) == [1, 2, 3])
            #expect(reply.queryName == "prio.lab.test.")
            let port = try sub("https", "--json", "--port", "8443", "port.lab.test")
            #expect(try JSONDecoder().decode(ResolveHTTPSReply.self, from: Data(port.stdout.utf8)).queryName
                    == "_8443._https.port.lab.test.")

            let plan = try sub("plan", "h3.lab.test")
            #expect(plan.status == 0)
            let lines = plan.stdout.split(separator: "\n")
            #expect(lines.first?.contains("h3=yes") == true, "\(plan.stdout)")
            #expect(lines.dropFirst().first?.contains("quic") == true)
            #expect(lines.dropFirst().first?.contains("[2001:db8::10]:443") == true)
            let planJSON = try sub("plan", "--json", "port.lab.test:8443")
            let decoded = try JSONDecoder().decode(ConnectionPlanReply.self, from: Data(planJSON.stdout.utf8))
            #expect(decoded.port == 8443)
            #expect(decoded.endpoints.first?.port == 8443)
            #expect(try sub("plan", "nx.lab.test").status == 1)
            #expect(daemon.stop() == 0)
        }
    }
}
