import NIOCore
import NIOEmbedded
import Testing

@testable import Resolver

/// DoT's plaintext stream cut into DNS messages (``DoTReplyHandler``), however the reads split it.
@Suite struct DoTFramingTests {
    /// Two-byte length, then the message.
    static func framed(_ messages: [[UInt8]]) -> [UInt8] {
        messages.flatMap { [UInt8(truncatingIfNeeded: $0.count >> 8), UInt8(truncatingIfNeeded: $0.count)] + $0 }
    }

    static func delivered(_ reads: [[UInt8]]) throws -> [[UInt8]] {
        let box = Box()
        let channel = EmbeddedChannel(handler: DoTReplyHandler { box.frames.append($0) })
        for read in reads { try channel.writeInbound(ByteBuffer(bytes: read)) }
        _ = try channel.finish()
        return box.frames
    }

    final class Box: @unchecked Sendable {
        var frames: [[UInt8]] = []
    }

    static let messages: [[UInt8]] = [
        Array(repeating: 1, count: 12), [], Array(repeating: 2, count: 300), Array(0..<255), [7],
    ]

    @Test func wholeMessagesInOneReadAreSplitInOrder() throws {
        #expect(try Self.delivered([Self.framed(Self.messages)]) == Self.messages)
    }

    /// Every way of cutting the stream in two, and one byte per read: the same messages, none early, none lost.
    @Test func messagesCutAcrossReadsAreJoined() throws {
        let stream = Self.framed(Self.messages)
        for cut in 0...stream.count {
            #expect(try Self.delivered([Array(stream[..<cut]), Array(stream[cut...])]) == Self.messages, "cut \(cut)")
        }
        #expect(try Self.delivered(stream.map { [$0] }) == Self.messages)
    }

    @Test func aPartialMessageIsHeldUntilItsRestComes() throws {
        let box = Box()
        let channel = EmbeddedChannel(handler: DoTReplyHandler { box.frames.append($0) })
        let stream = Self.framed([[9, 9, 9, 9]])
        try channel.writeInbound(ByteBuffer(bytes: stream[..<4]))
        #expect(box.frames.isEmpty)
        try channel.writeInbound(ByteBuffer(bytes: stream[4...]))
        #expect(box.frames == [[9, 9, 9, 9]])
        _ = try channel.finish()
    }
}
