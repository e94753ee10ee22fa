/// What one connection may cost the daemon (discoverd.conf `[limits]`, except `max-connections`).
public struct ConnectionLimits: Sendable, Equatable {
    /// Largest message, without its NUL; a larger one gets `MessageTooLarge` and the connection is closed.
    public var maxMessageSize: Int
    /// Calls decoded and not yet answered; past it the connection is not read until one is answered.
    public var maxQueuedCalls: Int
    /// Bytes of a stream's replies that may wait unsent before the stream is ended as too slow; also sets the
    /// write-buffer water marks (a quarter and an eighth of it) above which the connection stops reading.
    public var maxSendBuffer: Int

    /// Creates limits.
    public init(maxMessageSize: Int, maxQueuedCalls: Int, maxSendBuffer: Int) {
        self.maxMessageSize = maxMessageSize
        self.maxQueuedCalls = maxQueuedCalls
        self.maxSendBuffer = maxSendBuffer
    }
}
