import DNSSDModel
import Foundation
import Testing

@testable import DiscoverAPI

@Suite("Wire types")
struct WireTypesTests {
    private func roundTrip<T: Codable & Equatable>(_ value: T) throws -> T {
        try JSONDecoder().decode(T.self, from: try JSONEncoder().encode(value))
    }

    @Test func resolverTypesRoundTrip() throws {
        let binding = ServiceBinding(
            priority: 1, target: "h3.lab.test.", port: 8443, alpn: ["h3", "h2"], noDefaultAlpn: false,
            ipv4hint: ["192.0.2.1"], ipv6hint: ["2001:db8::1"], ech: "AEX+DQ==", mandatory: ["alpn"],
            dohpath: "/q{?dns}", unknown: [UnknownSvcParam(key: 667, value: "aGVsbG8=")])
        let reply = ResolveHTTPSReply(
            name: "h3.lab.test", queryName: "_8443._https.h3.lab.test", aliasChain: ["alias.lab.test."],
            records: [binding], h3: true, source: .expiredCache, ttl: 30, staleSeconds: 12,
            timing: Timing(totalMs: 1.5, queries: [
                QueryTiming(name: "h3.lab.test.", type: "HTTPS", server: "192.0.2.53:53", transport: "udp", ms: 1.2, rcode: "NOERROR")
            ]))
        #expect(try roundTrip(reply) == reply)
        let plan = ConnectionPlanReply(
            host: "h3.lab.test", port: 443, h3: true, h3Source: "https",
            endpoints: [PlanEndpoint(address: "2001:db8::1", port: 443, transport: "quic", alpn: ["h3"], target: "h3.lab.test.", priority: 1)],
            source: .network, timing: Timing(totalMs: 3))
        #expect(try roundTrip(plan) == plan)
        #expect(try roundTrip(ResolveAddressesReply(name: "a", addresses: ["192.0.2.1"], source: .cache, ttl: 5, timing: Timing(totalMs: 0))).addresses == ["192.0.2.1"])
    }

    @Test func optionalFieldsAreOmittedNotNull() throws {
        let text = String(decoding: try JSONEncoder().encode(ServiceBinding(priority: 1, target: ".")), as: UTF8.self)
        #expect(!text.contains("null"))
        #expect(!text.contains("ech"))
        #expect(text.contains("\"unknown\":[]"))
    }

    @Test func discoveryTypesRoundTrip() throws {
        let service = DNSSDService(
            name: "Game of Bob", type: "_tictactoe._tcp", domain: "local", interfaces: ["eth0"], host: "lab-b.local",
            port: 4242, addresses: ["192.0.2.2", "fe80::1%eth0"], txt: ["version": "2"], txtRaw: [Array("version=2".utf8)])
        #expect(try roundTrip(BrowseReply(event: .added, service: service)) == BrowseReply(event: .added, service: service))
        #expect(try roundTrip(AdvertiseReply(event: .renamed, id: "7", name: "Game of Bob #2")).name == "Game of Bob #2")
    }

    @Test func statusRoundTrip() throws {
        let status = StatusReply(
            version: "1", uptimeSeconds: 2, avahi: .connecting, upstreams: ["192.0.2.53:53"],
            cache: CacheStatistics(entries: 1, hits: 2, misses: 3, staleServed: 4, refreshes: 5, refreshFailures: 6),
            connections: 7, subscriptions: 8, registrations: 9)
        #expect(try roundTrip(status) == status)
    }

