/// An event of an advertisement.
public enum AdvertisementEvent: Hashable, Sendable {
    /// The service is published under `name` (the final name after any collision renames). Sent once.
    case registered(name: String)
    /// A later collision (or re-registration after an avahi-daemon restart) changed the name.
    case renamed(name: String)
    /// The registration failed for good; the stream ends after this event.
    case failed(DiscoveryError)
}

/// A published DNS-SD service. It stays published until `withdraw()`, until the object is released, or until a
/// task iterating `events` is cancelled.
///
/// When avahi-daemon restarts, the service is registered again by itself under the requested name.
public final class Advertisement: Sendable {
    /// A process-unique identifier (the daemon's registration id).
    public let id: UInt64
    /// `registered` first, then `renamed` or `failed`; ends when the advertisement is withdrawn or failed.
    /// Meant for one consumer.
    public let events: AsyncStream<AdvertisementEvent>
    private let record: AdvertisementRecord
    private let registry: AdvertisementRegistry

    init(
        record: AdvertisementRecord,
        type: String,
        events: AsyncStream<AdvertisementEvent>,
        registry: AdvertisementRegistry
    ) {
        self.id = record.id
        self.type = type
        self.record = record
        self.events = events
        self.registry = registry
    }

    /// The name last reported in `registered`/`renamed`, or nil before registration completed.
    public var name: String? {
        self.registry.client.poll.withLocked { self.record.announcedName }
    }

    /// The service type.
    public let type: String

    /// Replaces the TXT record with key/value pairs; a `nil` value is a boolean attribute (`key` without `=`).
    /// - Throws: `invalidParameter` for a bad key or size, `notFound` after withdrawal, or the Avahi error.
    public func updateTXT(_ txt: [String: String?]) throws(DiscoveryError) {
        try self.updateTXT(TXTRecord(validating: txt))
    }

    /// Replaces the TXT record with raw strings (validated like `TXTRecord(validating:)`).
    /// - Throws: `invalidParameter` for a bad key or size, `notFound` after withdrawal, or the Avahi error.
    public func updateTXT(_ txt: TXTRecord) throws(DiscoveryError) {
        let validated = try TXTRecord(validating: txt.strings)
        try self.registry.client.poll.withLocked { () throws(DiscoveryError) in
            try self.record.updateTXT(validated)
        }
    }

    /// Withdraws the service and ends `events`. Idempotent.
    public func withdraw() {
        self.registry.client.poll.withLocked { self.record.end() }
    }

    deinit {
        self.withdraw()
    }
}
