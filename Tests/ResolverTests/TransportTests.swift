import DNSCore
import NIOCore
import NIOPosix
import Testing

@testable import Resolver

/// `UpstreamClient` against in-process fake DNS servers on loopback (see `TransportTestSupport.swift`).
@Suite("Transport")
struct TransportTests {
    static let question = DNSQuestion(name: "www.example.test", type: .a)
    /// Long enough that a healthy loopback exchange never hits it on a loaded machine.
    static let patient = UpstreamClient.Configuration(timeout: .seconds(3), attempts: 1, tcpTimeout: .seconds(3))
    static let quick = UpstreamClient.Configuration(timeout: .milliseconds(100), attempts: 2)
    /// For tests where a later try must succeed: short enough to fail fast, long enough for a loaded machine.
    static let modest = UpstreamClient.Configuration(timeout: .milliseconds(700), attempts: 2)

    static func client(_ servers: [LoopbackUpstream], _ configuration: UpstreamClient.Configuration = patient)
        -> UpstreamClient
    {
        UpstreamClient(upstreams: servers.map(\.server), configuration: configuration)
    }

    /// Runs `query` and returns the thrown transport error, or records an issue when it succeeded.
    static func expectError(_ client: UpstreamClient, _ question: DNSQuestion = question) async -> DNSTransportError? {
        do {
            let exchange = try await client.query(question)
            Issue.record("expected an error, got \(exchange.message.rcode) after \(exchange.attempts.count) attempts")
            return nil
        } catch {
            return error
        }
    }

    /// The query's outcome as a value, so a `Task` can carry the typed error.
    static func result(_ client: UpstreamClient) async -> Result<DNSExchange, DNSTransportError> {
        do {
            return .success(try await client.query(question))
        } catch {
            return .failure(error)
        }
    }

    @Test func normalAnswer() async throws {
        let server = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(exchange.message.rcode == .noError)
        #expect(LoopbackAnswer.address(of: exchange.message) == [192, 0, 2, 1])
        #expect(exchange.attempts.count == 1)
        let attempt = try #require(exchange.attempts.first)
        #expect(attempt.name == "www.example.test.")
        #expect(attempt.type == .a)
        #expect(attempt.server == server.server.description)
        #expect(attempt.transport == .udp)
        #expect(attempt.rcode == "NOERROR")
        #expect(attempt.milliseconds >= 0 && attempt.milliseconds < 3000)
        // The query on the wire: RD set, EDNS(0) with 1232 bytes (RFC 6891), the question asked.
        let sent = try #require(server.received.first?.message)
        #expect(server.received.count == 1)
        #expect(sent.header.rd && !sent.header.qr)
        #expect(sent.edns?.udpPayloadSize == 1232)
        #expect(sent.question == Self.question)
    }

