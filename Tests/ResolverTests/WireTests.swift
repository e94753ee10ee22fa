import DNSCore
import Testing

@testable import Resolver

@Suite("DNS wire codec")
struct WireTests {
    // MARK: Query building

    @Test("A query has RD, one question, and an EDNS0 OPT with a 1232-byte buffer")
    func queryLayout() throws {
        let bytes = try DNSQuery.make(name: "WWW.Example.com", type: .https, id: 0xBEEF)
        let expected = wireBytes(
            """
            beef 0100 0001 0000 0000 0001
            03777777 076578616d706c65 03636f6d 00 0041 0001
            00 0029 04d0 00 00 0000 0000
            """)
        #expect(bytes == expected)
    }

    @Test("The DO bit and buffer size are set as asked, and the query parses back")
    func queryRoundTrip() throws {
        let bytes = try DNSQuery.make(name: "example.com.", type: .aaaa, id: 7, dnssecOK: true, ednsBufferSize: 4096)
        let message = try DNSMessage.parse(bytes)
        #expect(message.id == 7)
        #expect(message.header.rd)
        #expect(!message.header.qr)
        #expect(message.question == DNSQuestion(name: "example.com.", type: .aaaa))
        #expect(message.edns == EDNSInfo(udpPayloadSize: 4096, version: 0, dnssecOK: true))
    }

    @Test("A reply with two TSIG or two OPT records is malformed, and never reaches ldns (which leaks the first)")
    func repeatedMetaRecordsAreRejected() throws {
        // The fuzzer's input: ARCOUNT 256, two TSIG records (the second with no RDATA), then bytes cut short.
        let twoTSIG = wireBytes(
            """
            0000 0000 0000 0000 0000 0100
            00 00fa ffff ff000000 0001 00
            00 00fa ffff ff000000 0000
            00 0000 0000 006c
            """)
        #expect(EDNSOptionScan.repeatedOPTOrTSIG(in: twoTSIG) == "2 TSIG records (RFC 8945 allows one)")
        let error = #expect(throws: DNSWireError.self) { try DNSMessage.parse(twoTSIG) }
        #expect(error?.code == .malformedMessage && error?.message.contains("TSIG") == true)
        // A reply for www.example.com A with two OPT records, each with an option (ldns leaks the first's data).
        let twoOPT = wireBytes(
            """
            beef 8180 0001 0000 0000 0002
            03777777 076578616d706c65 03636f6d 00 0001 0001
            00 0029 04d0 00 00 0000 0004 000a 0000
            00 0029 04d0 00 00 0000 0004 000a 0000
            """)
        #expect(EDNSOptionScan.repeatedOPTOrTSIG(in: twoOPT) == "2 OPT records (RFC 6891 allows one)")
        #expect(throws: DNSWireError.self) { try DNSMessage.parse(twoOPT) }
        // One of each is what a signed EDNS reply has: not refused.
        let one = Array(twoOPT.prefix(twoOPT.count - 15))
        var oneOPT = one
        oneOPT[11] = 1
        #expect(EDNSOptionScan.repeatedOPTOrTSIG(in: oneOPT) == nil)
        #expect(try DNSMessage.parse(oneOPT).edns?.udpPayloadSize == 1232)
        // One TSIG whose algorithm name runs past its RDLENGTH: ldns reads on into the next record, takes the bytes
        // after for a second TSIG and leaks the first (the reply fuzzer's input, minimized). Counted by RDLENGTH
        // there is one TSIG; read by ldns at each record's own offset, the TSIG does not end where it should.
        let overrun = wireBytes(
            """
            0000 0000 0000 0000 0000 0100
            00 00fa ffff 00000000 0002 0100
            00 0000 faff 00000001 0000
            """)
        #expect(EDNSOptionScan.repeatedOPTOrTSIG(in: overrun) == nil)
        let misread = #expect(throws: DNSWireError.self) { try DNSMessage.parse(overrun) }
        #expect(misread?.code == .malformedMessage, "\(String(describing: misread))")
        #expect(misread?.message.contains("RDLENGTH") == true, "\(String(describing: misread))")
        #expect(LDNSWire.refusal(oneOPT) == nil)
    }

    @Test("A query for an invalid name throws InvalidNameError")
    func queryInvalidName() {
        #expect(throws: InvalidNameError.self) { try DNSQuery.make(name: "a..b", type: .a, id: 1) }
    }

