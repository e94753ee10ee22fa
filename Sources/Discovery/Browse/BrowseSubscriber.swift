import DNSSDModel

/// One consumer of a shared browser: its own bounded buffer, so it can neither block the poll thread nor other
/// subscribers.
///
/// Overflow policy: the buffer keeps the oldest `limit` events (`bufferingOldest`). When an event does not fit, the
/// subscriber is terminated with `DNSSDError.subscriberTooSlow` after the events already buffered: it never
/// sees a stream with a silent gap, and a client that must not miss anything can browse again and get a fresh
/// snapshot. (Dropping the newest or the oldest quietly would leave its view of the network wrong.)
struct BrowseSubscriber {
    let id: UInt64
    let includeResolved: Bool
    let continuation: AsyncThrowingStream<BrowseEvent, any Error>.Continuation

    /// Queues an event; returns false if the buffer is full (the caller terminates the subscriber afterwards).
    func send(_ event: BrowseEvent) -> Bool {
        switch self.continuation.yield(event) {
        case .enqueued, .terminated:
            return true
        case .dropped:
            return false
        @unknown default:
            return true
        }
    }
}
