import Testing

@testable import Resolver

/// DoT's plaintext stream cut into DNS messages (``DoTFrameSplitter``), however the reads split it.
@Suite struct DoTFramingTests {
    /// Two-byte length, then the message.
    static func framed(_ messages: [[UInt8]]) -> [UInt8] {
        messages.flatMap { [UInt8(truncatingIfNeeded: $0.count >> 8), UInt8(truncatingIfNeeded: $0.count)] + $0 }
    }

    static func delivered(_ reads: [[UInt8]]) -> [[UInt8]] {
        var splitter = DoTFrameSplitter()
        return reads.flatMap { splitter.append($0[...]) }
    }

    static let messages: [[UInt8]] = [
        Array(repeating: 1, count: 12), [], Array(repeating: 2, count: 300), Array(0..<255), [7],
    ]

    @Test func wholeMessagesInOneReadAreSplitInOrder() {
        #expect(Self.delivered([Self.framed(Self.messages)]) == Self.messages)
    }

    /// Every way of cutting the stream in two, and one byte per read: the same messages, none early, none lost.
    @Test func messagesCutAcrossReadsAreJoined() {
        let stream = Self.framed(Self.messages)
        for cut in 0...stream.count {
            #expect(Self.delivered([Array(stream[..<cut]), Array(stream[cut...])]) == Self.messages, "cut \(cut)")
        }
        #expect(Self.delivered(stream.map { [$0] }) == Self.messages)
    }

    @Test func aPartialMessageIsHeldUntilItsRestComes() {
        var splitter = DoTFrameSplitter()
        let stream = Self.framed([[9, 9, 9, 9]])
        #expect(splitter.append(stream[..<4]).isEmpty)
        #expect(splitter.append(stream[4...]) == [[9, 9, 9, 9]])
        // Nothing is kept after a whole message.
        #expect(splitter.append(Self.framed([[1]])[...]) == [[1]])
    }
}

extension DoTFrameSplitter {
    /// Takes `bytes` and returns every message now whole, in order (the connection takes them one at a time,
    /// ``forEachFrame(in:_:)``).
    mutating func append(_ bytes: ArraySlice<UInt8>) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        forEachFrame(in: bytes) { frames.append(Array($0)) }
        return frames
    }
}
