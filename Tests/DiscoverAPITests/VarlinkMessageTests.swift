import Foundation
import Testing

@testable import DiscoverAPI

@Suite("Varlink messages")
struct VarlinkMessageTests {
    private func call(_ text: String) throws -> VarlinkCall {
        try VarlinkCall.decode(Array(text.utf8))
    }

    @Test func envelopeFields() throws {
        let decoded = try call(#"{"method":"io.discoverd.Resolver.ResolveHTTPS","more":true,"parameters":{"name":"a.test"}}"#)
        #expect(decoded.method == "io.discoverd.Resolver.ResolveHTTPS")
        #expect(decoded.interface == "io.discoverd.Resolver")
        #expect(decoded.member == "ResolveHTTPS")
        #expect(decoded.more)
        #expect(!decoded.oneway)
        #expect(try decoded.parameters(ResolveHTTPSParameters.self) == ResolveHTTPSParameters(name: "a.test"))
    }

    @Test(arguments: [
        #"{"method":"io.discoverd.Daemon.Status"}"#,
        #"{"method":"io.discoverd.Daemon.Status","parameters":null}"#,
        #"{"method":"io.discoverd.Daemon.Status","parameters":{}}"#,
    ])
    func missingNullAndEmptyParametersAreTheSame(text: String) throws {
        #expect(try call(text).parameters(StatusParameters.self) == StatusParameters())
        #expect(try call(text).parameters(FlushParameters.self) == FlushParameters(name: nil))
    }

    @Test(arguments: [
        (#"{"method":"m.M","parameters":{"nmae":"x"}}"#, "nmae"),  // unknown
        (#"{"method":"m.M","parameters":{}}"#, "name"),  // missing
        (#"{"method":"m.M","parameters":{"name":42}}"#, "name"),  // wrong type
        (#"{"method":"m.M","parameters":{"name":"x","port":"443"}}"#, "port"),
        (#"{"method":"m.M","parameters":{"name":"x","optimistic":1}}"#, "optimistic"),
    ])
    func invalidParameterNamesTheParameter(text: String, parameter: String) throws {
        #expect(throws: VarlinkError.invalidParameter(parameter)) {
            _ = try call(text).parameters(ResolveHTTPSParameters.self)
        }
    }

    @Test(arguments: [
        "{bad", "[]", "\"string\"", #"{"parameters":{}}"#, #"{"method":42}"#, "", "\u{FF}",
    ])
    func malformedCallsAreInvalidMessage(text: String) {
        #expect(throws: VarlinkError.self) { _ = try call(text) }
        do {
            _ = try call(text)
        } catch {
            #expect((error as? VarlinkError)?.name == "io.discoverd.Daemon.InvalidMessage")
        }
    }

    @Test func nulInsideStringsIsEscaped() throws {
        let bytes = try VarlinkCall.encode(
            method: "io.discoverd.Resolver.ResolveHTTPS", parameters: ResolveHTTPSParameters(name: "a\u{0}b"))
        #expect(bytes.last == 0)
        #expect(bytes.dropLast().contains(0) == false)
        var framer = VarlinkFramer()
        framer.append(bytes)
        let message = try #require(try framer.next())
        #expect(try VarlinkCall.decode(message).parameters(ResolveHTTPSParameters.self).name == "a\u{0}b")
    }

    @Test func repliesEndInNULAndSayWhetherMoreFollow() throws {
        let bytes = try VarlinkReply.encode(FlushReply(flushed: 3), continues: true)
        #expect(bytes.last == 0)
        let reply = try VarlinkReplyMessage.decode(bytes.dropLast())
        #expect(reply.continues)
        #expect(reply.error == nil)
        #expect(try reply.parameters(FlushReply.self) == FlushReply(flushed: 3))
        let final = try VarlinkReplyMessage.decode(try VarlinkReply.encode(FlushReply(flushed: 1)).dropLast())
        #expect(!final.continues)
    }

    @Test func errorRepliesNameTheVarlinkErrorAndItsParameters() throws {
        let bytes = VarlinkReply.encode(error: .noSuchName("nx.test"))
        let reply = try VarlinkReplyMessage.decode(bytes.dropLast())
        #expect(reply.error == "io.discoverd.Resolver.NoSuchName")
        #expect(reply.varlinkError == .noSuchName("nx.test"))
        #expect(reply.varlinkError?.description.contains("nx.test") == true)
    }
}