    // MARK: Names

    static let validNames: [(String, String)] = [
        ("example.com", "example.com."),
        ("Example.COM.", "example.com."),
        (".", "."),
        ("_8443._https.example.com", "_8443._https.example.com."),
        ("a\\.b.example", "a\\.b.example."),
        ("a\\065.example", "aa.example."),  // \065 is "A", lowercased
        ("x\\000y.example", "x\\000y.example."),
        (String(repeating: "a", count: 63) + ".com", String(repeating: "a", count: 63) + ".com."),
    ]

    @Test("Valid names normalise to lowercase absolute text", arguments: validNames)
    func validName(input: String, text: String) throws {
        #expect(try DNSName(input).text == text)
    }

    static let invalidNames: [(String, String)] = [
        ("", "empty name"),
        ("a..b", "empty label"),
        (".example.com", "empty label"),
        ("example.com..", "empty label"),
        (String(repeating: "a", count: 64) + ".com", "label longer than 63 octets"),
        ("bücher.de", "non-ASCII character; IDNA is not supported, use the xn-- form"),
        ("a b.com", "space or control character"),
        ("abc\\", "escape at end of name"),
        ("a\\25.com", "\\DDD escape needs three digits"),
        ("a\\256.com", "\\DDD escape above 255"),
    ]

    @Test("Invalid names are rejected with a reason", arguments: invalidNames)
    func invalidName(input: String, reason: String) {
        #expect(throws: InvalidNameError(name: input, reason: reason)) { try DNSName(input) }
    }

    @Test("Names may use 255 wire octets but not 256")
    func nameLengthLimit() throws {
        // 4 labels of 63 octets = 4 * 64 + 1 = 257 wire octets; 3 of 63 plus one of 61 = 255.
        let label63 = String(repeating: "a", count: 63)
        let fits = [label63, label63, label63, String(repeating: "b", count: 61)].joined(separator: ".")
        #expect(try DNSName(fits).wire.count == 255)
        let tooLong = [label63, label63, label63, String(repeating: "b", count: 62)].joined(separator: ".")
        #expect(throws: InvalidNameError.self) { try DNSName(tooLong) }
    }

    @Test("Names compare case-insensitively")
    func nameCase() throws {
        #expect(try DNSName("WWW.Example.COM") == DNSName("www.example.com."))
        #expect(try DNSName("www.example.com") != DNSName("www.example.org"))
    }

    @Test("Wire names reject compression pointers, extended labels and overruns")
    func wireNames() {
        #expect(throws: DNSWireError.self) { try DNSName(wire: wireBytes("03616263 c00c")) }
        #expect(throws: DNSWireError.self) { try DNSName(wire: wireBytes("43616263 00")) }
        #expect(throws: DNSWireError.self) { try DNSName(wire: wireBytes("05616263 00")) }
        #expect(throws: DNSWireError.self) { try DNSName(wire: wireBytes("03616263")) }
        #expect(throws: DNSWireError.self) { try DNSName(wire: wireBytes("03616263 00 00")) }
        #expect((try? DNSName(wire: wireBytes("03414243 00")))?.text == "abc.")
    }

    @Test("HTTPS query names use the _PORT._https prefix except for port 443 (RFC 9460 §9.1)")
    func httpsQueryName() throws {
        #expect(try HTTPSQueryName.make(host: "Example.com", port: 443) == "example.com.")
        #expect(try HTTPSQueryName.make(host: "example.com", port: 8443) == "_8443._https.example.com.")
        #expect(throws: InvalidNameError.self) { try HTTPSQueryName.make(host: "a..b", port: 443) }
        let label63 = String(repeating: "a", count: 63)
        let long = [label63, label63, label63, String(repeating: "b", count: 50)].joined(separator: ".")
        #expect(throws: InvalidNameError.self) { try HTTPSQueryName.make(host: long, port: 8443) }
    }

    // MARK: Parsing responses

    static func cnameResponse(qname: String = "www.example.com", type: RRType = .a) -> TestMessage {
        var message = TestMessage()
        message.questions = [TestMessage.question(TestMessage.name(qname), type)]
        // www.example.com CNAME example.com (compressed: pointer to offset 16, "example.com" in the question)
        message.answers = [
            TestMessage.record(wireBytes("c00c"), .cname, ttl: 60, rdata: wireBytes("c010")),
            TestMessage.record(wireBytes("c010"), .a, ttl: 120, rdata: [192, 0, 2, 1]),
        ]
        return message
    }

