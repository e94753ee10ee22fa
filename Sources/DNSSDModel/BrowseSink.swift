import Synchronization

/// Where a browse delivers its events when the consumer wants them without a stream between (the daemon's fan-out:
/// no buffer, no task wake-up per event).
///
/// `event` and `end` may be called on any thread, for an mDNS browse on Avahi's poll thread with its lock held: they
/// must return quickly, never block, and never call back into the browse (cancel it from elsewhere). `end` comes
/// once, last: `nil` when the browse finished, else its error.
public struct BrowseSink: Sendable {
    /// Takes one event.
    public var event: @Sendable (BrowseEvent) -> Void
    /// Takes the end of the browse.
    public var end: @Sendable ((any Error)?) -> Void

    /// Creates a sink from its two callbacks.
    public init(event: @escaping @Sendable (BrowseEvent) -> Void, end: @escaping @Sendable ((any Error)?) -> Void) {
        self.event = event
        self.end = end
    }
}

/// A running browse that delivers into a ``BrowseSink``; ``cancel()`` stops it (no `end` follows a cancel).
public final class BrowseSubscription: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    /// Creates a subscription that runs `cancel` once, at the first ``cancel()``.
    public init(cancel: @escaping @Sendable () -> Void) {
        self.onCancel = Mutex(cancel)
    }

    /// Stops the browse. Idempotent; never blocks.
    public func cancel() {
        let body = onCancel.withLock { body in
            defer { body = nil }
            return body
        }
        body?()
    }
}
