import Testing

@testable import DiscoverClient

@Suite("Client reply decoding")
struct ReplyDecodingTests {
    private func reply(_ text: String) throws -> VarlinkReplyMessage {
        try VarlinkReplyMessage.decode(Array(text.utf8))
    }

    @Test func successDecodesTheTypedParameters() throws {
        let decoded = try DiscoverClient.decode(try reply(#"{"parameters":{"flushed":7}}"#), as: FlushReply.self)
        #expect(decoded == FlushReply(flushed: 7))
    }

    @Test(arguments: [
        ("io.discoverd.Resolver.NoSuchName", DiscoverError.Code.noSuchName),
        ("io.discoverd.Resolver.Timeout", .resolverTimeout),
        ("io.discoverd.Discovery.AvahiUnavailable", .avahiUnavailable),
        ("org.varlink.service.PermissionDenied", .permissionDenied),
        ("org.varlink.service.MethodNotImplemented", .methodNotImplemented),
    ])
    func errorsMapToTheirCodes(name: String, code: DiscoverError.Code) throws {
        let message = try reply("{\"error\":\"\(name)\",\"parameters\":{\"name\":\"x.test\"}}")
        do {
            _ = try DiscoverClient.decode(message, as: FlushReply.self)
            Issue.record("\(name) should throw")
        } catch let error as DiscoverError {
            #expect(error.code == code)
            #expect(error.parameters["name"] == .string("x.test"))
        }
    }

    @Test func aReplyOfTheWrongShapeIsAProtocolError() throws {
        do {
            _ = try DiscoverClient.decode(try reply(#"{"parameters":{"flushed":"seven"}}"#), as: FlushReply.self)
            Issue.record("should not decode")
        } catch let error as DiscoverError {
            #expect(error.code == .protocolError)
        }
    }

    @Test func continuesIsReadFromTheEnvelope() throws {
        #expect(try reply(#"{"parameters":{},"continues":true}"#).continues)
        #expect(try !reply(#"{"parameters":{}}"#).continues)
    }

    @Test func anExplicitSocketPathWins() {
        #expect(DiscoverClient(socketPath: "/tmp/explicit.sock").socketPath == "/tmp/explicit.sock")
    }
}
