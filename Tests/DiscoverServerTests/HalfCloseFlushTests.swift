import DiscoverAPI
import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import DiscoverServer

/// A call and the client's EOF read in one go, its reply unsendable because the client is gone: the server must close
/// that connection and go on. The reply used to be flushed in `channelReadComplete`, which NIO fires on EOF just
/// before it half-closes the input without checking that the channel is still open; the failing flush closed it in
/// between, and NIO then unregistered a closed channel (debug builds trap in `BaseSocketChannel.unregisterForReadable`:
/// this test then ends the test process). Seen under the abuse fuzzing after 277 s. Made certain here: the server's
/// only event loop is held while the client connects, writes and closes, so the server finds data and EOF waiting;
/// and the call fills NIO's receive buffers exactly (2048 bytes for a new connection, then 4096, 8192: the adaptive
/// allocator), so the read that follows in the same `readFromSocket` loop is the EOF (a read that leaves room in its
/// buffer ends the loop, and the reply would be flushed before the EOF is seen).
@Suite struct HalfCloseFlushTests {
    /// An `Instant` call padded with JSON whitespace to `size` bytes, its NUL terminator included.
    static func call(size: Int) -> [UInt8] {
        let call = ConnectionHandlerTests.call("io.discoverd.Test.Instant", gate: "instant")
        let padded = String(call.dropLast()) + String(repeating: " ", count: size - call.utf8.count - 1) + "}"
        return Array(padded.utf8) + [0]
    }

    @Test func aCallFollowedByEOFWhoseReplyCannotBeSentClosesOnlyThatConnection() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("halfclose-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // One event loop: blocking it holds back the accept and every read of the server.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let gates = Gates()
        gates.open("instant")
        let registry = ConnectionRegistry()
        let path = directory.path + "/s"
        let server = VarlinkServer(
            settings: .init(
                socketPath: path, maxConnections: 64, limits: ConnectionHarness.defaultLimits, perUID: PerUIDLimits()),
            router: MethodRouter(TestMethods.routes(gates), logger: logger), registry: registry, group: group,
            logger: logger)
        let listener = try await server.bind()
        let clientThread = NIOThreadPool(numberOfThreads: 1)
        clientThread.start()
        // Answered synchronously, inside channelRead: the reply waits for the flush. One, two or three full buffers.
        for size in [2048, 2048 + 4096, 2048 + 4096 + 8192] {
            let call = Self.call(size: size)
            #expect(call.count == size)
            let loopHeld = group.next().submit { usleep(100_000) }
            // While the loop sleeps: connect (the kernel queues it in the backlog), send the call, close. The server
            // then accepts a connection whose call and EOF are both waiting.
            try await clientThread.runIfActive {
                let fd = try ConnectionLifecycleTests.connectUnix(path)
                defer { close(fd) }
                guard call.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == call.count else {
                    throw ConnectionLifecycleTests.SocketError("write")
                }
            }
            try await loopHeld.get()
            #expect(try await eventuallyTrue { registry.connectionCount == 0 })
        }
        // The server still serves.
        let (fd, reply) = try await clientThread.runIfActive {
            try ConnectionLifecycleTests.connectAndCall(
                path, ConnectionHandlerTests.call("io.discoverd.Test.Instant", gate: "instant"))
        }
        close(fd)
        #expect(reply.contains(#""gate":"instant""#), "\(reply)")
        try await listener.close()
        try await clientThread.shutdownGracefully()
        try await group.shutdownGracefully()
    }
}
