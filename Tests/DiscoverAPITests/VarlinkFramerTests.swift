import Testing

@testable import DiscoverAPI

@Suite("Varlink framing")
struct VarlinkFramerTests {
    private func drain(_ framer: inout VarlinkFramer) throws -> [String] {
        var messages: [String] = []
        while let message = try framer.next() { messages.append(String(decoding: message, as: UTF8.self)) }
        return messages
    }

    @Test func oneNULTerminatedMessageIsFramedAndNothingStaysBuffered() throws {
        var framer = VarlinkFramer()
        framer.append(Array("{\"a\":1}\0".utf8))
        #expect(try drain(&framer) == ["{\"a\":1}"])
        #expect(framer.bufferedByteCount == 0)
    }

    @Test func severalMessagesInOneRead() throws {
        var framer = VarlinkFramer()
        framer.append(Array("{\"a\":1}\0{\"b\":2}\0{\"c\"".utf8))
        #expect(try drain(&framer) == ["{\"a\":1}", "{\"b\":2}"])
        framer.append(Array(":3}\0".utf8))
        #expect(try drain(&framer) == ["{\"c\":3}"])
    }

    @Test(arguments: [1, 2, 3, 7, 64])
    func messagesSplitAcrossReads(chunk: Int) throws {
        let stream = Array("{\"method\":\"x.Y\"}\0{\"method\":\"x.Z\",\"parameters\":{\"s\":\"\\u0000\"}}\0".utf8)
        var framer = VarlinkFramer()
        var messages: [String] = []
        var index = 0
        while index < stream.count {
            framer.append(stream[index..<min(index + chunk, stream.count)])
            messages += try drain(&framer)
            index += chunk
        }
        #expect(messages == ["{\"method\":\"x.Y\"}", "{\"method\":\"x.Z\",\"parameters\":{\"s\":\"\\u0000\"}}"])
    }

    @Test func emptyMessageIsReturned() throws {
        var framer = VarlinkFramer()
        framer.append([0, 0])
        #expect(try drain(&framer) == ["", ""])
    }

    @Test func messageAtLimitIsAccepted() throws {
        var framer = VarlinkFramer(maxMessageSize: 16)
        framer.append(Array(repeating: UInt8(ascii: "x"), count: 16) + [0])
        #expect(try drain(&framer).first?.count == 16)
    }

    @Test func messageOverLimitIsRejectedEvenWhenTerminated() {
        var framer = VarlinkFramer(maxMessageSize: 16)
        framer.append(Array(repeating: UInt8(ascii: "x"), count: 17) + [0])
        #expect(throws: VarlinkFramingError.messageTooLarge(limit: 16)) { _ = try framer.next() }
    }

    @Test func unterminatedBytesOverLimitAreRejectedBeforeTheNULArrives() throws {
        var framer = VarlinkFramer(maxMessageSize: 1024)
        framer.append(Array(repeating: UInt8(ascii: "x"), count: 1024))
        #expect(try framer.next() == nil)
        framer.append([UInt8(ascii: "x")])
        #expect(throws: VarlinkFramingError.messageTooLarge(limit: 1024)) { _ = try framer.next() }
    }

    @Test func longStreamOfSmallMessagesStaysCompact() throws {
        var framer = VarlinkFramer(maxMessageSize: 64)
        var count = 0
        for i in 0..<10_000 {
            framer.append(Array("{\"i\":\(i)}\0".utf8))
            while let message = try framer.next() {
                #expect(String(decoding: message, as: UTF8.self) == "{\"i\":\(i)}")
                count += 1
            }
        }
        #expect(count == 10_000)
        #expect(framer.bufferedByteCount == 0)
    }
}
