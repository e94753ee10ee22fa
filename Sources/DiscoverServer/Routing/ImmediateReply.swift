import NIOCore

/// A final reply a method produced synchronously on the connection's event loop, without a `Task` (a cache hit).
public struct ImmediateReply: Sendable {
    /// The reply message including its NUL, ready for the socket.
    public var message: ByteBuffer
    /// Work to begin once the reply is on its way (the refresh of a stale answer), never before.
    public var afterWrite: (@Sendable () -> Void)?

    /// The reply message including its NUL.
    public var bytes: [UInt8] { Array(message.readableBytesView) }

    public init(message: ByteBuffer, afterWrite: (@Sendable () -> Void)? = nil) {
        self.message = message
        self.afterWrite = afterWrite
    }

    public init(bytes: [UInt8], afterWrite: (@Sendable () -> Void)? = nil) {
        self.init(message: Self.allocator.buffer(bytes: bytes), afterWrite: afterWrite)
    }

    /// Replies are built before they reach a channel; NIO's allocator is a plain `malloc` one, like the channels'.
    static let allocator = ByteBufferAllocator()
}
