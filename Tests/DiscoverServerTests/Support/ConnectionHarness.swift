import DiscoverAPI
@testable import DiscoverServer
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded

/// One varlink connection over `NIOAsyncTestingChannel`: the real ``VarlinkConnectionHandler`` and router, no
/// socket. Bytes go in with ``send(_:)``; replies come out of the channel's outbound buffer.
///
/// A ``StallingWriter`` between the handler and the channel plays a client that does not read: while stalled,
/// replies stay in the channel's write buffer (what `bufferedWritableBytes` counts) instead of being sent.
final class ConnectionHarness: Sendable {
    let channel: NIOAsyncTestingChannel
    let registry: ConnectionRegistry
    let stall = StallingWriter()
    private let received = NIOLockedValueBox([UInt8]())

    static let defaultLimits = ConnectionLimits(maxMessageSize: 64 * 1024, maxQueuedCalls: 256, maxSendBuffer: 1 << 20)

    /// - Parameter loop: the event loop, to put several connections on one (a new one by default).
    init(
        routes: RouteTable, limits: ConnectionLimits = defaultLimits, peer: PeerCredentials = .unknown,
        loop: NIOAsyncTestingEventLoop = NIOAsyncTestingEventLoop(), registry: ConnectionRegistry = ConnectionRegistry(),
        callsPerUID: Int? = nil
    ) async throws {
        self.registry = registry
        var quiet = Logger(label: "test")
        quiet.logLevel = .critical
        let logger = quiet
        let router = MethodRouter(routes, logger: logger)
        channel = NIOAsyncTestingChannel(loop: loop)
        let registry = self.registry
        let stall = self.stall
        try await channel.testingEventLoop.executeInContext { [channel] in
            let id = registry.admit(channel, limit: 10)!
            let handler = VarlinkConnectionHandler(
                connectionID: id, router: router, limits: limits, registry: registry, logger: logger, peer: peer,
                callsPerUID: callsPerUID)
            try channel.pipeline.syncOperations.addHandlers([stall, handler])
        }
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/harness")).get()
    }

    /// Sends raw bytes, as one read.
    func send(bytes: [UInt8]) async throws {
        try await channel.writeInbound(channel.allocator.buffer(bytes: bytes))
    }

    /// Sends one message and its NUL.
    func send(_ json: String) async throws {
        try await send(bytes: Array(json.utf8) + [0])
    }

    /// Runs `body` on the handler, on its event loop.
    func withHandler<T: Sendable>(_ body: @escaping @Sendable (VarlinkConnectionHandler) -> T) async throws -> T {
        try await channel.testingEventLoop.executeInContext { [channel] in
            body(try channel.pipeline.syncOperations.handler(type: VarlinkConnectionHandler.self))
        }
    }

    /// The next reply, parsed; nil when none comes within `timeout` (a bound against hangs, not a timing check).
    func reply(timeout: Duration = .seconds(10)) async throws -> [String: Any]? {
        guard let bytes = try await message(timeout: timeout) else { return nil }
        return try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
    }

    /// Sends a call and returns its reply; fails when there is none.
    func call(_ json: String) async throws -> [String: Any] {
        try await send(json)
        guard let reply = try await reply() else { throw HarnessError("no reply to \(json)") }
        return reply
    }

    /// Replies available right now, without waiting.
    func pendingReplies() async throws -> [[String: Any]] {
        var replies: [[String: Any]] = []
        while let reply = try await reply(timeout: .zero) { replies.append(reply) }
        return replies
    }

    private func message(timeout: Duration) async throws -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        while true {
            while let buffer = try await channel.readOutbound(as: ByteBuffer.self) {
                received.withLockedValue { $0 += buffer.readableBytesView }
            }
            let next: [UInt8]? = received.withLockedValue { bytes in
                guard let nul = bytes.firstIndex(of: 0) else { return nil }
                defer { bytes.removeSubrange(...nul) }
                return Array(bytes[..<nul])
            }
            if let next { return next }
            if ContinuousClock.now >= deadline { return nil }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Polls `condition` (evaluated on the handler's loop) until it holds; false after `timeout`.
    func eventually(
        timeout: Duration = .seconds(10), _ condition: @escaping @Sendable (VarlinkConnectionHandler) -> Bool
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await withHandler(condition) { return true }
            try await Task.sleep(for: .milliseconds(2))
        }
        return try await withHandler(condition)
    }

    /// The client reads again: what waited in the write buffer is sent.
    func resumeReading() {
        stall.resume()
        channel.flush()
    }

    /// Closes the channel (cancelling what still runs).
    func finish() async throws {
        _ = try? await channel.finish(acceptAlreadyClosed: true)
    }
}

/// Holds flushes while stalled, so written replies stay in the channel's write buffer like unread socket data.
final class StallingWriter: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = ByteBuffer
    // Only touched on the channel's event loop, or before the handler is added.
    private let state = NIOLockedValueBox((stalled: false, pendingFlush: false))
    private let flushes = NIOLockedValueBox(0)

    /// How many flushes the connection handler issued.
    var flushCount: Int { flushes.withLockedValue { $0 } }

    func flush(context: ChannelHandlerContext) {
        flushes.withLockedValue { $0 += 1 }
        let stalled = state.withLockedValue { state -> Bool in
            if state.stalled { state.pendingFlush = true }
            return state.stalled
        }
        if !stalled { context.flush() }
    }

    /// Stops passing flushes on.
    func stop() { state.withLockedValue { $0.stalled = true } }

    /// Passes flushes on again; the caller flushes the channel to send what waited.
    func resume() { state.withLockedValue { $0.stalled = false } }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
