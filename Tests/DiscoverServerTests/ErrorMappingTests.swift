import DNSCore
import DNSSDModel
import DiscoverAPI
import Discovery
import Resolver
import Testing

@testable import DiscoverServer

/// Every domain error is answered with the varlink error its interface declares, each code on purpose.
@Suite struct ErrorMappingTests {
    @Test func everyResolverErrorCodeHasItsOwnVarlinkError() {
        let expected: [ResolverError.Code: String] = [
            .noSuchName: "io.discoverd.Resolver.NoSuchName",
            .timeout: "io.discoverd.Resolver.Timeout",
            .upstreamFailure: "io.discoverd.Resolver.UpstreamFailure",
            .invalidName: "io.discoverd.Resolver.InvalidName",
            .tooManyQueries: "io.discoverd.Resolver.TooManyQueries",
            .networkError: "io.discoverd.Resolver.NetworkError",
        ]
        for code in ResolverError.Code.allCases {
            let error = ResolverError(code: code, name: "x.example.", rcode: "REFUSED", reason: "bad label")
            #expect(error.varlinkError.name == expected[code], "\(code)")
        }
        #expect(Set(ResolverError.Code.allCases) == Set(expected.keys))
        let failure = ResolverError(code: .upstreamFailure, name: "x.", rcode: "REFUSED").varlinkError
        #expect(failure.parameters == ["rcode": .string("REFUSED"), "name": .string("x.")])
        // With the queries made, the error names the server that answered so, and a timeout the servers tried.
        let attempt = QueryAttempt(
            name: "x.", type: .a, server: "192.0.2.53:53", transport: .udp, milliseconds: 1, rcode: "REFUSED")
        let named = ResolverError(code: .upstreamFailure, name: "x.", rcode: "REFUSED", attempts: [attempt])
            .varlinkError
        #expect(named.parameters["server"] == .string("192.0.2.53:53"))
        // Why it failed, when known: the upstream's own EDE, or discoverd's validator's verdict.
        let explained = ResolverError(
            code: .upstreamFailure, name: "x.", rcode: "SERVFAIL", upstreamError: .init(code: 22, text: "no NS")
        ).varlinkError
        #expect(
            explained.parameters == [
                "rcode": .string("SERVFAIL"), "name": .string("x."), "ede": .int(22), "reason": .string("no NS"),
            ])
        let bogus = ResolverError(
            code: .upstreamFailure, name: "x.", rcode: "SERVFAIL", reason: "DNSSEC: x. A: RRSIG expired",
            dnssec: .bogus(7, "x. A: RRSIG expired")
        ).varlinkError
        #expect(bogus.parameters["ede"] == .int(7))
        #expect(bogus.parameters["reason"] == .string("x. A: RRSIG expired"))
        let timeout = ResolverError(code: .timeout, name: "x.", attempts: [attempt, attempt]).varlinkError
        #expect(timeout.parameters == ["name": .string("x."), "servers": .array([.string("192.0.2.53:53")])])
        let busy = ResolverError(code: .tooManyQueries, name: "x.", reason: "512 upstream queries in flight").varlinkError
        #expect(busy.parameters == ["name": .string("x."), "reason": .string("512 upstream queries in flight")])
        let invalid = ResolverError(code: .invalidName, name: "a..b", reason: "empty label").varlinkError
        #expect(invalid.parameters == ["name": .string("a..b"), "reason": .string("empty label")])
    }

    @Test func everyDiscoveryErrorCodeHasItsOwnVarlinkError() {
        let subject = DiscoverySubject(type: "_x._tcp", name: "Printer", parameter: "txt")
        let expected: [DNSSDError.Code: VarlinkError] = [
            .invalidServiceType: .invalidServiceType("_x._tcp", reason: "why"),
            .invalidName: .invalidServiceName("Printer", reason: "why"),
            .notFound: .notFound("Printer"),
            .timeout: .discoveryTimeout,
            .avahiUnavailable: .avahiUnavailable,
            .avahiFailure: .avahiUnavailable,
            .nameConflict: .nameConflict("Printer"),
            .invalidParameter: .invalidParameter("txt"),
            .subscriberTooSlow: .subscriberTooSlow,
        ]
        #expect(Set(DNSSDError.Code.allCases) == Set(expected.keys))
        for code in DNSSDError.Code.allCases {
            let mapped = DiscoveryCallError(error: DNSSDError(code, "why"), subject: subject).varlinkError
            #expect(mapped == expected[code], "\(code)")
        }
    }

    @Test func theRouterAsksTheProtocol() async throws {
        var routes = RouteTable()
        let method = VarlinkMethod<VarlinkEmpty, VarlinkEmpty>("io.discoverd.Resolver.Flush")
        routes.register(method) { _, _ in throw ResolverError(code: .noSuchName, name: "gone.example.") }
        let harness = try await ConnectionHarness(routes: routes)
        let reply = try await harness.call(#"{"method":"io.discoverd.Resolver.Flush"}"#)
        #expect(reply["error"] as? String == "io.discoverd.Resolver.NoSuchName")
        #expect((reply["parameters"] as? [String: Any])?["name"] as? String == "gone.example.")
        try await harness.finish()
    }
}