    @Test func ipv6Upstream() async throws {
        let server = try await LoopbackUpstream.start(host: "::1") { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(exchange.message.rcode == .noError)
        #expect(exchange.attempts.map(\.server) == ["[::1]:\(server.server.port)"])
    }

    @Test func wrongIDIsDroppedThenTheRightOneAccepted() async throws {
        let server = try await LoopbackUpstream.start { query in
            [
                .send(LoopbackAnswer.to(query, id: query.id &+ 1, address: [10, 0, 0, 66])),
                .send(LoopbackAnswer.to(query), after: .milliseconds(50)),
            ]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(LoopbackAnswer.address(of: exchange.message) == [192, 0, 2, 1])
        #expect(exchange.attempts.map(\.rcode) == ["NOERROR"])
    }

    @Test func wrongNameIsDropped() async throws {
        let server = try await LoopbackUpstream.start { query in
            [
                .send(LoopbackAnswer.to(query, name: "other.example.test", address: [10, 0, 0, 66])),
                .send(LoopbackAnswer.to(query), after: .milliseconds(50)),
            ]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(LoopbackAnswer.address(of: exchange.message) == [192, 0, 2, 1])
        #expect(exchange.attempts.count == 1)
    }

    @Test func onlyWrongNamesMeanTimeout() async throws {
        let server = try await LoopbackUpstream.start {
            [LoopbackReply.send(LoopbackAnswer.to($0, name: "other.example.test"))]
        }
        let error = await Self.expectError(Self.client([server], Self.quick))
        await server.stop()

        #expect(error?.code == .timeout)
        #expect(error?.attempts.map(\.rcode) == ["TIMEOUT", "TIMEOUT"])
    }

    @Test func nameMatchIsCaseInsensitive() async throws {
        // RFC 5452 §9.1 with 0x20 mixing in mind: a server may echo the name in another case.
        let server = try await LoopbackUpstream.start {
            [LoopbackReply.send(LoopbackAnswer.to($0, name: "WWW.Example.TEST"))]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(exchange.message.rcode == .noError)
    }

    @Test func garbageIsDropped() async throws {
        let server = try await LoopbackUpstream.start { query in
            var truncatedAnswer = LoopbackAnswer.to(query)
            truncatedAnswer.removeLast(9)
            var withoutQR = LoopbackAnswer.to(query)
            withoutQR[2] &= 0x7F
            return [
                .send([]),
                .send([0x12, 0x34, 0x01]),
                .send((0..<300).map { _ in UInt8.random(in: 0...255) }),
                .send([UInt8(query.id >> 8), UInt8(query.id & 0xFF)] + [UInt8](repeating: 0xFF, count: 40)),
                .send(truncatedAnswer),
                .send(withoutQR),
                .send(query.bytes),  // the query echoed back: QR clear
                .send(LoopbackAnswer.to(query), after: .milliseconds(80)),
            ]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(LoopbackAnswer.address(of: exchange.message) == [192, 0, 2, 1])
        #expect(exchange.attempts.count == 1)
    }

    @Test func timeoutRecordsEveryAttempt() async throws {
        let server = try await LoopbackUpstream.start { _ in [] }
        let error = await Self.expectError(Self.client([server], Self.quick))
        await server.stop()

        #expect(error?.code == .timeout)
        let attempts = error?.attempts ?? []
        #expect(attempts.count == 2)
        #expect(attempts.allSatisfy { $0.rcode == "TIMEOUT" && $0.transport == .udp && $0.milliseconds >= 90 })
        #expect(server.received.count == 2)
    }

    @Test func secondRoundGetsTheAnswer() async throws {
        let server = try await LoopbackUpstream.start { query in
            query.index == 0 ? [] : [.send(LoopbackAnswer.to(query))]
        }
        let exchange = try await Self.client([server], Self.modest).query(Self.question)
        await server.stop()

        #expect(exchange.attempts.map(\.rcode) == ["TIMEOUT", "NOERROR"])
    }

    @Test func truncatedUDPFallsBackToTCP() async throws {
        let server = try await LoopbackUpstream.start { query in
            query.transport == .udp
                ? [.send(LoopbackAnswer.to(query, tc: true))]
                : [.send(LoopbackAnswer.to(query, address: [192, 0, 2, 99]))]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(LoopbackAnswer.address(of: exchange.message) == [192, 0, 2, 99])
        #expect(exchange.attempts.map(\.transport) == [.udp, .tcp])
        #expect(exchange.attempts.map(\.rcode) == ["NOERROR", "NOERROR"])
        #expect(exchange.attempts.allSatisfy { $0.server == server.server.description })
        let received = server.received
        #expect(received.map(\.transport) == [.udp, .tcp])
        #expect(received.map(\.question) == [Self.question, Self.question])
    }

    @Test func truncatedReplyThatDoesNotParseStillFallsBack() async throws {
        // TC=1, ANCOUNT=1 and the records cut off: ldns rejects it, the header still says "use TCP".
        let server = try await LoopbackUpstream.start { query in
            guard query.transport == .udp else { return [.send(LoopbackAnswer.to(query))] }
            var reply = LoopbackAnswer.to(query)
            reply[2] |= 0x02
            reply.removeLast(15)
            return [.send(reply)]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(exchange.message.rcode == .noError)
        #expect(exchange.attempts.map(\.transport) == [.udp, .tcp])
    }

    @Test func tcpReplyInOneBytePieces() async throws {
        let server = try await LoopbackUpstream.start { query in
            query.transport == .udp
                ? [.send(LoopbackAnswer.to(query, tc: true))]
                : [.sendInPieces(LoopbackAnswer.to(query), size: 1, gap: .milliseconds(2))]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(LoopbackAnswer.address(of: exchange.message) == [192, 0, 2, 1])
        #expect(exchange.attempts.map(\.transport) == [.udp, .tcp])
    }

    @Test func tcpSeveralMessagesInOneRead() async throws {
        let server = try await LoopbackUpstream.start { query in
            query.transport == .udp
                ? [.send(LoopbackAnswer.to(query, tc: true))]
                : [
                    .sendTogether([
                        LoopbackAnswer.to(query, id: query.id &+ 1, address: [10, 0, 0, 66]), [0xDE, 0xAD],
                        LoopbackAnswer.to(query), LoopbackAnswer.to(query, address: [10, 0, 0, 67]),
                    ])
                ]
        }
        let exchange = try await Self.client([server]).query(Self.question)
        await server.stop()

        #expect(LoopbackAnswer.address(of: exchange.message) == [192, 0, 2, 1])
    }

    @Test func tcpConnectionClosedWithoutAnswerEndsTheTry() async throws {
        let server = try await LoopbackUpstream.start { query in
            query.transport == .udp ? [.send(LoopbackAnswer.to(query, tc: true))] : [.close]
        }
        let configuration = UpstreamClient.Configuration(timeout: .seconds(1), attempts: 1, tcpTimeout: .seconds(20))
        let clock = ContinuousClock()
        let started = clock.now
        let error = await Self.expectError(Self.client([server], configuration))
        await server.stop()

        #expect(error?.code == .timeout)
        #expect(error?.attempts.map(\.transport) == [.udp, .tcp])
        #expect(error?.attempts.map(\.rcode) == ["NOERROR", "TIMEOUT"])
        #expect(started.duration(to: clock.now) < .seconds(10))
    }

    @Test func servfailFailsOverToTheNextUpstream() async throws {
        let first = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: .servFail))] }
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let exchange = try await Self.client([first, second]).query(Self.question)
        await first.stop()
        await second.stop()

        #expect(exchange.message.rcode == .noError)
        #expect(exchange.attempts.map(\.server) == [first.server.description, second.server.description])
        #expect(exchange.attempts.map(\.rcode) == ["SERVFAIL", "NOERROR"])
    }

    @Test(arguments: [RCode.refused, .notImp, .formErr])
    func otherFailureCodesFailOver(rcode: RCode) async throws {
        let first = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: rcode))] }
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let exchange = try await Self.client([first, second]).query(Self.question)
        await first.stop()
        await second.stop()

        #expect(exchange.attempts.map(\.rcode) == [rcode.description, "NOERROR"])
    }

