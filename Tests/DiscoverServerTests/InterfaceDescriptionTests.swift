import DNSSDModel
import DiscoverAPI
import Foundation
import Testing

/// Pins every field name of the IDL text (`InterfaceDescriptions`) to the Codable keys of the wire types and to what
/// `JSONWriter` writes, so a field cannot drift between the struct, the hot-path writer and the IDL.
///
/// Each wire value below is fully populated (checked: no optional left nil), so its encoding shows every key.
@Suite struct InterfaceDescriptionTests {
    // MARK: - Fully populated wire values

    static let timing = Timing(
        totalMs: 1.5,
        queries: [QueryTiming(name: "a.", type: "HTTPS", server: "192.0.2.53:53", transport: "udp", ms: 1, rcode: "NOERROR")])
    static let binding = ServiceBinding(
        priority: 1, target: ".", port: 8443, alpn: ["h3"], noDefaultAlpn: true, ipv4hint: ["192.0.2.1"],
        ipv6hint: ["2001:db8::1"], ech: "AAA=", mandatory: ["alpn"], dohpath: "/q{?dns}",
        unknown: [UnknownSvcParam(key: 65000, value: "AQ==")])
    static let endpoint = PlanEndpoint(
        address: "2001:db8::1", port: 443, transport: "quic", alpn: ["h3"], target: "a.", priority: 1, ech: "AAA=")
    static let service = DNSSDService(
        name: "Printer", type: "_ipp._tcp", domain: "local", interfaces: ["eth0"], host: "p.local", port: 631,
        addresses: ["192.0.2.9"], txt: ["rp": "q"], txtRaw: [Array("rp=q".utf8)])
    static let cache = CacheStatistics(entries: 1, hits: 2, misses: 3, staleServed: 4, refreshes: 5, refreshFailures: 6)
    static let settings = DaemonSettings(
        logLevel: "info", adminGroup: "wheel", advertiseGroup: "lan", servicesDir: "/etc/discoverd/services",
        maxConnections: 16384, maxMessageSize: 65536, maxQueuedCalls: 256, maxSendBuffer: 1 << 20, timeoutMs: 1500,
        attempts: 2, optimistic: true, staleTtl: 30, maxStale: 86400, refreshRetry: 30, noOptimisticDomains: ["x."],
        cacheSize: 100_000, persistInterval: 300, publishGroup: "wan", maxConnectionsPerUid: 256, maxCallsPerUid: 1024,
        reservedConnections: 16, maxInputBuffer: 262_144, idleTimeout: 120)
    static let usage = UIDUsage(uid: 1000, connections: 3, calls: 7)
    static let stubQueries = StubQueryCounts(udp: 1, tcp: 2)
    static let upstreamServer = UpstreamServerStatus(
        server: "tls://192.0.2.53:853#dns.example", transport: "tls", origin: "configured", note: "n",
        tlsVersion: "TLSv1.3", verifiedName: "dns.example", keyPin: "urKlXhFA6MdhOFU9fWbyITD/k8C2gI2LCH/jpIldRk0=",
        keyPinned: false, connectionsOpened: 1, connectionsOpen: 1, handshakes: 1,
        resumptions: 0, queries: 1, p50Ms: 1.5, failures: 0, lastFailure: "r", errorAnswers: 1,
        lastErrorAnswer: "x.example. A: SERVFAIL, EDE 22 (No Reachable Authority)")
    static let upstreamQueries = UpstreamQueryStatus(
        limit: 512, perClientLimit: 128, socketLimit: 1024, inflight: 1, peak: 2, socketsOpen: 1, refused: 0,
        refusedPerClient: 0, socketsRefused: 0, coalesced: 3, busiestClient: "uid 0", busiestClientInflight: 1,
        scrubbedRecords: 4)
    static let stubLimits = StubLimits(
        maxTcp: 1024, maxTcpPerAddress: 32, tcpIdleTimeout: 10, refusalsPerSecond: 5, cookies: true)
    static let stubAddressUsage = StubAddressUsage(address: "192.0.2.7", connections: 3)
    static let stub = StubStatus(
        listen: ["udp 127.0.0.153:53"], queries: stubQueries, cacheAnswers: 1, staleAnswers: 2, forwarded: 3, local: 4,
        refused: 5, truncated: 6, formatErrors: 7, serverFailures: 8, limits: stubLimits, tcpConnections: 9,
        tcpRefused: 10, nearestToCaps: [stubAddressUsage])

