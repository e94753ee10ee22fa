import DNSCore
import Testing

@testable import Resolver

/// The Swift fast path of `DNSMessage.parse` against ldns, which stays the reference: where the fast path accepts
/// a message, ldns must accept it too and give the same `DNSMessage`.
@Suite("Common reply parser against ldns")
struct CommonReplyParserTests {
    typealias M = TestMessage

    /// A pointer to offset `offset` (RFC 1035 §4.1.4).
    static func pointer(_ offset: Int) -> [UInt8] { [0xC0 | UInt8(offset >> 8), UInt8(offset & 0xFF)] }

    /// Replies as upstreams send them: compressed owners and targets, negative answers with a SOA, OPT last.
    static let corpus: [[UInt8]] = {
        var out: [[UInt8]] = []
        let question = M.question(M.name("www.Example.com"), .a)  // at offset 12; "example.com" at 16
        var positive = M(questions: [question])
        positive.answers = [
            M.record(pointer(12), .cname, rdata: [4] + Array("Edge".utf8) + pointer(16)),
            M.record(M.name("edge.example.com"), .a, ttl: 60, rdata: [192, 0, 2, 1]),
            M.record(pointer(45), .a, ttl: 60, rdata: [192, 0, 2, 2]),
        ]
        positive.additional = [M.opt(udpSize: 1232, dnssecOK: true)]
        out.append(positive.bytes)

        var aaaa = M(questions: [M.question(M.name("v6.example.net"), .aaaa)])
        aaaa.answers = [M.record(pointer(12), .aaaa, rdata: Array(repeating: 0x20, count: 16))]
        out.append(aaaa.bytes)

        var negative = M(questions: [M.question(M.name("nope.lab.test"), .a)])
        negative.flags = 0x8183  // NXDOMAIN
        negative.authority = [
            M.record(
                pointer(17), .soa, ttl: 3600,
                rdata: [2] + Array("ns".utf8) + pointer(17) + [10] + Array("hostmaster".utf8) + pointer(17)
                    + M.u32(2026) + M.u32(3600) + M.u32(900) + M.u32(86400) + M.u32(300))
        ]
        negative.additional = [M.opt(extendedRCode: 0)]
        out.append(negative.bytes)

        var mixed = M(questions: [M.question(M.name("example.org"), .mx)])
        mixed.answers = [
            M.record(pointer(12), .mx, rdata: M.u16(10) + [4] + Array("mail".utf8) + pointer(12)),
            M.record(pointer(12), .txt, rdata: [5] + Array("hello".utf8) + [0] + [3] + Array("a;b".utf8)),
            M.record(pointer(12), .ns, rdata: M.name("ns1.example.org")),
            M.record(M.name("1.2.0.192.in-addr.arpa"), .ptr, rdata: M.name("Host.Example.org")),
            M.record(M.name("old.example.org"), RRType(39), rdata: pointer(12)),
        ]
        mixed.additional = [M.record(M.name("odd\\.name\\@x.example.org"), .a, rdata: [1, 2, 3, 4])]
        out.append(mixed.bytes)

        var badvers = M(questions: [M.question(M.name("example.com"), .a)])
        badvers.flags = 0x8180
        badvers.additional = [M.opt(udpSize: 4096, extendedRCode: 1, version: 0)]
        out.append(badvers.bytes)

        // A validating upstream's SERVFAIL: padding (RFC 7830), then two Extended DNS Errors (RFC 8914).
        var failed = M(questions: [M.question(M.name("bogus.example"), .a)])
        failed.flags = 0x8182
        failed.additional = [
            M.opt(
                options: M.ednsOption(12, [0, 0, 0]) + M.ednsOption(15, M.u16(6) + Array("validation failure".utf8))
                    + M.ednsOption(15, M.u16(22)))
        ]
        out.append(failed.bytes)

        var root = M(questions: [M.question([0], .ns)])
        root.answers = [M.record([0], .ns, ttl: 518400, rdata: M.name("a.root-servers.net"))]
        out.append(root.bytes)
        return out
    }()

    /// Messages the fast path leaves to ldns; each must still parse (or fail) as ldns decides.
    static let leftToLDNS: [[UInt8]] = {
        var out: [[UInt8]] = []
        var https = M(questions: [M.question(M.name("h3.example.com"), .https)])
        let alpnH3 = M.u16(1) + M.u16(3) + [2] + Array("h3".utf8)
        https.answers = [M.record(pointer(12), .https, rdata: M.u16(1) + [0] + alpnH3)]
        out.append(https.bytes)
        var twoOPT = M(questions: [M.question(M.name("example.com"), .a)])
        twoOPT.additional = [M.opt(), M.opt()]
        out.append(twoOPT.bytes)
        var noQuestion = M()
        noQuestion.answers = [M.record(M.name("example.com"), .a, rdata: [1, 2, 3, 4])]
        out.append(noQuestion.bytes)
        var forward = M(questions: [M.question(pointer(40), .a)])
        forward.answers = [M.record(M.name("example.com"), .a, rdata: [1, 2, 3, 4])]
        out.append(forward.bytes)
        var shortA = M(questions: [M.question(M.name("example.com"), .a)])
        shortA.answers = [M.record(pointer(12), .a, rdata: [1, 2, 3])]
        out.append(shortA.bytes)
        var trailing = M(questions: [M.question(M.name("example.com"), .a)]).bytes
        trailing.append(0)
        out.append(trailing)
        return out
    }()