    @Test("A response with compression decodes names lowercased and RDATA uncompressed")
    func parseResponse() throws {
        var built = Self.cnameResponse(qname: "WWW.Example.COM")
        built.flags = 0x8580  // QR AA RD RA
        let message = try DNSMessage.parse(built.bytes)
        #expect(message.id == 0x1234)
        #expect(message.header.qr && message.header.aa && message.header.rd && message.header.ra)
        #expect(!message.header.tc)
        #expect(message.rcode == .noError)
        #expect(message.question == DNSQuestion(name: "www.example.com.", type: .a))
        #expect(message.answer.count == 2)
        #expect(message.answer[0].name == "www.example.com.")
        #expect(message.answer[0].type == .cname)
        #expect(message.answer[0].ttl == 60)
        #expect(message.answer[0].rdata == TestMessage.name("example.com"))
        #expect(try message.answer[0].cnameTarget() == "example.com.")
        #expect(message.answer[1].name == "example.com.")
        #expect(try message.answer[1].ipv4Address() == "192.0.2.1")
        #expect(message.edns == nil)
    }

    @Test("The extended RCODE combines the header and OPT bits (RFC 6891 §6.1.3)")
    func extendedRCode() throws {
        var built = TestMessage()
        built.questions = [TestMessage.question(TestMessage.name("example.com"), .a)]
        built.additional = [TestMessage.opt(udpSize: 1400, extendedRCode: 1)]
        let message = try DNSMessage.parse(built.bytes)
        #expect(message.rcode == .badVers)
        #expect(message.rcode.description == "BADVERS")
        #expect(message.edns?.udpPayloadSize == 1400)
        #expect(message.additional.isEmpty)

        built.flags = 0x8183  // NXDOMAIN
        built.additional = []
        #expect(try DNSMessage.parse(built.bytes).rcode == .nxDomain)
    }

    @Test("HTTPS RDATA comes out byte for byte, including SvcParams ldns does not check")
    func httpsRDataVerbatim() throws {
        // Unsorted, duplicate keys: ldns accepts them, our SVCB parser must see the raw bytes.
        let rdata = wireBytes("0001 00 0003 0002 01bb 0001 0003 026832 0001 0003 026833")
        var built = TestMessage()
        built.questions = [TestMessage.question(TestMessage.name("example.com"), .https)]
        built.answers = [TestMessage.record(wireBytes("c00c"), .https, rdata: rdata)]
        let message = try DNSMessage.parse(built.bytes)
        #expect(message.answer.first?.rdata == rdata)
        #expect(message.answer.first?.type == .https)
    }

    // MARK: Matching

    @Test("An answer matches only its own ID, name (any case), type and class")
    func matching() throws {
        let message = try DNSMessage.parse(Self.cnameResponse().bytes)
        let question = DNSQuestion(name: "WWW.example.com", type: .a)
        #expect(message.matches(id: 0x1234, question: question))
        #expect(!message.matches(id: 0x1235, question: question))
        #expect(!message.matches(id: 0x1234, question: DNSQuestion(name: "example.com", type: .a)))
        #expect(!message.matches(id: 0x1234, question: DNSQuestion(name: "www.example.com", type: .aaaa)))
        #expect(!message.matches(id: 0x1234, question: DNSQuestion(name: "www.example.com", type: .a, class: .ch)))

        var query = Self.cnameResponse()
        query.flags = 0x0100  // QR clear: a query, not a response
        #expect(!(try DNSMessage.parse(query.bytes)).matches(id: 0x1234, question: question))

        var noQuestion = Self.cnameResponse()
        noQuestion.questions = []
        noQuestion.answers = []
        #expect(!(try DNSMessage.parse(noQuestion.bytes)).matches(id: 0x1234, question: question))
    }

    // MARK: Malformed input

