import DNSSDModel
import Synchronization

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
    private let withdrawn = Atomic<Bool>(false)

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
    public func updateTXT(_ txt: [String: String?]) throws(DNSSDError) {
        try self.updateTXT(TXTRecord(validating: txt))
    }

    /// Replaces the TXT record with raw strings (validated like `TXTRecord(validating:)`).
    /// - Throws: `invalidParameter` for a bad key or size, `notFound` after withdrawal, or the Avahi error.
    public func updateTXT(_ txt: TXTRecord) throws(DNSSDError) {
        let validated = try TXTRecord(validating: txt.strings)
        try self.registry.client.poll.withLocked { () throws(DNSSDError) in
            try self.record.updateTXT(validated)
        }
    }

    /// Withdraws the service and ends `events`. Idempotent: after the first call it returns without taking Avahi's
    /// lock, so releasing a withdrawn advertisement never waits for it.
    public func withdraw() {
        guard !self.withdrawn.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.registry.client.poll.withLocked { self.record.end() }
    }

    deinit {
        self.withdraw()
    }
}

extension Advertisement: ServiceRegistration {
    /// `id` as text, the id the API reports.
    public var registrationID: String { String(self.id) }
}