    @Test func allServfailReturnsTheLastResponse() async throws {
        let first = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: .servFail))] }
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: .servFail))] }
        let client = UpstreamClient(
            upstreams: [first.server, second.server],
            configuration: .init(timeout: .seconds(3), attempts: 2))
        let exchange = try await client.query(Self.question)
        await first.stop()
        await second.stop()

        #expect(exchange.message.rcode == .servFail)
        // An upstream that answered is not asked again in the second round.
        #expect(exchange.attempts.map(\.rcode) == ["SERVFAIL", "SERVFAIL"])
        #expect(exchange.attempts.last?.server == second.server.description)
        #expect(first.received.count == 1 && second.received.count == 1)
    }

    @Test func theLastFailureIsTheOneReturned() async throws {
        let first = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: .servFail))] }
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: .refused))] }
        let exchange = try await Self.client([first, second]).query(Self.question)
        await first.stop()
        await second.stop()

        #expect(exchange.message.rcode == .refused)
    }

    /// An answer with an error code is a try answered, not a failure; `Status` counts it with its code and the
    /// upstream's Extended DNS Errors, so an operator sees why clients got SERVFAIL.
    @Test func anErrorAnswerIsCountedWithItsCodeAndReasonNotAsAFailure() async throws {
        let first = try await LoopbackUpstream.start { query in
            var message = TestMessage()
            message.id = query.id
            message.flags = 0x8180 | RCode.servFail.rawValue
            message.questions = [
                TestMessage.question(TestMessage.name(query.question.name), query.question.type, query.question.class)
            ]
            let ede = TestMessage.ednsOption(15, [0, 7] + Array("sig expired".utf8))
            message.additional = [TestMessage.opt(options: ede + TestMessage.ednsOption(15, [0, 22]))]
            return [LoopbackReply.send(message.bytes)]
        }
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: .refused))] }
        let client = Self.client([first, second])
        let exchange = try await client.query(Self.question)
        await first.stop()
        await second.stop()

        #expect(exchange.message.rcode == .refused)
        let status = client.upstreamStatus
        #expect(status.map(\.queries) == [1, 1] && status.map(\.failures) == [0, 0], "\(status)")
        #expect(status.map(\.errorAnswers) == [1, 1], "\(status)")
        #expect(status.map(\.lastFailure) == [nil, nil], "\(status)")
        #expect(
            status.map(\.lastErrorAnswer) == [
                "www.example.test. A: SERVFAIL, EDE 7 (Signature Expired): sig expired, "
                    + "EDE 22 (No Reachable Authority)",
                "www.example.test. A: REFUSED",
            ])
        #expect(status.allSatisfy { $0.p50Milliseconds != nil }, "an error answer is a round trip: \(status)")
    }

    @Test func nxdomainIsFinal() async throws {
        let first = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0, rcode: .nxDomain))] }
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let exchange = try await Self.client([first, second]).query(Self.question)
        await first.stop()
        await second.stop()

        #expect(exchange.message.rcode == .nxDomain)
        #expect(exchange.attempts.map(\.rcode) == ["NXDOMAIN"])
        #expect(second.received.isEmpty)
    }

    @Test func timeoutOnFirstUpstreamFailsOverToSecond() async throws {
        let first = try await LoopbackUpstream.start { _ in [] }
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let exchange = try await Self.client([first, second], Self.modest).query(Self.question)
        await first.stop()
        await second.stop()

        #expect(exchange.attempts.map(\.rcode) == ["TIMEOUT", "NOERROR"])
        #expect(exchange.attempts.map(\.server) == [first.server.description, second.server.description])
    }

    @Test func refusedPortEndsTheTryEarly() async throws {
        // A port with nothing behind it: the ICMP port unreachable ends the try long before its timeout.
        let closed = try await LoopbackUpstream.start { _ in [] }
        await closed.stop()
        let second = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let client = UpstreamClient(
            upstreams: [closed.server, second.server], configuration: .init(timeout: .seconds(20), attempts: 1))
        let clock = ContinuousClock()
        let started = clock.now
        let exchange = try await client.query(Self.question)
        await second.stop()

        #expect(started.duration(to: clock.now) < .seconds(10))
        #expect(exchange.attempts.map(\.rcode) == ["TIMEOUT", "NOERROR"])
    }

    @Test func aClosedPortIsNamedInTheError() async throws {
        let closed = try await LoopbackUpstream.start { _ in [] }
        await closed.stop()
        let silent = try await LoopbackUpstream.start { _ in [] }
        // Long enough that the ICMP error comes within the try on a busy machine; the silent one waits it out.
        let configuration = UpstreamClient.Configuration(timeout: .seconds(1), attempts: 1)
        let error = await Self.expectError(Self.client([closed, silent], configuration))
        await silent.stop()
        // The closed port's ICMP error is named with its upstream; the silent one only timed out.
        #expect(error?.code == .timeout)
        #expect(error?.failures == ["\(closed.server): receive: Connection refused"])
        let message = error?.message ?? ""
        #expect(message.hasSuffix("(\(closed.server): receive: Connection refused)"), "\(message)")
    }

    @Test(arguments: [UpstreamServer.Transport.tls, .https])
    func aRefusedEncryptedConnectIsOneFailedTryPerQuery(transport: UpstreamServer.Transport) async throws {
        // The TCP port of a stopped loopback upstream: nothing listens, the connect is refused.
        let closed = try await LoopbackUpstream.start { _ in [] }
        await closed.stop()
        let server = UpstreamServer(
            transport: transport, host: closed.server.host, port: closed.server.port, tlsName: "dns.test",
            path: transport == .https ? "/dns-query" : "")
        let client = UpstreamClient(upstreams: [server], configuration: .init(timeout: .milliseconds(300), attempts: 1))
        let errors = [await Self.expectError(client), await Self.expectError(client)]
        // The second query may meet the back-off the first refusal started (" (retrying after a back-off)"), or
        // connect again if it has run out: the same refusal either way.
        let refused = "\(server): connect: Connection refused"
        #expect(errors.allSatisfy { $0?.message.hasPrefix(refused) == true }, "\(errors)")
        let status = try #require(client.upstreamStatus.first)
        // The connect's failure and its try's are one failure, not two; the reason is the system's.
        #expect(status.queries == 2 && status.failures == 2, "\(status)")
        #expect(status.lastFailure?.hasPrefix("failed: connect: Connection refused") == true, "\(status)")
    }

    @Test func aQueryStrictModeRefusesBeforeAnyTryIsAFailedQuery() async throws {
        let server = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let client = UpstreamClient(
            upstreams: [server.server], configuration: .init(timeout: .milliseconds(300), encryption: .strict))
        let error = await Self.expectError(client)
        await server.stop()
        #expect(error?.code == .networkError)
        #expect(server.received.isEmpty, "strict mode sent a plain query")
        let status = try #require(client.upstreamStatus.first)
        #expect(status.transport == "none" && status.queries == 2 && status.failures == 2, "\(status)")
        #expect(status.lastFailure?.contains("encryption = strict") == true, "\(status)")
    }

    @Test func everyTryHasItsOwnRandomIDAndSourcePort() async throws {
        let server = try await LoopbackUpstream.start { _ in [] }
        let configuration = UpstreamClient.Configuration(timeout: .milliseconds(100), attempts: 6)
        let error = await Self.expectError(Self.client([server], configuration))
        await server.stop()

        let received = server.received
        #expect(error?.attempts.count == 6)
        #expect(received.count == 6)
        // RFC 5452 §9.2: six independent random IDs and ports coincide only with negligible probability.
        #expect(Set(received.map(\.id)).count > 1)
        #expect(Set(received.map(\.sourcePort)).count > 1)
        #expect(received.allSatisfy { $0.sourcePort > 0 })
    }

    @Test func cancellationReturnsPromptly() async throws {
        let server = try await LoopbackUpstream.start { _ in [] }
        let client = UpstreamClient(
            upstreams: [server.server], configuration: .init(timeout: .seconds(30), attempts: 3))
        let task = Task { await Self.result(client) }
        // Wait until the query is on the wire, so the cancel hits a running try.
        for _ in 0..<200 where server.received.isEmpty {
            try await Task.sleep(for: .milliseconds(10))
        }
        let clock = ContinuousClock()
        let started = clock.now
        task.cancel()
        let result = await task.value
        let elapsed = started.duration(to: clock.now)
        await server.stop()

        #expect(elapsed < .seconds(2))
        #expect(server.received.count == 1)
        switch result {
        case .success(let exchange):
            Issue.record("cancelled query returned \(exchange.message.rcode)")
        case .failure(let error):
            #expect(error.code == .timeout)
            #expect(error.message.contains("cancelled"))
        }
    }

    @Test func alreadyCancelledTaskSendsNothing() async throws {
        let server = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let client = Self.client([server])
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await Self.result(client)
        }
        let result = await task.value
        await server.stop()

        #expect(throws: DNSTransportError.self) { try result.get() }
        #expect(server.received.isEmpty)
    }

    @Test func noUsableUpstream() async throws {
        let none = await Self.expectError(UpstreamClient(upstreams: []))
        #expect(none?.code == .noUpstreams)
        // Host names are never resolved (that would need the system resolver).
        let named = await Self.expectError(UpstreamClient(upstreams: [UpstreamServer(host: "dns.example.test")]))
        #expect(named?.code == .noUpstreams)
        #expect(named?.attempts.isEmpty == true)
    }

    @Test func invalidNameIsRejectedBeforeSending() async throws {
        let server = try await LoopbackUpstream.start { [LoopbackReply.send(LoopbackAnswer.to($0))] }
        let label = String(repeating: "a", count: 64)
        let error = await Self.expectError(Self.client([server]), DNSQuestion(name: "\(label).test", type: .a))
        await server.stop()

        #expect(error?.code == .invalidQuery)
        #expect(server.received.isEmpty)
    }
}