    static let dnssecUpstream = DNSSECUpstreamState(
        server: "192.0.2.53:53", state: "capable", evidence: "DNSKEY . with RRSIGs", sinceSeconds: 5)
    static let dnssecStatus = DNSSECValidationStatus(
        mode: "allow-downgrade", upstreams: "capable", secure: 1, insecure: 2, bogus: 3, lastBogusName: "bad.example.",
        lastBogusReason: "bad.example. A: signature expired", upstreamStates: [dnssecUpstream])

    /// IDL type name → a value of the Swift type that carries it.
    static func pinnedTypes() throws -> [String: any Encodable] {
        [
            "io.discoverd.Resolver.Query": timing.queries[0],
            "io.discoverd.Resolver.Timing": timing,
            "io.discoverd.Resolver.UnknownParam": binding.unknown[0],
            "io.discoverd.Resolver.ServiceBinding": binding,
            "io.discoverd.Resolver.Endpoint": endpoint,
            "io.discoverd.Resolver.IgnoredAlternative": IgnoredAlternative(alternative: "h3-29=\":443\"", reason: "r"),
            "io.discoverd.Discovery.Service": service,
            "io.discoverd.Daemon.CacheStatistics": cache,
            "io.discoverd.Daemon.Settings": settings,
            "io.discoverd.Daemon.StubStatus": stub,
            "io.discoverd.Daemon.StubQueryCounts": stubQueries,
            "io.discoverd.Daemon.StubLimits": stubLimits,
            "io.discoverd.Daemon.StubAddressUsage": stubAddressUsage,
            "io.discoverd.Daemon.UIDUsage": usage,
            "io.discoverd.Daemon.UpstreamQueries": upstreamQueries,
            "io.discoverd.Daemon.UpstreamServer": upstreamServer,
            "io.discoverd.Daemon.DNSSECStatus": dnssecStatus,
            "io.discoverd.Daemon.DNSSECUpstreamState": dnssecUpstream,
        ]
    }

    /// IDL enum type name → whether the Swift enum accepts a raw value.
    static let enums: [String: @Sendable (String) -> Bool] = [
        "io.discoverd.Resolver.Source": { AnswerSource(rawValue: $0) != nil },
        "io.discoverd.Resolver.DNSSEC": { DNSSECStatus(rawValue: $0) != nil },
    ]

    struct MethodPin: Sendable {
        var name: String
        var parameters: Set<String>
        var reply: any Encodable & Sendable

        init<P, R: Sendable>(_ method: VarlinkMethod<P, R>, reply: R) {
            name = method.name
            parameters = P.parameterNames
            self.reply = reply
        }
    }

