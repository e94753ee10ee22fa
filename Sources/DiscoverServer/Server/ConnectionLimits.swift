import NIOCore

/// What one connection may cost the daemon (discoverd.conf `[limits]`, except `max-connections`).
public struct ConnectionLimits: Sendable, Equatable {
    /// Largest message, without its NUL; a larger one gets `MessageTooLarge` and the connection is closed.
    public var maxMessageSize: Int
    /// Calls decoded and not yet answered; past it the connection is not read until one is answered.
    public var maxQueuedCalls: Int
    /// Bytes of a stream's replies that may wait unsent before the stream is ended as too slow; also sets the
    /// write-buffer water marks (a quarter and an eighth of it) above which the connection stops reading.
    public var maxSendBuffer: Int

    /// Bytes of input a connection may hold unanswered (read and not yet decoded, plus calls decoded and not yet
    /// started); past it the connection is not read until calls are answered. At least one largest message.
    public var maxInputBuffer: Int
    /// A connection with no call and no stream for this long is closed (nil: never).
    public var idleTimeout: TimeAmount?

    /// Creates limits.
    public init(
        maxMessageSize: Int, maxQueuedCalls: Int, maxSendBuffer: Int, maxInputBuffer: Int = 128 * 1024,
        idleTimeout: TimeAmount? = nil
    ) {
        self.maxMessageSize = maxMessageSize
        self.maxQueuedCalls = maxQueuedCalls
        self.maxSendBuffer = maxSendBuffer
        self.maxInputBuffer = max(maxInputBuffer, maxMessageSize + 1)
        self.idleTimeout = idleTimeout
    }
}