/// `PendingQuery.classify`, the acceptance rule of every try, on hand-made messages.
@Suite("Transport reply matching")
struct TransportMatchingTests {
    static let question = DNSQuestion(name: "www.example.test", type: .https)

    static func pending(id: UInt16 = 0x4242) throws -> PendingQuery {
        let name = try DNSName(question.name)
        let template = try DNSQuery.make(name: name, type: question.type, id: 0)
        return PendingQuery(template: template, id: id, question: question, nameLength: name.wire.count)
    }

    static func reply(
        id: UInt16 = 0x4242, flags: UInt16 = 0x8180, name: String = "www.example.test", type: RRType = .https,
        questions: Int = 1
    ) -> [UInt8] {
        var message = TestMessage()
        message.id = id
        message.flags = flags
        message.questions = Array(repeating: TestMessage.question(TestMessage.name(name), type), count: questions)
        return message.bytes
    }

    static func verdict(_ bytes: [UInt8], overTCP: Bool = false) throws -> String {
        switch try pending().classify(bytes, overTCP: overTCP) {
        case .accept: "accept"
        case .truncated: "truncated"
        case .drop: "drop"
        }
    }

    @Test func table() throws {
        let cases: [(String, [UInt8], Bool, String)] = [
            ("matching reply", Self.reply(), false, "accept"),
            ("name in another case", Self.reply(name: "WWW.EXAMPLE.Test"), false, "accept"),
            ("wrong ID", Self.reply(id: 0x4243), false, "drop"),
            ("QR clear", Self.reply(flags: 0x0100), false, "drop"),
            ("other name", Self.reply(name: "www.example.tes"), false, "drop"),
            ("other type", Self.reply(type: .svcb), false, "drop"),
            ("no question", Self.reply(questions: 0), false, "drop"),
            ("two questions", Self.reply(questions: 2), false, "drop"),
            ("empty", [], false, "drop"),
            ("11 bytes", Array(Self.reply().prefix(11)), false, "drop"),
            ("TC over UDP", Self.reply(flags: 0x8380), false, "truncated"),
            ("TC, header only", Array(Self.reply(flags: 0x8380).prefix(12)), false, "drop"),
            ("TC for another name", Self.reply(flags: 0x8380, name: "a.example.test"), false, "drop"),
            ("TC for another type", Self.reply(flags: 0x8380, type: .a), false, "drop"),
            ("TC with wrong ID", Self.reply(id: 1, flags: 0x8380), false, "drop"),
            ("TC over TCP is a plain reply", Self.reply(flags: 0x8380), true, "accept"),
        ]
        for (label, bytes, overTCP, expected) in cases {
            #expect(try Self.verdict(bytes, overTCP: overTCP) == expected, "\(label)")
        }
    }