    static let methods: [MethodPin] = [
        MethodPin(
            Methods.getInfo,
            reply: ServiceInfo(vendor: "v", product: "p", version: "1", url: "u", interfaces: ["i"])),
        MethodPin(Methods.getInterfaceDescription, reply: InterfaceDescriptionReply(description: "d")),
        MethodPin(
            Methods.resolveHTTPS,
            reply: ResolveHTTPSReply(
                name: "a.", queryName: "a.", aliasChain: ["b."], records: [binding], h3: true, source: .cache, ttl: 1,
                staleSeconds: 2, timing: timing, note: "n", confirmed: true)),
        MethodPin(
            Methods.resolveSVCB,
            reply: ResolveHTTPSReply(
                name: "a.", queryName: "_853.a.", aliasChain: ["b."], records: [binding], h3: false, source: .cache,
                ttl: 1, staleSeconds: 2, timing: timing, note: "n", confirmed: false)),
        MethodPin(
            Methods.resolveAddresses,
            reply: ResolveAddressesReply(
                name: "a.", addresses: ["192.0.2.1"], source: .network, ttl: 1, timing: timing, confirmed: true)),
        MethodPin(
            Methods.connectionPlan,
            reply: ConnectionPlanReply(
                host: "a.", port: 443, h3: true, h3Source: "https", endpoints: [endpoint], source: .cache,
                timing: timing, echAuthentication: .dnssec)),
        MethodPin(
            Methods.reportAltSvc,
            reply: ReportAltSvcReply(
                recorded: true, cleared: false, alternatives: ["h3=\":443\""],
                ignored: [IgnoredAlternative(alternative: "h3-29=\":443\"", reason: "r")], scope: .reporter)),
        MethodPin(Methods.flush, reply: FlushReply(flushed: 1)),
        MethodPin(Methods.browse, reply: BrowseReply(event: .added, service: service, services: [service])),
        MethodPin(Methods.resolveService, reply: ResolveServiceReply(service: service)),
        MethodPin(Methods.advertise, reply: AdvertiseReply(event: .failed, id: "1", name: "n", error: "e")),
        MethodPin(Methods.updateAdvertisement, reply: VarlinkEmpty()),
        MethodPin(Methods.withdraw, reply: VarlinkEmpty()),
        MethodPin(Methods.browseTypes, reply: BrowseTypesReply(types: ["_http._tcp"])),
        MethodPin(Methods.browseDomains, reply: BrowseDomainsReply(domains: ["local"])),
        MethodPin(
            Methods.status,
            reply: StatusReply(
                version: "1", uptimeSeconds: 1, avahi: .running, upstreams: ["192.0.2.53:53"], cache: cache,
                connections: 1, subscriptions: 1, registrations: 1, stub: stub, settings: settings,
                upstreamQueries: upstreamQueries, nearestToCaps: [usage], upstreamServers: [upstreamServer],
                dnssec: dnssecStatus)),
        MethodPin(Methods.reload, reply: VarlinkEmpty()),
    ]

    /// Every error constructor of `VarlinkError`, with parameters filled in.
    static let errors: [VarlinkError] = [
        .interfaceNotFound("i"), .methodNotFound("m"), .methodNotImplemented("m"), .invalidParameter("p"),
        .permissionDenied, .expectedMore, .invalidMessage(reason: "r"), .messageTooLarge(limit: 1),
        .tooManyConnections(limit: 1, scope: "uid"), .tooManyCalls(limit: 1), .invalidConfiguration(reason: "r"), .internalError(reason: "r"),
        .noSuchName("n"), .resolverTimeout(name: "n", servers: ["s"], reason: "r"),
        .upstreamFailure(rcode: "SERVFAIL", name: "n", server: "s", ede: 6, reason: "r"),
        .invalidDNSName("n", reason: "r"),
        .tooManyQueries(name: "n", reason: "r"), .networkError(name: "n", reason: "r"),
        .invalidServiceType("t", reason: "r"), .invalidServiceName("n", reason: "r"), .notFound("n"),
        .discoveryTimeout, .avahiUnavailable, .nameConflict("n"), .subscriberTooSlow,
    ]

    static let interfaces: [String: IDL] = Dictionary(
        uniqueKeysWithValues: InterfaceDescriptions.names.map { ($0, IDL(InterfaceDescriptions.description(of: $0)!)) })

    static func split(_ qualified: String) -> (interface: String, member: String) {
        let dot = qualified.lastIndex(of: ".")!
        return (String(qualified[..<dot]), String(qualified[qualified.index(after: dot)...]))
    }

    // MARK: - Key extraction

    /// The top-level keys `JSONEncoder` writes, after checking that no optional field was left nil.
    static func encodedKeys(_ value: any Encodable) throws -> Set<String> {
        for child in Mirror(reflecting: value).children {
            let inner = Mirror(reflecting: child.value)
            #expect(
                inner.displayStyle != .optional || !inner.children.isEmpty,
                "fixture \(type(of: value)).\(child.label ?? "?") is nil: fill it so its key is pinned")
        }
        let data = try JSONEncoder().encode(value)
        return Set(try #require(JSONSerialization.jsonObject(with: data) as? [String: Any]).keys)
    }

