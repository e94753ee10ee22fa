import DNSSDModel
import Foundation
import Testing

@testable import DiscoverAPI

@Suite("JSON writer")
struct JSONWriterTests {
    static let awkward = "quote\" backslash\\ nul\u{0} bell\u{7} newline\n tab\t é 日本 🎉 /slash"

    static let binding = ServiceBinding(
        priority: 1, target: awkward, port: 8443, alpn: ["h3", "h2", awkward], noDefaultAlpn: true,
        ipv4hint: ["192.0.2.1"], ipv6hint: ["2001:db8::1"], ech: "AEX+DQ==", mandatory: ["alpn", "port"],
        dohpath: "/q{?dns}", unknown: [UnknownSvcParam(key: 667, value: "aGVsbG8=")])

    static let timing = Timing(totalMs: 0.125, queries: [
        QueryTiming(name: "h3.lab.test.", type: "HTTPS", server: "[2001:db8::53]:53", transport: "tcp", ms: 302.5, rcode: "NOERROR"),
        QueryTiming(name: "x.", type: "A", server: "192.0.2.53:53", transport: "udp", ms: 3, rcode: "TIMEOUT"),
    ])

    /// Both encodings must decode to the same value.
    func check<T: Codable & Equatable & JSONWritable>(_ value: T) throws {
        var writer = JSONWriter()
        value.write(to: &writer)
        #expect(!writer.bytes.contains(0), "a raw NUL would end the varlink message")
        let fast = try JSONDecoder().decode(T.self, from: Data(writer.bytes))
        let slow = try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
        #expect(fast == value)
        #expect(fast == slow)
        // Same keys as JSONEncoder writes (no extra, none missing).
        let fastObject = try JSONDecoder().decode(JSONValue.self, from: Data(writer.bytes))
        let slowObject = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
        if case .object(let a) = fastObject, case .object(let b) = slowObject {
            #expect(Set(a.keys) == Set(b.keys))
        } else {
            Issue.record("not objects")
        }
    }

    @Test func resolveHTTPSReply() throws {
        try check(
            ResolveHTTPSReply(
                name: Self.awkward, queryName: "_8443._https.h3.lab.test.", aliasChain: ["a.", "b."],
                records: [Self.binding, ServiceBinding(priority: 2, target: ".")], h3: true, source: .expiredCache,
                ttl: 30, staleSeconds: 4, timing: Self.timing))
        try check(
            ResolveHTTPSReply(
                name: "n.", queryName: "n.", aliasChain: [], records: [], h3: false, source: .cache, ttl: 0,
                timing: Timing(totalMs: 0)))
        try check(
            ResolveHTTPSReply(
                name: "n.", queryName: "n.", aliasChain: [], records: [], h3: false, source: .network, ttl: 60,
                timing: Timing(totalMs: 1), note: "record 1 . ignored: mandatory key key999 is not supported \"x\""))
    }

    @Test func planAndAddresses() throws {
        try check(
            ConnectionPlanReply(
                host: "h.", port: 443, h3: true, h3Source: "altsvc",
                endpoints: [
                    PlanEndpoint(address: "2001:db8::1", port: 443, transport: "quic", alpn: ["h3"], target: "h.", priority: 1, ech: "AA=="),
                    PlanEndpoint(address: "192.0.2.1", port: 443, transport: "tcp", alpn: ["h2", "http/1.1"], target: "h.", priority: 1),
                ],
                source: .network, timing: Self.timing))
        try check(ResolveAddressesReply(name: "a.", addresses: ["192.0.2.1", "2001:db8::1"], source: .network, ttl: 300, timing: Self.timing))
    }

    @Test func browseRepliesWriteTheSameJSONAsJSONEncoder() throws {
        let service = DNSSDService(
            name: Self.awkward, type: "_tictactoe._tcp", domain: "local", interfaces: ["eth0"], host: "lab-a.local",
            port: 4242, addresses: ["192.0.2.1", "fe80::1%eth0"], txt: ["version": "2", "b": Self.awkward, "": "x"],
            txtRaw: [Array("version=2".utf8), [0xFF]])
        try check(BrowseReply(event: .added, service: service))
        try check(BrowseReply(event: .allForNow))
        try check(BrowseReply(services: [service, DNSSDService(name: "n", type: "_t._udp", domain: "local")]))
    }

    @Test func replyEnvelopeUsesTheWriter() throws {
        let reply = ResolveAddressesReply(name: "a.", addresses: [], source: .cache, ttl: 1, timing: Timing(totalMs: 0))
        let bytes = try VarlinkReply.encode(reply, continues: true)
        #expect(bytes.last == 0)
        let decoded = try VarlinkReplyMessage.decode(bytes.dropLast())
        #expect(decoded.continues)
        #expect(try decoded.parameters(ResolveAddressesReply.self) == reply)
    }

    @Test func nonFiniteNumbersStayValidJSON() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("a", Double.nan)
        writer.field("b", Double.infinity)
        writer.endObject()
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #"{"a":0,"b":0}"#)
    }

    /// Numbers are written without the standard library's formatting, with the same text.
    @Test func numbersAreWrittenAsTheStandardLibraryWritesThem() {
        var generator = SystemRandomNumberGenerator()
        var ints: [Int] = [0, 1, -1, 9, 10, 99, 100, 299, -300, .max, .min, .min + 1, 1_000_000_007]
        var doubles: [Double] = [
            0, -0.0, 0.001, 0.01, 0.012, 0.1, 0.125, 1, 1.5, 3, 12.345, 302.5, 99_999.999, 999_999_999.999, 1e9, 1e15,
            1e16, 0.0001, 0.0005, 1e-300, -1.5, 2.0 / 3, .pi, .nan, .infinity, -.infinity,
            Double.leastNonzeroMagnitude, .greatestFiniteMagnitude,
        ]
        for _ in 0..<2000 {
            ints.append(Int.random(in: .min ... .max, using: &generator))
            ints.append(Int.random(in: -100_000...100_000, using: &generator))
            // What Timing(attempts:milliseconds:) writes: milliseconds rounded to microseconds.
            let milliseconds = Double.random(in: 0..<(Bool.random() ? 5 : 5_000_000), using: &generator)
            doubles.append((milliseconds * 1000).rounded() / 1000)
            doubles.append(milliseconds)
        }
        for value in ints {
            var writer = JSONWriter()
            writer.int(value)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == String(value))
        }
        for value in doubles {
            var writer = JSONWriter()
            writer.double(value)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == (value.isFinite ? String(value) : "0"), "\(value)")
        }
    }
}