    /// A caller who is neither root nor an admin gets every count but no name looked up on the machine.
    @Test func statusWithoutLookedUpNamesKeepsTheCounts() throws {
        let upstream = UpstreamServerStatus(
            server: "192.0.2.58:53", transport: "udp", origin: "configured", queries: 9, failures: 1,
            lastFailure: "timeout", errorAnswers: 2, lastErrorAnswer: "secret.example. A: SERVFAIL, EDE 7")
        let dnssec = DNSSECValidationStatus(
            mode: "yes", upstreams: "capable", secure: 1, insecure: 2, bogus: 3, lastBogusName: "secret.example.",
            lastBogusReason: "secret.example. A: RRSIG expired")
        let status = StatusReply(
            version: "1", uptimeSeconds: 2, avahi: .running, upstreams: ["192.0.2.58:53"],
            cache: CacheStatistics(entries: 1, hits: 2, misses: 3, staleServed: 4, refreshes: 5, refreshFailures: 6),
            connections: 7, subscriptions: 8, registrations: 9, upstreamServers: [upstream], dnssec: dnssec)
        let shown = status.withoutLookedUpNames()
        let text = String(decoding: try JSONEncoder().encode(shown), as: UTF8.self)
        #expect(!text.contains("secret"), "\(text)")
        var expected = status
        expected.upstreamServers?[0].lastErrorAnswer = nil
        expected.dnssec?.lastBogusName = nil
        expected.dnssec?.lastBogusReason = nil
        #expect(shown == expected)
        #expect(shown.upstreamServers?[0].errorAnswers == 2 && shown.dnssec?.bogus == 3)
        #expect(shown.upstreamServers?[0].lastFailure == "timeout")
    }

    @Test func everyTypedMethodIsDeclaredInItsInterface() {
        let methods = [
            Methods.getInfo.name, Methods.getInterfaceDescription.name, Methods.resolveHTTPS.name,
            Methods.resolveAddresses.name, Methods.connectionPlan.name, Methods.reportAltSvc.name, Methods.flush.name,
            Methods.browse.name, Methods.resolveService.name, Methods.advertise.name,
            Methods.updateAdvertisement.name, Methods.withdraw.name, Methods.browseTypes.name,
            Methods.browseDomains.name, Methods.status.name, Methods.reload.name,
        ]
        for method in methods {
            let dot = method.lastIndex(of: ".")!
            let interface = String(method[..<dot])
            let member = String(method[method.index(after: dot)...])
            #expect(InterfaceDescriptions.methods(of: interface).contains(member), "\(method) missing from IDL")
        }
    }

    @Test func everyInterfaceNamesItself() {
        for name in InterfaceDescriptions.names {
            let text = InterfaceDescriptions.description(of: name)
            #expect(text?.contains("\ninterface \(name)\n") == true)
        }
        #expect(InterfaceDescriptions.description(of: "io.discoverd.Nope") == nil)
    }

    @Test func parameterNamesComeFromCodingKeys() {
        #expect(ResolveHTTPSParameters.parameterNames == ["name", "port", "optimistic"])
        #expect(VarlinkEmpty.parameterNames.isEmpty)
    }
}

@Suite("Socket path")
struct SocketPathTests {
    @Test func rootsDaemonListensUnderRun() {
        #expect(SocketPath.daemonDefault(uid: 0, environment: [:]) == "/run/discoverd/io.discoverd")
    }

    @Test func aUsersDaemonListensInItsRuntimeDirectory() {
        #expect(SocketPath.daemonDefault(uid: 1000, environment: ["XDG_RUNTIME_DIR": "/run/user/1000"]) == "/run/user/1000/discoverd/io.discoverd")
        #expect(SocketPath.daemonDefault(uid: 1000, environment: [:]) == "/run/user/1000/discoverd/io.discoverd")
    }

    @Test func clientsTryTheExplicitPathThenTheEnvironmentThenTheirOwnOrTheSystemDaemon() {
        let env = ["DISCOVERD_SOCKET": "/tmp/x.sock", "XDG_RUNTIME_DIR": "/run/user/5"]
        #expect(SocketPath.clientDefault(explicit: "/e.sock", uid: 5, environment: env) == "/e.sock")
        #expect(SocketPath.clientDefault(uid: 5, environment: env) == "/tmp/x.sock")
        // A user without a daemon of their own falls back to the system daemon.
        let system = SocketPath.clientDefault(uid: 5, environment: ["XDG_RUNTIME_DIR": "/run/user/5"], exists: { $0 == "/run/discoverd/io.discoverd" })
        #expect(system == "/run/discoverd/io.discoverd")
        let own = SocketPath.clientDefault(uid: 5, environment: ["XDG_RUNTIME_DIR": "/run/user/5"], exists: { _ in false })
        #expect(own == "/run/user/5/discoverd/io.discoverd")
    }
}
