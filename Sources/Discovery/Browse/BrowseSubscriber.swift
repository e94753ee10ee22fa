import DNSSDModel

/// One consumer of a shared browser: a stream with its own bounded buffer (so it can neither block the poll thread
/// nor other subscribers), or a ``BrowseSink`` that takes each event at once.
///
/// Overflow policy of a stream: the buffer keeps the oldest `limit` events (`bufferingOldest`). When an event does not
/// fit, the subscriber is terminated with `DNSSDError.subscriberTooSlow` after the events already buffered: it never
/// sees a stream with a silent gap, and a client that must not miss anything can browse again and get a fresh
/// snapshot. (Dropping the newest or the oldest quietly would leave its view of the network wrong.)
struct BrowseSubscriber {
    let id: UInt64
    let includeResolved: Bool
    /// Queues or hands over an event; false if a stream's buffer is full (the caller terminates it afterwards).
    let send: (BrowseEvent) -> Bool
    /// Ends the subscriber, with an error or none; it is then unsubscribed.
    let finish: (DNSSDError?) -> Void

    /// A subscriber that yields into `continuation`.
    static func stream(
        id: UInt64, includeResolved: Bool, continuation: AsyncThrowingStream<BrowseEvent, any Error>.Continuation
    ) -> BrowseSubscriber {
        BrowseSubscriber(
            id: id, includeResolved: includeResolved,
            send: { event in
                switch continuation.yield(event) {
                case .enqueued, .terminated: return true
                case .dropped: return false
                @unknown default: return true
                }
            },
            finish: { error in continuation.finish(throwing: error) })
    }
}
