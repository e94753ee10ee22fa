import Foundation
import Testing

@testable import DiscoverAPI

/// The template of a cached `ResolveHTTPS` or `ResolveAddresses` reply: patched per call, and the same JSON as the
/// encoders write.
@Suite("Encoded resolver reply")
struct EncodedResolverReplyTests {
    static let bindings = [
        ServiceBinding(
            priority: 1, target: "h3.lab.test.", port: 8443, alpn: ["h3", "h2"], ipv4hint: ["192.0.2.10"],
            ech: "AEX+DQ==", unknown: [UnknownSvcParam(key: 65000, value: "AQI=")]),
        ServiceBinding(priority: 2, target: "h2.lab.test.", alpn: ["h2"], noDefaultAlpn: true),
    ]

    static let replies: [ResolveHTTPSReply] = [
        ResolveHTTPSReply(
            name: "h3.lab.test.", queryName: "h3.lab.test.", aliasChain: [], records: bindings, h3: true,
            source: .cache, ttl: 299, timing: Timing(totalMs: 0.012)),
        ResolveHTTPSReply(
            name: "alias.lab.test.", queryName: "alias.lab.test.", aliasChain: ["h3.lab.test."], records: bindings,
            h3: true, source: .expiredCache, ttl: 30, staleSeconds: 12, timing: Timing(totalMs: 1.5),
            note: "record 3 \"x\" ignored: mandatory key 7 is not supported"),
        ResolveHTTPSReply(
            name: "plain.lab.test.", queryName: "_8443._https.plain.lab.test.", aliasChain: [], records: [], h3: false,
            source: .cache, ttl: 1, timing: Timing(totalMs: 0)),
    ]

    @Test(arguments: replies.indices)
    func patchedMessageIsTheEncodedReply(index: Int) throws {
        let reply = Self.replies[index]
        // Built from a reply with other per-call values: only the constant part may come from the template.
        var other = reply
        other.source = .network
        other.ttl = 3600
        other.staleSeconds = nil
        other.timing = Timing(totalMs: 99, queries: [])
        let template = EncodedResolverReply(other)
        let message = template.message(
            source: reply.source, ttl: reply.ttl, staleSeconds: reply.staleSeconds, totalMs: reply.timing.totalMs)
        #expect(message == (try VarlinkReply.encode(reply)), "byte for byte what JSONWriter writes")
        #expect(message.last == 0)

        // And the same value as Foundation's JSONEncoder gives for the reply.
        struct Envelope: Encodable { var parameters: ResolveHTTPSReply }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let expected = try JSONSerialization.jsonObject(with: encoder.encode(Envelope(parameters: reply))) as? NSDictionary
        let actual = try JSONSerialization.jsonObject(with: Data(message.dropLast())) as? NSDictionary
        #expect(actual == expected)
    }

    static let addressReplies: [ResolveAddressesReply] = [
        ResolveAddressesReply(
            name: "h3.lab.test.", addresses: ["2001:db8::1", "192.0.2.1"], source: .cache, ttl: 299,
            timing: Timing(totalMs: 0.012)),
        ResolveAddressesReply(
            name: "plain.lab.test.", addresses: [], source: .expiredCache, ttl: 30, timing: Timing(totalMs: 12.5)),
    ]

    @Test(arguments: addressReplies.indices)
    func patchedAddressMessageIsTheEncodedReply(index: Int) throws {
        let reply = Self.addressReplies[index]
        var other = reply
        other.source = .network
        other.ttl = 3600
        other.timing = Timing(totalMs: 99, queries: [])
        let message = EncodedResolverReply(other).message(
            source: reply.source, ttl: reply.ttl, staleSeconds: nil, totalMs: reply.timing.totalMs)
        #expect(message == (try VarlinkReply.encode(reply)), "byte for byte what JSONWriter writes")
        let decoded = try VarlinkReplyMessage.decode(message.dropLast()).parameters(ResolveAddressesReply.self)
        #expect(decoded == reply)
    }
}