    /// The top-level keys `JSONWriter` writes, for the types that have a hand-written encoding.
    static func writtenKeys(_ value: any Encodable) throws -> Set<String>? {
        guard let writable = value as? any JSONWritable else { return nil }
        var writer = JSONWriter()
        writable.write(to: &writer)
        return Set(try #require(JSONSerialization.jsonObject(with: Data(writer.bytes)) as? [String: Any]).keys)
    }

    // MARK: - Tests

    @Test func everyIDLTypeHasTheFieldsOfItsWireType() throws {
        var pinned = Set<String>()
        for (qualified, value) in try Self.pinnedTypes() {
            let (interface, name) = Self.split(qualified)
            let idl = try #require(Self.interfaces[interface]?.types[name], "\(qualified) is not in the IDL")
            let declared = Set(idl.fieldNames)
            #expect(try Self.encodedKeys(value) == declared, "\(qualified): Codable keys vs IDL")
            if let written = try Self.writtenKeys(value) {
                #expect(written == declared, "\(qualified): JSONWriter keys vs IDL")
            }
            pinned.insert(qualified)
        }
        for (qualified, accepts) in Self.enums {
            let (interface, name) = Self.split(qualified)
            guard case .values(let values) = try #require(Self.interfaces[interface]?.types[name]) else {
                Issue.record("\(qualified) is not an enum in the IDL")
                continue
            }
            for value in values { #expect(accepts(value), "\(qualified) value \(value) has no Swift case") }
            pinned.insert(qualified)
        }
        for (interface, idl) in Self.interfaces {
            for name in idl.types.keys {
                #expect(pinned.contains("\(interface).\(name)"), "IDL type \(interface).\(name) is pinned to nothing")
            }
        }
    }

    @Test func everyMethodTakesAndAnswersTheFieldsTheIDLDeclares() throws {
        var pinned = Set<String>()
        for method in Self.methods {
            let (interface, name) = Self.split(method.name)
            let idl = try #require(Self.interfaces[interface], "no IDL for \(interface)")
            let parameters = try #require(idl.methodParameters[name], "\(method.name) is not in the IDL")
            #expect(method.parameters == Set(parameters), "\(method.name): parameter CodingKeys vs IDL")
            let reply = Set(idl.methodReplies[name] ?? [])
            #expect(try Self.encodedKeys(method.reply) == reply, "\(method.name): reply Codable keys vs IDL")
            if let written = try Self.writtenKeys(method.reply) {
                #expect(written == reply, "\(method.name): reply JSONWriter keys vs IDL")
            }
            pinned.insert(method.name)
        }
        for (interface, idl) in Self.interfaces {
            for name in idl.methodParameters.keys {
                #expect(pinned.contains("\(interface).\(name)"), "IDL method \(interface).\(name) is pinned to nothing")
            }
        }
    }

    @Test func everyErrorIsDeclaredWithItsParameters() throws {
        var pinned = Set<String>()
        for error in Self.errors {
            let (interface, name) = Self.split(error.name)
            let declared = try #require(Self.interfaces[interface]?.errors[name], "\(error.name) is not in the IDL")
            #expect(Set(error.parameters.keys) == Set(declared), "\(error.name): parameters vs IDL")
            pinned.insert(error.name)
        }
        for (interface, idl) in Self.interfaces {
            for name in idl.errors.keys {
                #expect(pinned.contains("\(interface).\(name)"), "IDL error \(interface).\(name) has no constructor")
            }
        }
    }

    @Test func theParserReadsStructsEnumsMethodsAndErrors() {
        let idl = IDL(
            """
            # comment (with: parens)
            interface a.b
            type E (x, y)
            type S (f: ?(p, q), g: [string]string, h: []E)
            method M(a: int, b: ?(u, v)) -> (c: S)
            error X (reason: string)
            error Y ()
            """)
        #expect(idl.interface == "a.b")
        #expect(idl.types["E"] == .values(["x", "y"]))
        #expect(idl.types["S"] == .fields(["f", "g", "h"]))
        #expect(idl.methodParameters["M"] == ["a", "b"])
        #expect(idl.methodReplies["M"] == ["c"])
        #expect(idl.errors == ["X": ["reason"], "Y": []])
    }
}
