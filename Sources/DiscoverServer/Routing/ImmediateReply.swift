/// A final reply a method produced synchronously on the connection's event loop, without a `Task` (a cache hit).
public struct ImmediateReply: Sendable {
    /// The reply message including its NUL.
    public var bytes: [UInt8]
    /// Work to begin once the reply is on its way (the refresh of a stale answer), never before.
    public var afterWrite: (@Sendable () -> Void)?

    public init(bytes: [UInt8], afterWrite: (@Sendable () -> Void)? = nil) {
        self.bytes = bytes
        self.afterWrite = afterWrite
    }
}
