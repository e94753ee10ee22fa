import DNSCore
import Testing

@testable import Resolver

@Suite("Connection plan ordering")
struct PlanTests {
    /// Compact form of an endpoint for readable expectations: "quic [2001:db8::1]:443".
    static func brief(_ plan: ConnectionPlan) -> [String] {
        plan.endpoints.map { endpoint in
            let address = endpoint.address.contains(":") ? "[\(endpoint.address)]" : endpoint.address
            return "\(endpoint.transport.rawValue) \(address):\(endpoint.port)"
        }
    }

    static let hostAddresses = TargetAddresses(ipv6: ["2001:db8::1", "2001:db8::2"], ipv4: ["192.0.2.1"])

    @Test("Without HTTPS records: TCP on the host's addresses, IPv6 first, families interleaved")
    func noHTTPS() {
        let plan = ConnectionPlanner.plan(
            host: "Example.com", port: 443, bindings: [], addresses: ["example.com": Self.hostAddresses])
        #expect(Self.brief(plan) == ["tcp [2001:db8::1]:443", "tcp 192.0.2.1:443", "tcp [2001:db8::2]:443"])
        #expect(!plan.h3)
        #expect(plan.h3Source == nil)
        #expect(plan.endpoints.allSatisfy { $0.alpn == ["h2", "http/1.1"] && $0.target == "example.com." })
    }