    static let malformed: [(String, [UInt8])] = [
        ("empty", []),
        ("11 bytes", Array(repeating: 0, count: 11)),
        ("question count without question", wireBytes("1234 8180 0001 0000 0000 0000")),
        ("question name cut", wireBytes("1234 8180 0001 0000 0000 0000 07 6578616d")),
        ("question without type", wireBytes("1234 8180 0001 0000 0000 0000 00")),
        ("answer count without answer", wireBytes("1234 8180 0000 0001 0000 0000")),
        ("rdlength past end", wireBytes("1234 8180 0000 0001 0000 0000 00 0001 0001 0000003c 0004 c000")),
        ("pointer loop", wireBytes("1234 8180 0001 0000 0000 0000 c00c 0001 0001")),
        ("pointer past end", wireBytes("1234 8180 0001 0000 0000 0000 c0ff 0001 0001")),
        ("label past end", wireBytes("1234 8180 0001 0000 0000 0000 3f 61")),
    ]

    @Test("Malformed packets throw and never crash", arguments: malformed)
    func malformedPacket(label: String, bytes: [UInt8]) {
        #expect(throws: DNSWireError.self, "\(label)") { try DNSMessage.parse(bytes) }
    }

    @Test("The header of a truncated response is still readable, with TC")
    func truncatedHeader() throws {
        // TC set, claims one answer that is cut off after the owner name.
        let bytes = wireBytes("abcd 8380 0001 0001 0000 0000 00 0041 0001 00 0041")
        #expect(throws: DNSWireError.self) { try DNSMessage.parse(bytes) }
        let header = try DNSHeader.parse(bytes)
        #expect(header.id == 0xABCD)
        #expect(header.tc)
        #expect(header.qr)
        #expect(throws: DNSWireError(.truncated, "shorter than a DNS header")) {
            try DNSHeader.parse([0, 1, 2])
        }
    }

    // MARK: RDATA decoders

    static let ipv6Texts: [(String, String)] = [
        ("20010db8000000000000000000000001", "2001:db8::1"),
        ("00000000000000000000000000000001", "::1"),
        ("00000000000000000000000000000000", "::"),
        ("20010db8000000010000000000000001", "2001:db8:0:1::1"),  // longest run wins
        ("20010db8000000000001000000000001", "2001:db8::1:0:0:1"),  // first of equal runs
        ("20010db8000100010001000100010001", "2001:db8:1:1:1:1:1:1"),
        ("20010db8000000010001000100010001", "2001:db8:0:1:1:1:1:1"),  // a single zero group is not compressed
        ("00000000000000000000ffffc0000201", "::ffff:192.0.2.1"),
        ("fe800000000000000000000000000abc", "fe80::abc"),
    ]

    @Test("AAAA text follows RFC 5952", arguments: ipv6Texts)
    func ipv6Text(hex: String, text: String) throws {
        let record = ResourceRecord(name: "x.", type: .aaaa, ttl: 1, rdata: wireBytes(hex))
        #expect(try record.ipv6Address() == text)
    }

    @Test("A and AAAA of the wrong size throw")
    func addressSizes() {
        #expect(throws: DNSWireError.self) {
            try ResourceRecord(name: "x.", type: .a, ttl: 1, rdata: [1, 2, 3]).ipv4Address()
        }
        #expect(throws: DNSWireError.self) {
            try ResourceRecord(name: "x.", type: .aaaa, ttl: 1, rdata: [UInt8](repeating: 0, count: 4)).ipv6Address()
        }
        #expect(throws: DNSWireError.self) {
            try ResourceRecord(name: "x.", type: .aaaa, ttl: 1, rdata: [1, 2, 3, 4]).ipv4Address()
        }
    }

    static func soaRecord(ttl: UInt32, minimum: UInt32) -> [UInt8] {
        let rdata =
            TestMessage.name("ns.example.com") + TestMessage.name("admin.example.com") + TestMessage.u32(2024)
            + TestMessage.u32(3600) + TestMessage.u32(600) + TestMessage.u32(86400) + TestMessage.u32(minimum)
        return TestMessage.record(TestMessage.name("example.com"), .soa, ttl: ttl, rdata: rdata)
    }

    @Test(
        "The negative TTL is min(SOA TTL, SOA MINIMUM) (RFC 2308 §5)",
        arguments: [(3600, 300, 300), (60, 300, 60), (0, 300, 0)] as [(UInt32, UInt32, UInt32)])
    func negativeTTL(ttl: UInt32, minimum: UInt32, expected: UInt32) throws {
        var built = TestMessage()
        built.flags = 0x8183
        built.questions = [TestMessage.question(TestMessage.name("nope.example.com"), .a)]
        built.authority = [Self.soaRecord(ttl: ttl, minimum: minimum)]
        let message = try DNSMessage.parse(built.bytes)
        #expect(message.rcode == .nxDomain)
        #expect(try message.authority[0].soa().minimum == minimum)
        #expect(try message.authority[0].soa().mname == "ns.example.com.")
        #expect(message.negativeCacheTTL == expected)
    }

    @Test("Without an SOA in the authority section there is no negative TTL")
    func negativeTTLWithoutSOA() throws {
        var built = TestMessage()
        built.questions = [TestMessage.question(TestMessage.name("example.com"), .a)]
        #expect(try DNSMessage.parse(built.bytes).negativeCacheTTL == nil)
        #expect(throws: DNSWireError.self) {
            try ResourceRecord(name: "x.", type: .soa, ttl: 1, rdata: TestMessage.name("a.b") + [0, 0]).soa()
        }
    }

    /// Negative caching reads only MINIMUM (`soaMinimum`, names skipped): it must agree with the full `soa()`
    /// decoder on every RDATA, valid or not (truncated, compressed, extended labels, names over 255 octets,
    /// bytes missing or left over).
    @Test("The SOA MINIMUM fast path agrees with the full decoder")
    func soaMinimumAgreesWithSOA() {
        var generator = SystemRandomNumberGenerator()
        let valid = TestMessage.name("ns.example.com") + TestMessage.name("hostmaster.example.com")
            + [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0x0E, 0x10]
        let label: [UInt8] = [63] + [UInt8](repeating: 0x61, count: 63)
        let long: [UInt8] = label + label + label + label + [0]
        let twenty = [UInt8](repeating: 1, count: 20)
        var cases: [[UInt8]] = [valid, Array(valid.dropLast()), valid + [0], [0, 0] + twenty, [0xC0, 0x0C, 0] + twenty,
            [0x41, 0, 0] + twenty, long + [0] + twenty, [], [0]]
        for _ in 0..<20_000 {
            var rdata = valid
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: rdata[Int.random(in: 0..<rdata.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                case 1: if !rdata.isEmpty { rdata.remove(at: Int.random(in: 0..<rdata.count, using: &generator)) }
                default: rdata.insert(UInt8.random(in: 0...70, using: &generator), at: Int.random(in: 0...rdata.count, using: &generator))
                }
            }
            cases.append(rdata)
        }
        var agreedValid = 0
        for rdata in cases {
            let record = ResourceRecord(name: "x.", type: .soa, ttl: 1, rdata: rdata)
            let full = try? record.soa().minimum
            #expect(record.soaMinimum() == full, "\(rdata)")
            if full != nil { agreedValid += 1 }
        }
        #expect(agreedValid > 100, "the mutations must leave some SOAs valid")
        #expect(ResourceRecord(name: "x.", type: .soa, ttl: 1, rdata: valid).soaMinimum() == 3600)
        #expect(ResourceRecord(name: "x.", type: .a, ttl: 1, rdata: valid).soaMinimum() == nil)
    }

    @Test("Types, classes and rcodes print their mnemonics")
    func mnemonics() {
        #expect(RRType.https.description == "HTTPS")
        #expect(RRType(rawValue: 64).description == "SVCB")
        #expect(RRType(999).description == "TYPE999")
        #expect(RRType(48).description == "DNSKEY" && RRType(43).description == "DS")
        #expect(RRType(257).description == "CAA")
        #expect(RRClass.in.description == "IN")
        #expect(RCode.servFail.description == "SERVFAIL")
        #expect(RCode(4000).description == "RCODE4000")
    }

    @Test("Base64 matches RFC 4648 §10 test vectors")
    func base64() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=",
            "foobar": "Zm9vYmFy"]
        for (input, output) in vectors { #expect(Base64.encode(Array(input.utf8)) == output) }
    }
}

