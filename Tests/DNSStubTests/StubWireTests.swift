@testable import DNSCore
import Testing

@testable import DNSStub
@testable import Resolver

/// Query messages built by hand, so every malformation is exact.
enum Wire {
    static func name(_ labels: [String]) -> [UInt8] {
        labels.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }

    static func header(id: UInt16 = 0x1234, flags: UInt16 = 0x0100, qd: UInt16 = 1, an: UInt16 = 0, ns: UInt16 = 0,
        ar: UInt16 = 0) -> [UInt8]
    {
        [id, flags, qd, an, ns, ar].flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    static func opt(payload: UInt16 = 1232, version: UInt8 = 0, dnssecOK: Bool = false, options: [UInt8] = [])
        -> [UInt8]
    {
        [0, 0, 41, UInt8(payload >> 8), UInt8(payload & 0xFF), 0, version, dnssecOK ? 0x80 : 0, 0,
            UInt8(options.count >> 8), UInt8(options.count & 0xFF)] + options
    }

    static func query(
        _ labels: [String] = ["Www", "Example", "com"], type: UInt16 = 1, flags: UInt16 = 0x0100, edns: [UInt8]? = nil
    ) -> [UInt8] {
        header(flags: flags, ar: edns == nil ? 0 : 1) + name(labels) + [UInt8(type >> 8), UInt8(type & 0xFF), 0, 1]
            + (edns ?? [])
    }
}

@Suite struct StubQueryParsingTests {
    @Test func plainQueryKeepsTheQuestionBytesAndLowercasesTheName() throws {
        let bytes = Wire.query()
        let query = try StubQuery.parse(bytes)
        #expect(query.id == 0x1234)
        #expect(query.recursionDesired)
        #expect(query.name.text == "www.example.com.")
        #expect(query.type == .a)
        #expect(query.class == .in)
        #expect(query.edns == nil)
        #expect(query.questionWire == Array(bytes[12...]))
    }

    @Test func ednsPayloadVersionAndDOBitAreReadAndOptionsSkipped() throws {
        let query = try StubQuery.parse(Wire.query(edns: Wire.opt(payload: 4096, dnssecOK: true, options: [0, 3, 0, 0])))
        #expect(query.edns == EDNSRequest(udpPayloadSize: 4096, version: 0, dnssecOK: true))
    }

    @Test func payloadBelow512CountsAs512() throws {
        let query = try StubQuery.parse(Wire.query(edns: Wire.opt(payload: 100)))
        #expect(query.edns?.udpPayloadSize == 512)
        #expect(StubReply.sizeLimit(for: query, overTCP: false) == 512)
    }

    @Test func udpRepliesFitTheClientsPayloadCappedAt1232Or512WithoutEDNSAndTCPAllows65535() throws {
        let big = try StubQuery.parse(Wire.query(edns: Wire.opt(payload: 4096)))
        #expect(StubReply.sizeLimit(for: big, overTCP: false) == 1232)
        #expect(StubReply.sizeLimit(for: big, overTCP: true) == 65535)
        let plain = try StubQuery.parse(Wire.query())
        #expect(StubReply.sizeLimit(for: plain, overTCP: false) == 512)
    }

    @Test(arguments: [
        ("short", Array(Wire.query().prefix(11))),
        ("response", Wire.query(flags: 0x8100)),
    ])
    func ignored(_ label: String, _ bytes: [UInt8]) {
        #expect(throws: StubQueryProblem.ignore) { try StubQuery.parse(bytes) }
    }

    static let malformed: [(String, [UInt8])] = {
        let question: [UInt8] = Wire.name(["a"]) + [0, 1, 0, 1]
        var cases: [(String, [UInt8])] = []
        cases.append(("no question", Wire.header(qd: 0)))
        cases.append(("two questions", Wire.header(qd: 2) + question + question))
        cases.append(("question cut", Array(Wire.query().dropLast(2))))
        cases.append(("label runs past end", Wire.header() + [10, 65, 66]))
        cases.append(("compression in question", Wire.header() + [0xC0, 12, 0, 1, 0, 1]))
        cases.append(("pointer loop", Wire.header() + [1, 65, 0xC0, 12, 0, 1, 0, 1]))
        cases.append(("extended label", Wire.header() + [0x41, 0, 0, 1, 0, 1]))
        cases.append(("two OPT", Wire.header(ar: 2) + question + Wire.opt() + Wire.opt()))
        cases.append(("OPT not at root", Wire.header(ar: 1) + question + [1, 65] + Array(Wire.opt().dropFirst())))
        cases.append(("option overruns", Wire.query(edns: Wire.opt(options: [0, 3, 0, 9, 1]))))
        cases.append(("additional count too high", Wire.header(ar: 3) + question + Wire.opt()))
        cases.append(("answer count lies", Wire.header(an: 1) + question))
        return cases
    }()