    @Test("Without HTTPS records, assumeH3 adds QUIC endpoints first")
    func assumed() {
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 8443, bindings: [], addresses: ["example.com.": Self.hostAddresses],
            assumeH3: true)
        #expect(
            Self.brief(plan) == [
                "quic [2001:db8::1]:8443", "quic 192.0.2.1:8443", "quic [2001:db8::2]:8443",
                "tcp [2001:db8::1]:8443", "tcp 192.0.2.1:8443", "tcp [2001:db8::2]:8443",
            ])
        #expect(plan.h3Source == .assumed)
        #expect(plan.endpoints.first?.alpn == ["h3"])
    }

    @Test("An h3 binding gives QUIC before TCP, with the ALPN split by transport and ECH carried")
    func h3Binding() {
        let binding = ServiceBinding(priority: 1, target: "example.com.", alpn: ["h3", "h2"], ech: "AQID")
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [binding], addresses: ["example.com": Self.hostAddresses])
        #expect(
            Self.brief(plan) == [
                "quic [2001:db8::1]:443", "quic 192.0.2.1:443", "quic [2001:db8::2]:443",
                "tcp [2001:db8::1]:443", "tcp 192.0.2.1:443", "tcp [2001:db8::2]:443",
            ])
        #expect(plan.h3Source == .https)
        #expect(plan.endpoints[0].alpn == ["h3"])
        #expect(plan.endpoints[3].alpn == ["h2", "http/1.1"])
        #expect(plan.endpoints.allSatisfy { $0.ech == "AQID" && $0.priority == 1 })
    }

    @Test("SVCB priority comes first: a better-priority TCP-only binding precedes a worse h3 one")
    func priorityFirst() {
        let bindings = [
            ServiceBinding(priority: 1, target: "a.example.", alpn: ["h2"]),
            ServiceBinding(priority: 2, target: "b.example.", alpn: ["h3"]),
        ]
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: bindings,
            addresses: ["a.example": TargetAddresses(ipv6: [], ipv4: ["192.0.2.10"]),
                        "b.example": TargetAddresses(ipv6: [], ipv4: ["192.0.2.20"])])
        #expect(Self.brief(plan) == ["tcp 192.0.2.10:443", "quic 192.0.2.20:443", "tcp 192.0.2.20:443"])
        #expect(plan.endpoints.map(\.priority) == [1, 2, 2])
        #expect(plan.h3Source == .https)
    }

    @Test("Unsorted bindings are still ordered by priority")
    func unsortedBindings() {
        let bindings = [
            ServiceBinding(priority: 5, target: "b.example.", ipv4hint: ["192.0.2.20"]),
            ServiceBinding(priority: 1, target: "a.example.", ipv4hint: ["192.0.2.10"]),
        ]
        let plan = ConnectionPlanner.plan(host: "example.com", port: 443, bindings: bindings, addresses: [:])
        #expect(Self.brief(plan) == ["tcp 192.0.2.10:443", "tcp 192.0.2.20:443"])
    }

    @Test("Within one priority, ECH-capable bindings come first")
    func echFirst() {
        let bindings = [
            ServiceBinding(priority: 1, target: "plain.example.", ipv4hint: ["192.0.2.1"]),
            ServiceBinding(priority: 1, target: "ech.example.", ipv4hint: ["192.0.2.2"], ech: "AQID"),
            ServiceBinding(priority: 2, target: "later.example.", ipv4hint: ["192.0.2.3"], ech: "AQID"),
        ]
        let plan = ConnectionPlanner.plan(host: "example.com", port: 443, bindings: bindings, addresses: [:])
        #expect(Self.brief(plan) == ["tcp 192.0.2.2:443", "tcp 192.0.2.1:443", "tcp 192.0.2.3:443"])
        #expect(plan.endpoints.map(\.ech) == ["AQID", nil, "AQID"])
    }

    @Test("Hints are used only while the family's addresses are unknown (RFC 9460 §7.3)")
    func hints() {
        let binding = ServiceBinding(
            priority: 1, target: "svc.example.", ipv4hint: ["192.0.2.99"], ipv6hint: ["2001:db8::99"])
        // Nothing known: both hint families.
        let cold = ConnectionPlanner.plan(host: "example.com", port: 443, bindings: [binding], addresses: [:])
        #expect(Self.brief(cold) == ["tcp [2001:db8::99]:443", "tcp 192.0.2.99:443"])
        // AAAA known (and empty), A still unknown: no IPv6 hint, IPv4 hint kept.
        let half = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [binding],
            addresses: ["svc.example": TargetAddresses(ipv6: [], ipv4: nil)])
        #expect(Self.brief(half) == ["tcp 192.0.2.99:443"])
        // Both known: real addresses replace the hints.
        let warm = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [binding],
            addresses: ["svc.example": TargetAddresses(ipv6: ["2001:db8::1"], ipv4: ["192.0.2.1"])])
        #expect(Self.brief(warm) == ["tcp [2001:db8::1]:443", "tcp 192.0.2.1:443"])
    }

    @Test("The binding's port overrides the requested port")
    func bindingPort() {
        let binding = ServiceBinding(priority: 1, target: "example.com.", port: 8443, ipv4hint: ["192.0.2.1"])
        let plan = ConnectionPlanner.plan(host: "example.com", port: 443, bindings: [binding], addresses: [:])
        #expect(Self.brief(plan) == ["tcp 192.0.2.1:8443"])
        #expect(plan.port == 443)
    }

    @Test("no-default-alpn with alpn=h3 gives QUIC endpoints only")
    func quicOnly() {
        let binding = ServiceBinding(priority: 1, target: "example.com.", alpn: ["h3"], noDefaultAlpn: true,
            ipv4hint: ["192.0.2.1"])
        let plan = ConnectionPlanner.plan(host: "example.com", port: 443, bindings: [binding], addresses: [:])
        #expect(Self.brief(plan) == ["quic 192.0.2.1:443"])
    }

    @Test("Alt-Svc h3 without HTTPS records: QUIC on the advertised port first, h3Source altsvc")
    func altSvc() {
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [],
            addresses: ["example.com": TargetAddresses(ipv6: ["2001:db8::1"], ipv4: ["192.0.2.1"])],
            assumeH3: true, altSvc: [.init(alpn: "h3", port: 4433), .init(alpn: "h2", port: 443)])
        #expect(
            Self.brief(plan) == [
                "quic [2001:db8::1]:443", "quic 192.0.2.1:443",  // assumed
                "quic [2001:db8::1]:4433", "quic 192.0.2.1:4433",  // Alt-Svc
                "tcp [2001:db8::1]:443", "tcp 192.0.2.1:443",
            ])
        #expect(plan.h3Source == .altsvc)

        let altOnly = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [],
            addresses: ["example.com": TargetAddresses(ipv6: [], ipv4: ["192.0.2.1"])],
            altSvc: [.init(alpn: "h3", port: 443)])
        #expect(Self.brief(altOnly) == ["quic 192.0.2.1:443", "tcp 192.0.2.1:443"])
        #expect(altOnly.h3 && altOnly.h3Source == .altsvc)
    }

    @Test("Alt-Svc alternatives on another host use that host's addresses, or are skipped if unknown")
    func altSvcOtherHost() {
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [],
            addresses: ["example.com": TargetAddresses(ipv6: [], ipv4: ["192.0.2.1"]),
                        "alt.example.net": TargetAddresses(ipv6: ["2001:db8::a"], ipv4: [])],
            altSvc: [.init(alpn: "h3", host: "alt.example.net", port: 443),
                     .init(alpn: "h3", host: "unknown.example", port: 443)])
        #expect(Self.brief(plan) == ["quic [2001:db8::a]:443", "tcp 192.0.2.1:443"])
        #expect(plan.endpoints[0].target == "alt.example.net.")
    }

    @Test("HTTPS is the h3 source when both HTTPS and Alt-Svc say h3; duplicates are dropped")
    func httpsBeatsAltSvc() {
        let binding = ServiceBinding(priority: 1, target: "example.com.", alpn: ["h3"])
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [binding],
            addresses: ["example.com": TargetAddresses(ipv6: [], ipv4: ["192.0.2.1"])],
            altSvc: [.init(alpn: "h3", port: 443)])
        #expect(plan.h3Source == .https)
        #expect(Self.brief(plan) == ["quic 192.0.2.1:443", "tcp 192.0.2.1:443"])
    }

    @Test("assumeH3 does not override HTTPS records that do not offer h3")
    func assumeWithRecords() {
        let binding = ServiceBinding(priority: 1, target: "example.com.", alpn: ["h2"], ipv4hint: ["192.0.2.1"])
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [binding], addresses: [:], assumeH3: true)
        #expect(!plan.h3)
        #expect(Self.brief(plan) == ["tcp 192.0.2.1:443"])
    }

    @Test("After an AliasMode chain without ServiceMode records, the alias target's addresses are used")
    func aliasFallback() {
        let plan = ConnectionPlanner.plan(
            host: "example.com", port: 443, bindings: [],
            addresses: ["example.com": TargetAddresses(ipv6: [], ipv4: ["192.0.2.1"]),
                        "pool.example.net": TargetAddresses(ipv6: [], ipv4: ["198.51.100.7"])],
            fallbackTarget: "Pool.example.net")
        #expect(Self.brief(plan) == ["tcp 198.51.100.7:443"])
        #expect(plan.endpoints.first?.target == "pool.example.net.")
    }

    @Test("Interleaving alternates families and appends the longer tail")
    func interleave() {
        #expect(ConnectionPlanner.interleave([1, 2, 3], [10]) == [1, 10, 2, 3])
        #expect(ConnectionPlanner.interleave([Int](), [10, 11]) == [10, 11])
    }
}