@Suite struct PlainNameFastPathTests {
    @Test func agreesWithTheFullParser() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcXYZ09-_.".utf8)
        for _ in 0..<20_000 {
            let count = Int.random(in: 1...40, using: &generator)
            let text = String(decoding: (0..<count).map { _ in alphabet.randomElement(using: &generator)! }, as: UTF8.self)
            let full = (try? DNSName(text)).flatMap { $0.isRoot ? nil : $0.text }
            if let plain = DNSName.plainNormalized(text) {
                #expect(plain == full, "\(text)")
            }
        }
    }

    /// `DNSName(_:)` takes a one-pass path for plain names: the same labels (and errors) as the full parser.
    @Test func plainLabelsAgreeWithTheFullParser() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcXYZ09-_.".utf8)
        for _ in 0..<20_000 {
            let count = Int.random(in: 1...80, using: &generator)
            let text = String(decoding: (0..<count).map { _ in alphabet.randomElement(using: &generator)! }, as: UTF8.self)
            let full = try? DNSName.parseLabels(text).map(DNSName.lowercased(label:))
            #expect((try? DNSName(text).labels) == full, "\(text)")
        }
        let label63 = String(repeating: "A", count: 63)
        for text in [label63 + ".x", label63 + "a.x", "\(label63).\(label63).\(label63).\(String(repeating: "b", count: 61))",
            "\(label63).\(label63).\(label63).\(String(repeating: "b", count: 62))"]
        {
            let full = try? DNSName.parseLabels(text).map(DNSName.lowercased(label:))
            #expect((try? DNSName(text).labels) == full, "\(text)")
        }
    }

    /// The query and the stub's records write plain names from their text in one pass: the same bytes as the full
    /// parser's wire form, accepted exactly where `plainNormalized` is, and nothing written otherwise.
    @Test func plainWireAgreesWithTheFullParser() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcXYZ09-_.".utf8)
        let label63 = String(repeating: "A", count: 63)
        var texts = [label63 + ".x", label63 + "a.x", "\(label63).\(label63).\(label63).\(String(repeating: "b", count: 61))",
            "\(label63).\(label63).\(label63).\(String(repeating: "b", count: 62))", ".", "", "a..b", ".a",
            "my printer.local", "a\\.b", "caf\u{E9}.example", "WWW.Example.COM", "h3.lab.test."]
        for _ in 0..<20_000 {
            let count = Int.random(in: 1...80, using: &generator)
            texts.append(String(decoding: (0..<count).map { _ in alphabet.randomElement(using: &generator)! }, as: UTF8.self))
        }
        var accepted = 0
        for text in texts {
            let prefix: [UInt8] = [0xAA, 0xBB]
            var out = prefix
            let written = DNSName.appendPlainWire(text, to: &out)
            #expect(written == (DNSName.plainNormalized(text) != nil), "\(text)")
            if written {
                accepted += 1
                #expect(out == prefix + ((try? DNSName(text).wire) ?? []), "\(text)")
            } else {
                #expect(out == prefix, "\(text)")
            }
            // The variant that also normalises: the same bytes, and plainNormalized's text.
            var normalizedOut = prefix
            #expect(DNSName.appendPlainWireNormalized(text, to: &normalizedOut) == DNSName.plainNormalized(text), "\(text)")
            #expect(normalizedOut == out, "\(text)")
        }
        #expect(accepted > 1_000, "the random names must exercise the fast path")
    }

    @Test(arguments: [
        ("www.Example.COM", "www.example.com."), ("h3.lab.test.", "h3.lab.test."), ("_443._https.x", "_443._https.x."),
    ])
    func plainNames(_ text: String, _ expected: String) {
        #expect(DNSName.plainNormalized(text) == expected)
    }

    @Test(arguments: [".", "", "a..b", ".a", "my printer.local", "a\\.b", "caf\u{E9}.example",
        String(repeating: "a", count: 64) + ".x", Array(repeating: "abcdefghi", count: 26).joined(separator: ".")])
    func otherNamesGoToTheFullParser(_ text: String) {
        #expect(DNSName.plainNormalized(text) == nil)
    }
}

@Suite struct HostAndPortTests {
    @Test(arguments: [
        ("192.0.2.53", "192.0.2.53", 53), ("192.0.2.53:5353", "192.0.2.53", 5353), ("[2001:db8::1]", "2001:db8::1", 53),
        ("[2001:db8::1]:853", "2001:db8::1", 853), ("2001:db8::1", "2001:db8::1", 53), (" ns.example:54 ", "ns.example", 54),
    ])
    func parses(_ text: String, _ host: String, _ port: Int) throws {
        let parsed = try HostAndPort(parsing: text)
        #expect(parsed.host == host && parsed.port == port)
    }

    @Test(arguments: ["", "[::1", "[::1]x", "[::1]:", "a:b", "a:0", "a:65536", ":53"])
    func refuses(_ text: String) {
        #expect(throws: HostAndPort.ParseError.self) { try HostAndPort(parsing: text) }
    }
}
