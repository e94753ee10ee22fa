import DNSSDModel
import Foundation
import Testing

@testable import DiscoverAPI

/// Pins every ``JSONWritable`` encoder to its wire type, field by field.
///
/// Each fixture sets every stored property at every depth (checked by reflection, so a field added to a wire type
/// fails here until the fixture sets it); then the bytes ``JSONWriter`` writes must be the same JSON tree as
/// `JSONEncoder` writes from the Codable form. A field the fast encoder forgets, misspells or writes with another
/// type fails, not only the fields some fixture happens to set.
@Suite("Fast encoders write every field of their wire type")
struct FastEncoderCoverageTests {
    static let binding = ServiceBinding(
        priority: 1, target: "t.", port: 8443, alpn: ["h3"], noDefaultAlpn: true, ipv4hint: ["192.0.2.1"],
        ipv6hint: ["2001:db8::1"], ech: "AEX+DQ==", mandatory: ["alpn"], dohpath: "/q{?dns}",
        unknown: [UnknownSvcParam(key: 667, value: "aGVsbG8=")])
    static let timing = Timing(
        totalMs: 1.5,
        queries: [QueryTiming(name: "a.", type: "HTTPS", server: "192.0.2.53:53", transport: "udp", ms: 1, rcode: "NOERROR")])
    static let service = DNSSDService(
        name: "Printer", type: "_ipp._tcp", domain: "local", interfaces: ["eth0"], host: "p.local", port: 631,
        addresses: ["192.0.2.9"], txt: ["rp": "q", "flag": nil], txtRaw: [Array("rp=q".utf8), [0xFF]])

    /// The paths of properties that hold no value: a nil optional, an empty array or dictionary.
    static func unset(_ value: Any, path: String = "") -> [String] {
        let mirror = Mirror(reflecting: value)
        switch mirror.displayStyle {
        case .optional:
            guard let wrapped = mirror.children.first else { return [path] }
            return unset(wrapped.value, path: path)
        case .collection:
            if mirror.children.isEmpty { return [path] }
            return mirror.children.enumerated().flatMap { unset($1.value, path: "\(path)[\($0)]") }
        case .dictionary:
            // A TXT map's nil values are boolean attributes, not unset fields.
            return mirror.children.isEmpty ? [path] : []
        case .struct, .class:
            return mirror.children.flatMap { unset($0.value, path: path + "." + ($0.label ?? "?")) }
        default:
            return []
        }
    }

    /// The JSON tree `value` writes through ``JSONWriter`` and through `JSONEncoder`, which must be equal.
    func expectSameJSON<T: Encodable & JSONWritable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let missing = Self.unset(value)
        #expect(missing.isEmpty, "fixture of \(T.self) leaves \(missing) unset", sourceLocation: sourceLocation)
        var writer = JSONWriter()
        value.write(to: &writer)
        let fast = try JSONDecoder().decode(JSONValue.self, from: Data(writer.bytes))
        let slow = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
        #expect(fast == slow, "\(T.self): JSONWriter \(fast) vs JSONEncoder \(slow)", sourceLocation: sourceLocation)
    }

    @Test func resolveHTTPSReplyWritesEveryField() throws {
        try expectSameJSON(
            ResolveHTTPSReply(
                name: "h3.lab.test.", queryName: "_8443._https.h3.lab.test.", aliasChain: ["a."],
                records: [Self.binding], h3: true, source: .expiredCache, ttl: 30, staleSeconds: 4,
                timing: Self.timing, note: "note", confirmed: true))
    }

    @Test func resolveAddressesReplyWritesEveryField() throws {
        try expectSameJSON(
            ResolveAddressesReply(
                name: "a.", addresses: ["192.0.2.1"], source: .network, ttl: 300, timing: Self.timing, confirmed: false))
    }

    @Test func connectionPlanReplyWritesEveryField() throws {
        try expectSameJSON(
            ConnectionPlanReply(
                host: "h.", port: 443, h3: true, h3Source: "https",
                endpoints: [
                    PlanEndpoint(
                        address: "2001:db8::1", port: 443, transport: "quic", alpn: ["h3"], target: "h.", priority: 1,
                        ech: "AA==")
                ],
                source: .cache, timing: Self.timing, echAuthentication: .encryptedTransport))
    }

    @Test func browseReplyWritesEveryField() throws {
        try expectSameJSON(BrowseReply(event: .added, service: Self.service, services: [Self.service]))
    }

    @Test func theCoverageCheckFindsAnUnsetField() {
        let partial = ServiceBinding(priority: 1, target: ".")
        #expect(Self.unset(partial).contains(".port"))
        #expect(Self.unset(partial).contains(".unknown"))
        #expect(Self.unset(Self.binding).isEmpty)
    }
}