    @Test(arguments: StubQueryParsingTests.malformed)
    func formatErrors(_ label: String, _ bytes: [UInt8]) throws {
        do {
            _ = try StubQuery.parse(bytes)
            Issue.record("\(label): parsed")
        } catch {
            guard case .formatError(let id, _, _, _) = error else {
                Issue.record("\(label): \(error)")
                return
            }
            #expect(id == 0x1234)
            let reply = try #require(StubReply.problem(error))
            #expect(reply[3] & 0x0F == 1, "FORMERR")
            #expect(reply[2] & 0x80 != 0, "QR")
        }
    }

    @Test func otherOpcodesAreNotImplemented() throws {
        let notify = Wire.query(flags: 4 << 11)
        #expect(throws: StubQueryProblem.notImplemented(id: 0x1234, recursionDesired: false, opcode: 4)) {
            try StubQuery.parse(notify)
        }
        let reply = try #require(StubReply.problem(.notImplemented(id: 7, recursionDesired: true, opcode: 5)))
        #expect(reply[3] & 0x0F == 4)
    }

    @Test func randomBytesNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...80, using: &generator)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.count > 3 && Bool.random() { bytes[2] &= 0x07 }  // often a query with opcode 0
            _ = try? StubQuery.parse(bytes)
        }
    }
}

@Suite struct StubReplyTests {
    static let record = ResourceRecord(name: "www.example.com.", type: .a, ttl: 300, rdata: [192, 0, 2, 1])

    @Test func headerQuestionAndTTLs() throws {
        let bytes = Wire.query(edns: Wire.opt(dnssecOK: true))
        let query = try StubQuery.parse(bytes)
        let part = AnswerPart(sections: EncodedSections(answer: [Self.record], authority: []), ttl: 42)
        let (reply, truncated) = StubReply.make(to: query, code: .noError, parts: [part], limit: 1232)
        #expect(!truncated)
        let message = try DNSMessage.parse(reply)
        #expect(message.id == 0x1234)
        #expect(message.header.qr && message.header.ra && message.header.rd)
        #expect(!message.header.aa && !message.header.tc)
        #expect(message.answer.count == 1)
        #expect(message.answer[0].ttl == 42)
        #expect(message.answer[0].rdata == [192, 0, 2, 1])
        #expect(message.edns?.udpPayloadSize == 1232)
        #expect(message.edns?.dnssecOK == true)
        // The question is echoed byte for byte, case kept.
        #expect(Array(reply[12..<(12 + query.questionWire.count)]) == query.questionWire)
    }

    @Test func noOPTWithoutEDNSAndTruncationEmptiesSections() throws {
        let query = try StubQuery.parse(Wire.query())
        let many = (0..<40).map { index in
            ResourceRecord(name: "www.example.com.", type: .a, ttl: 300, rdata: [192, 0, 2, UInt8(index)])
        }
        let part = AnswerPart(sections: EncodedSections(answer: many, authority: []), ttl: 300)
        let (reply, truncated) = StubReply.make(
            to: query, code: .noError, parts: [part], limit: StubReply.sizeLimit(for: query, overTCP: false))
        #expect(truncated)
        #expect(reply.count <= 512)
        let message = try DNSMessage.parse(reply)
        #expect(message.header.tc)
        #expect(message.answer.isEmpty)
        #expect(message.edns == nil)
        let (full, cut) = StubReply.make(to: query, code: .noError, parts: [part], limit: 65535)
        #expect(!cut)
        #expect(try DNSMessage.parse(full).answer.count == 40)
    }

    @Test func extendedErrorAndBadVersion() throws {
        let query = try StubQuery.parse(Wire.query(edns: Wire.opt(version: 1)))
        let (reply, _) = StubReply.make(
            to: query, code: .badVers, error: .staleAnswer("expired"), limit: 1232)
        let message = try DNSMessage.parse(reply)
        #expect(message.rcode.rawValue == 16)
        #expect(message.edns?.version == 0)
        // EDE option: code 15, info-code 3, text.
        let tail = Array(reply.suffix(2 + 2 + 2 + "expired".utf8.count))
        #expect(tail[0..<2] == [0, 15])
        #expect(tail[4..<6] == [0, 3])
        #expect(String(decoding: tail[6...], as: UTF8.self) == "expired")
    }

