import DNSCore
import DNSStub
import Logging
import NIOCore
import Testing

@testable import Resolver

/// What a stub client sees of validation: AD only on secure answers and only for a client that set DO or AD
/// (RFC 6840 §5.7), RRSIGs only with DO, CD serving bogus data as it came, SERVFAIL with the exact EDE otherwise.
@Suite("DNSSEC through the DNS stub")
struct DNSSECStubTests {
    static let client = StubClient(try! SocketAddress(ipAddress: "127.0.0.1", port: 40000))

    /// A query for `name` A with the given header flags (RD always) and, when `dnssecOK` is not nil, an OPT.
    static func query(_ name: String, ad: Bool = false, cd: Bool = false, dnssecOK: Bool? = nil) -> [UInt8] {
        var message = TestMessage()
        message.flags = 0x0100 | (ad ? 0x0020 : 0) | (cd ? 0x0010 : 0)
        message.questions = [TestMessage.question(TestMessage.name(name), .a)]
        if let dnssecOK { message.additional = [TestMessage.opt(dnssecOK: dnssecOK)] }
        return message.bytes
    }

    static func ask(_ responder: StubResponder, _ bytes: [UInt8]) async throws -> [UInt8] {
        let (later, feed) = AsyncStream<[UInt8]>.makeStream()
        var refreshes = PendingRefreshes()
        let immediate = responder.handle(
            bytes, client: client, overTCP: true, refreshes: &refreshes,
            later: {
                { bytes in
                    feed.yield(bytes)
                    feed.finish()
                }
            })
        switch immediate {
        case .reply(let bytes): return bytes
        case .pending:
            for await bytes in later { return bytes }
            return []
        case .drop: return []
        }
    }

    static func ede(_ reply: [UInt8]) -> UInt16? {
        guard reply.count >= 6 else { return nil }
        for index in 0..<(reply.count - 5) where reply[index] == 0 && reply[index + 1] == 15 {
            return UInt16(reply[index + 4]) << 8 | UInt16(reply[index + 5])
        }
        return nil
    }

    @Test func adRRSIGsCDAndEDE() async throws {
        let world = DNSSECWorld()
        let responder = StubResponder(
            resolver: world.resolver(), local: NoLocalRecords(), settings: StubSettings(listen: []),
            logger: Logger(label: "test"))
        // DO: AD and the RRSIG.
        let signed = try DNSMessage.parse(try await Self.ask(responder, Self.query("www.example.", dnssecOK: true)))
        #expect(signed.header.ad)
        #expect(signed.answer.contains { $0.type.rawValue == 46 })
        // AD without DO (RFC 6840 §5.7): AD, no RRSIG. Neither: no AD (a plain client gets plain answers).
        let adOnly = try DNSMessage.parse(try await Self.ask(responder, Self.query("www.example.", ad: true)))
        #expect(adOnly.header.ad)
        #expect(!adOnly.answer.contains { $0.type.rawValue == 46 })
        let plain = try DNSMessage.parse(try await Self.ask(responder, Self.query("www.example.")))
        #expect(!plain.header.ad)
        #expect(plain.answer.count == 1)
        // Insecure: never AD.
        let insecure = try DNSMessage.parse(try await Self.ask(responder, Self.query("host.plain.example.", ad: true)))
        #expect(!insecure.header.ad)
        #expect(insecure.answer.count == 1)
        // Bogus: SERVFAIL with EDE 6 naming the name; with CD the records as they came, without AD.
        let bogusBytes = try await Self.ask(responder, Self.query("bad.example.", dnssecOK: true))
        let bogus = try DNSMessage.parse(bogusBytes)
        #expect(bogus.rcode == .servFail)
        #expect(Self.ede(bogusBytes) == 6)
        #expect(String(decoding: bogusBytes, as: UTF8.self).contains("bad.example."))
        let checkingDisabled = try DNSMessage.parse(
            try await Self.ask(responder, Self.query("bad.example.", cd: true, dnssecOK: true)))
        #expect(checkingDisabled.rcode == .noError)
        #expect(!checkingDisabled.header.ad)
        #expect(checkingDisabled.answer.contains { $0.rdata == [6, 6, 6, 6] })
        // Stripped signatures: EDE 10; expired: EDE 7.
        #expect(Self.ede(try await Self.ask(responder, Self.query("stripped.example.", dnssecOK: true))) == 10)
        #expect(Self.ede(try await Self.ask(responder, Self.query("old.example.", dnssecOK: true))) == 7)
    }
}

/// No `.local` source: these tests never reach it.
struct NoLocalRecords: LocalRecordSource {
    func lookup(name: DNSName, type: RRType, class rrClass: RRClass, interface: Int32?, window: Duration)
        async throws(LocalLookupError) -> [ResourceRecord]
    { [] }
}
