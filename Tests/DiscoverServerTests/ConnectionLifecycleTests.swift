import DiscoverAPI
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import DiscoverServer

/// What a closed connection leaves behind: nothing. Real Unix sockets and the real server, so the channel goes
/// through NIO's whole close (inactive, handlers removed, channel released).
@Suite struct ConnectionLifecycleTests {
    /// Weak references to the handlers of connections the test opened.
    final class Handlers: Sendable {
        private final class Weak: @unchecked Sendable {
            weak var handler: VarlinkConnectionHandler?
            init(_ handler: VarlinkConnectionHandler) { self.handler = handler }
        }
        private let entries = NIOLockedValueBox<[Weak]>([])
        func add(_ handler: VarlinkConnectionHandler) { entries.withLockedValue { $0.append(Weak(handler)) } }
        var count: Int { entries.withLockedValue { $0.count } }
        var alive: Int { entries.withLockedValue { $0.filter { $0.handler != nil }.count } }
    }

    struct SocketError: Error, CustomStringConvertible {
        let description: String
        init(_ call: String) { description = "\(call): \(String(cString: strerror(errno)))" }
    }

    /// A blocking Unix-socket connection to `path`.
    static func connectUnix(_ path: String) throws -> CInt {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketError("socket") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw SocketError("connect")
        }
        return fd
    }

    /// Connects to `path`, sends `message` and reads one reply; the socket stays open for the caller to close.
    static func connectAndCall(_ path: String, _ message: String) throws -> (fd: CInt, reply: String) {
        let fd = try connectUnix(path)
        let bytes = Array(message.utf8) + [0]
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
            throw SocketError("write")
        }
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while reply.last != 0 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            reply += chunk[0..<n]
        }
        return (fd, String(decoding: reply.dropLast(), as: UTF8.self))
    }

    @Test func closedConnectionsLeaveNoHandlerAndNoAccountingBehind() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let gates = Gates()
        gates.open("task")
        gates.open("instant")
        let registry = ConnectionRegistry()
        let server = VarlinkServer(
            settings: .init(
                socketPath: directory.path + "/s", maxConnections: 64, limits: ConnectionHarness.defaultLimits,
                perUID: PerUIDLimits()),
            router: MethodRouter(TestMethods.routes(gates), logger: logger), registry: registry, group: group,
            logger: logger)
        let listener = try await server.bind()
        let handlers = Handlers()
        // Both kinds of call: answered synchronously (no task) and through a task.
        let calls = [
            ConnectionHandlerTests.call("io.discoverd.Test.Instant", gate: "instant"),
            ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "task"),
        ]
        // The client's blocking socket calls run on a thread of their own, not on the concurrency pool, where the
        // server's tasks run.
        let clientThread = NIOThreadPool(numberOfThreads: 1)
        clientThread.start()
        let path = directory.path + "/s"
        for round in 0..<40 {
            let call = calls[round % 2]
            let (fd, reply) = try await clientThread.runIfActive { try Self.connectAndCall(path, call) }
            #expect(reply.contains(#""parameters""#), "\(reply)")
            // The server side of this connection: the only one open.
            let channel = try #require(registry.channels().first)
            handlers.add(try await channel.pipeline.handler(type: VarlinkConnectionHandler.self).get())
            close(fd)
            #expect(try await eventuallyTrue { registry.connectionCount == 0 })
        }
        #expect(handlers.count == 40)
        #expect(registry.usageByUID.isEmpty, "no uid still holds a connection or a call")
        // Each handler goes with its channel: none may be kept alive by a reference cycle (handler and context).
        #expect(try await eventuallyTrue { handlers.alive == 0 }, "\(handlers.alive) of 40 handlers still alive")
        try await listener.close()
        try await clientThread.shutdownGracefully()
        try await group.shutdownGracefully()
    }
}