    @Test func aLongExtendedErrorTextIsCutBeforeACharacterNeverInsideOne() throws {
        let query = try StubQuery.parse(Wire.query(edns: Wire.opt()))
        // 396 ASCII bytes, then a 2-byte "é" across byte 397, where the cut falls to leave room for "…".
        let text = String(repeating: "a", count: 396) + "é" + "tail"
        let (reply, _) = StubReply.make(to: query, code: .servFail, error: .init(code: 6, text: text), limit: 1232)
        let sent = try #require(try DNSMessage.parse(reply).edns?.extendedErrors.first)
        #expect(sent == ExtendedDNSError(code: 6, text: String(repeating: "a", count: 396) + "…"))
        #expect(StubReply.extraText(String(repeating: "b", count: 400)).count == 400)
        let over = String(repeating: "b", count: 401)
        #expect(StubReply.extraText(over) == Array((String(repeating: "b", count: 397) + "…").utf8))
        #expect(StubReply.extraText("short é") == Array("short é".utf8))
        // A 4-byte character across the cut goes whole; at most 400 bytes, always valid UTF-8.
        for lead in 390...400 {
            let cut = StubReply.extraText(String(repeating: "c", count: lead) + String(repeating: "😀", count: 5))
            #expect(cut.count <= 400)
            #expect(String(validating: cut, as: UTF8.self)?.hasSuffix("…") == true)
        }
    }

    @Test func dnssecRecordsOnlyForDOClients() throws {
        // RRSIG RDATA (RFC 4034 §3.1): covered A, algorithm 8, 3 labels, TTL, expiration, inception, key tag,
        // signer example.com, signature.
        let signature: [UInt8] = [0, 1, 8, 3, 0, 0, 1, 44] + [0x60, 0, 0, 0, 0x5F, 0, 0, 0, 0, 1]
            + Wire.name(["example", "com"]) + Array(repeating: 7, count: 16)
        let rrsig = ResourceRecord(name: "www.example.com.", type: RRType(46), ttl: 300, rdata: signature)
        let part = AnswerPart(sections: EncodedSections(answer: [Self.record, rrsig], authority: []), ttl: 60)
        let plain = try StubQuery.parse(Wire.query(edns: Wire.opt()))
        let without = try DNSMessage.parse(StubReply.make(to: plain, code: .noError, parts: [part], limit: 1232).bytes)
        #expect(without.answer.map(\.type) == [.a])
        #expect(without.answer[0].ttl == 60)
        let signed = try DNSMessage.parse(
            StubReply.make(to: plain, code: .noError, parts: [part], includeDNSSEC: true, limit: 1232).bytes)
        #expect(signed.answer.map(\.type) == [.a, RRType(46)])
    }

    @Test func aNonDOReplyIsEachSectionsPrefixWithoutDNSSECRecords() throws {
        // Signed CNAME, signed target A, and a signed NSEC3 denial beside the SOA, interleaved as upstreams send
        // them, in two parts: a DO=0 reply keeps the other records and their TTLs, a DO=1 reply keeps all.
        let signature: [UInt8] = [0, 1, 13, 3, 0, 0, 1, 44] + [0x60, 0, 0, 0, 0x5F, 0, 0, 0, 0, 1]
            + Wire.name(["example", "com"]) + Array(repeating: 7, count: 16)
        let sig = { (owner: String) in ResourceRecord(name: owner, type: RRType(46), ttl: 300, rdata: signature) }
        let cname = ResourceRecord(
            name: "alias.example.com.", type: RRType(5), ttl: 300, rdata: Wire.name(["www", "example", "com"]))
        let soa = ResourceRecord(
            name: "example.com.", type: .soa, ttl: 300,
            rdata: Wire.name(["ns", "example", "com"]) + Wire.name(["host", "example", "com"]) + Array(repeating: 0, count: 20))
        let nsec3 = ResourceRecord(name: "abc.example.com.", type: RRType(50), ttl: 300, rdata: [1, 0, 0, 0, 0, 1, 0x11, 0])
        let first = AnswerPart(
            sections: EncodedSections(answer: [cname, sig("alias.example.com.")], authority: []), ttl: 40)
        let second = AnswerPart(
            sections: EncodedSections(
                answer: [Self.record, sig("www.example.com.")],
                authority: [nsec3, sig("abc.example.com."), soa, sig("example.com.")]),
            ttl: 50)
        #expect(first.sections.answerPlainCount == 1 && first.sections.answerCount == 2 && second.sections.answerPlainCount == 1)
        let query = try StubQuery.parse(Wire.query(edns: Wire.opt()))
        let plain = try DNSMessage.parse(
            StubReply.make(to: query, code: .noError, parts: [first, second], limit: 1232).bytes)
        #expect(plain.answer.map(\.type) == [RRType(5), .a])
        #expect(plain.answer.map(\.ttl) == [40, 50])
        #expect(plain.authority.map(\.type) == [.soa])
        #expect(plain.authority[0].ttl == 50)
        let signed = try DNSMessage.parse(
            StubReply.make(to: query, code: .noError, parts: [first, second], includeDNSSEC: true, limit: 1232).bytes)
        #expect(signed.answer.map(\.type) == [RRType(5), RRType(46), .a, RRType(46)])
        #expect(signed.authority.map(\.type) == [.soa, RRType(50), RRType(46), RRType(46)])
        #expect(signed.authority.allSatisfy { $0.ttl == 50 } && signed.answer.map(\.ttl) == [40, 40, 50, 50])
    }
}