    /// An accepted reply that echoes the question takes the query's own name text (not decoded again): the message
    /// is the one the parser alone makes, for the question in any case, owners pointing at it or written out, and
    /// thousands of mutations of them.
    @Test func anEchoedQuestionGivesTheSameMessageAsTheParser() throws {
        let pending = try Self.pending()
        let aRecord = TestMessage.u16(RRType.a.rawValue) + TestMessage.u16(1) + TestMessage.u32(300) + TestMessage.u16(4)
        var bases: [[UInt8]] = []
        for name in ["www.example.test", "WWW.Example.TEST"] {
            var message = TestMessage()
            message.id = 0x4242
            message.questions = [TestMessage.question(TestMessage.name(name), .https)]
            message.answers = [[0xC0, 0x0C] + aRecord + [192, 0, 2, 1], TestMessage.name("www.example.test") + aRecord + [192, 0, 2, 2]]
            message.additional = [TestMessage.opt()]
            bases.append(message.bytes)
        }
        var generator = SystemRandomNumberGenerator()
        var accepted = 0
        for index in 0..<6000 {
            var bytes = bases[index % 2]
            if index >= 2 {
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    let at = Int.random(in: 12..<bytes.count, using: &generator)
                    bytes[at] = UInt8.random(in: 0...255, using: &generator)
                }
            }
            guard case .accept(let message) = pending.classify(bytes, overTCP: true) else { continue }
            accepted += 1
            #expect(message == (try? DNSMessage.parse(bytes)), "\(bytes)")
            #expect(message.questions.first?.name == Self.question.name)
        }
        #expect(accepted > 100)
    }

    @Test func mutatedRepliesNeverTrapAndWrongIDsNeverPass() throws {
        let pending = try Self.pending()
        let original = Self.reply() + TestMessage.record(TestMessage.name("www.example.test"), .a, rdata: [1, 2, 3, 4])
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            bytes.removeLast(Int.random(in: 0..<bytes.count, using: &generator))
            let verdict = pending.classify(bytes, overTCP: Bool.random(using: &generator))
            let header = try? DNSHeader.parse(bytes)
            if case .drop = verdict { continue }
            #expect(header?.id == pending.id && header?.qr == true)
        }
    }
}