    static func ldns(_ bytes: [UInt8]) -> DNSMessage? {
        guard let header = try? DNSHeader.parse(bytes) else { return nil }
        return try? DNSMessage.parseWithLDNS(bytes, header: header)
    }

    static func fast(_ bytes: [UInt8]) -> DNSMessage? {
        guard let header = try? DNSHeader.parse(bytes) else { return nil }
        return CommonReplyParser.parse(bytes, header: header)
    }

    @Test("Every reply of the corpus is read by the fast path, exactly as ldns reads it")
    func corpusMatchesLDNS() throws {
        for (index, bytes) in Self.corpus.enumerated() {
            let fast = try #require(Self.fast(bytes), "corpus message \(index) left to ldns")
            let reference = try #require(Self.ldns(bytes), "ldns rejects corpus message \(index)")
            #expect(fast == reference, "corpus message \(index)")
        }
        // Spot checks of what both give, so that a shared mistake shows too.
        let positive = try #require(Self.fast(Self.corpus[0]))
        #expect(positive.question == DNSQuestion(name: "www.example.com.", type: .a))
        #expect(positive.answer.map(\.name) == ["www.example.com.", "edge.example.com.", "edge.example.com."])
        #expect(positive.answer[0].rdata == [4] + Array("Edge".utf8) + M.name("example.com"))
        #expect(positive.edns == EDNSInfo(udpPayloadSize: 1232, version: 0, dnssecOK: true))
        #expect(positive.additional.isEmpty)
        let badvers = try #require(Self.fast(Self.corpus[4]))
        #expect(badvers.rcode == .badVers)
        let mixed = try #require(Self.fast(Self.corpus[3]))
        #expect(mixed.additional.first?.name == "odd\\.name\\@x.example.org.")
        let failed = try #require(Self.fast(Self.corpus[5]))
        #expect(failed.rcode == .servFail)
        #expect(
            failed.edns?.extendedErrors == [
                ExtendedDNSError(code: 6, text: "validation failure"), ExtendedDNSError(code: 22, text: ""),
            ])
        #expect(failed.edns?.padding == 3 && positive.edns?.padding == nil)
    }

    @Test("What the fast path leaves aside, DNSMessage.parse still reads through ldns")
    func leftAsideGoesToLDNS() {
        for (index, bytes) in Self.leftToLDNS.enumerated() {
            #expect(Self.fast(bytes) == nil, "message \(index) should be left to ldns")
            let viaParse = try? DNSMessage.parse(bytes)
            #expect(viaParse == Self.ldns(bytes), "message \(index)")
        }
        // The HTTPS answer is a normal reply: ldns reads it.
        #expect(Self.ldns(Self.leftToLDNS[0])?.answer.first?.type == .https)
    }

    @Test("Mutated replies (30 000): whatever the fast path accepts, ldns accepts the same way")
    func mutationsAgreeWithLDNS() {
        var generator = SplitMix64(seed: 0x5EED_D15C_0FE2)  // AltSvcHeaderTests.swift: replayable
        var accepted = 0
        var rejected = 0
        for round in 0..<30_000 {
            var bytes = Self.corpus[round % Self.corpus.count]
            for _ in 0...Int(generator.next() % 3) {
                let position = Int(generator.next() % UInt64(bytes.count))
                switch generator.next() % 4 {
                case 0: bytes[position] = UInt8(truncatingIfNeeded: generator.next())
                case 1: bytes[position] ^= UInt8(1) << (generator.next() % 8)
                case 2: bytes.removeSubrange(position...)
                default: bytes.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                }
                if bytes.isEmpty { bytes = [0] }
            }
            guard let fast = Self.fast(bytes) else {
                rejected += 1
                continue
            }
            accepted += 1
            let reference = Self.ldns(bytes)
            #expect(fast == reference, "mutation \(round): \(bytes)")
            if fast != reference { return }
        }
        // Both outcomes must occur, or the test would prove nothing.
        #expect(accepted > 300)
        #expect(rejected > 300)
    }

    @Test("Queries are written byte for byte as ldns wrote them")
    func queryMatchesLDNS() throws {
        let names = ["example.com", "WWW.Example.COM.", ".", "_dns.resolver.arpa", "a\\.b.example", "xn--bcher-kva.ch"]
        let types: [RRType] = [.a, .aaaa, .https, .svcb, RRType(43), RRType(48), RRType(65000)]
        for text in names {
            let name = try DNSName(text)
            for type in types {
                for (dnssecOK, size) in [(false, UInt16(1232)), (true, UInt16(4096)), (true, UInt16(512))] {
                    let ours = try DNSQuery.make(
                        name: name, type: type, id: 0xA55A, dnssecOK: dnssecOK, ednsBufferSize: size)
                    let reference = try DNSQuery.makeWithLDNS(
                        name: name, type: type, id: 0xA55A, dnssecOK: dnssecOK, ednsBufferSize: size)
                    #expect(ours == reference, "\(text) \(type) DO=\(dnssecOK) \(size)")
                }
            }
        }
        let bind = try DNSName("version.bind")
        let chaos = try DNSQuery.make(name: bind, type: RRType(16), class: RRClass(3), id: 1)
        #expect(chaos == (try DNSQuery.makeWithLDNS(name: bind, type: RRType(16), class: RRClass(3), id: 1)))
    }
}
