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

    /// The per-call fields written into a raw buffer are what JSONWriter writes for them, for every kind of value
    /// (the number formats' edges, NaN, negative numbers) and whether or not the buffer is larger than needed.
    @Test func perCallFieldsAreWrittenAsJSONWriterWritesThem() throws {
        let ttls = [0, 1, 9, 10, 299, 86_400, Int(UInt32.max), -1, Int.max, Int.min]
        let stales: [Int?] = [nil, 0, 12, 1_000_000, Int.min]
        var totals: [Double] = [0, 0.001, 0.012, 0.1, 1.5, 12.25, 999_999_999.999, 1e9, 2.5e-7, -0.0, -3.5, .nan, .infinity, 1e300]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 { totals.append(Double(Int.random(in: 0..<50_000_000, using: &generator)) / 1000) }
        for _ in 0..<50 { totals.append(Double.random(in: 0..<1e12, using: &generator)) }
        var checked = 0
        for base in Self.replies {
            let template = EncodedResolverReply(base)
            for ttl in ttls {
                for stale in stales {
                    for total in totals {
                        var reply = base
                        reply.source = [.cache, .expiredCache, .network][checked % 3]
                        reply.ttl = ttl
                        reply.staleSeconds = stale
                        reply.timing = Timing(totalMs: total)
                        let message = template.message(
                            source: reply.source, ttl: ttl, staleSeconds: stale, totalMs: total)
                        #expect(message == (try VarlinkReply.encode(reply)), "ttl \(ttl) stale \(String(describing: stale)) total \(total)")
                        #expect(message.count <= template.maximumMessageSize)
                        checked += 1
                    }
                }
            }
        }
        #expect(checked == Self.replies.count * ttls.count * stales.count * totals.count)
    }
}