@Suite struct StubAddressTests {
    @Test func rangesContainTheirAddressesIncludingIPv4MappedAndRejectMalformedText() throws {
        let lan = try AddressRange(parsing: "192.0.2.0/24")
        #expect(lan.contains([192, 0, 2, 77]))
        #expect(!lan.contains([192, 0, 3, 1]))
        // IPv4-mapped IPv6 counts as IPv4.
        #expect(lan.contains([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1]))
        let six = try AddressRange(parsing: "2001:db8::/32")
        #expect(six.contains(AddressRange.parseAddress("2001:db8:1::5")!))
        #expect(!six.contains(AddressRange.parseAddress("2001:db9::5")!))
        #expect(try AddressRange(parsing: "10.1.2.3").description == "10.1.2.3")
        #expect(try AddressRange(parsing: "10.1.2.3/8").description == "10.0.0.0/8")
        #expect(AddressRange.loopback.contains { $0.contains([127, 9, 9, 9]) })
        for bad in ["", "example.com", "10.0.0.0/33", "::/129", "10.0.0.0/x"] {
            #expect(throws: AddressRangeError.self) { try AddressRange(parsing: bad) }
        }
    }

    @Test func listenAddressesDefaultToPort53AndRejectNamesAndPortZero() throws {
        #expect(try HostAndPort.listen("127.0.0.153") == HostAndPort(host: "127.0.0.153", port: 53))
        #expect(try HostAndPort.listen("127.0.0.1:5353") == HostAndPort(host: "127.0.0.1", port: 5353))
        #expect(try HostAndPort.listen("[::1]:5300") == HostAndPort(host: "::1", port: 5300))
        #expect(try HostAndPort.listen("::1") == HostAndPort(host: "::1", port: 53))
        for bad in ["localhost", "127.0.0.1:0", "127.0.0.1:x", "[::1", "[::1]x"] {
            #expect(throws: AddressRangeError.self) { try HostAndPort.listen(bad) }
        }
    }

    @Test func localAndLinkLocalReverseZonesAreMDNSOthersAreNot() throws {
        #expect(LocalZones.isLocal(try DNSName("printer.local")))
        #expect(LocalZones.isLocal(try DNSName("local.")))
        #expect(LocalZones.isLocal(try DNSName("4.3.254.169.in-addr.arpa")))
        #expect(LocalZones.isLocal(try DNSName("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.e.f.ip6.arpa")))
        #expect(!LocalZones.isLocal(try DNSName("local.example.com")))
        #expect(!LocalZones.isLocal(try DNSName("2.2.0.192.in-addr.arpa")))
    }
}

@Suite struct StubNameFastPathTests {
    @Test(arguments: [
        (["Www", "Example", "COM"], "www.example.com."),
        (["_443", "_https", "h3-x", "lab"], "_443._https.h3-x.lab."),
        ([String](), "."),
    ])
    func plainNamesMatchDNSName(_ labels: [String], _ text: String) throws {
        let query = try StubQuery.parse(Wire.query(labels, type: 1))
        #expect(query.nameText == text)
        #expect(query.name.text == text)
    }

    @Test func otherNamesTakeTheValidatingPath() throws {
        // A space and a dot inside labels: escaped exactly as DNSName writes them.
        let query = try StubQuery.parse(Wire.query(["My Printer", "a.b", "local"], type: 12))
        #expect(query.nameText == "my\\032printer.a\\.b.local.")
        #expect(query.nameText == query.name.text)
        #expect(StubQuery.plainName(Wire.name(["ok"]) + [], at: 0)?.0 == "ok.")
        #expect(StubQuery.plainName([3, 97, 98], at: 0) == nil)  // no root label
    }
}
