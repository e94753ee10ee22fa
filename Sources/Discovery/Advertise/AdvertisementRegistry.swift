import DNSSDModel
import Logging

/// Every live advertisement; registers them again when avahi-daemon comes back.
final class AdvertisementRegistry: @unchecked Sendable {
    // @unchecked Sendable: `records` and `nextID` are only touched with the poll lock held; the rest is immutable.
    let client: AvahiClientHandle
    private let logger: Logger
    private var records: [UInt64: AdvertisementRecord] = [:]
    private var nextID: UInt64 = 0

    init(client: AvahiClientHandle, logger: Logger) {
        self.client = client
        self.logger = logger
        client.poll.withLocked {
            client.addListener { [weak self] event in self?.clientEvent(event) }
        }
    }

    /// Number of live advertisements.
    var count: Int {
        self.client.poll.withLocked { self.records.count }
    }

    /// Registers a new advertisement.
    /// - Throws: `avahiUnavailable` unless avahi-daemon is running, `nameConflict`, or the Avahi error.
    func add(_ spec: AdvertisementSpec) throws(DNSSDError) -> Advertisement {
        let (events, continuation) = AsyncStream.makeStream(of: AdvertisementEvent.self)
        let record = try self.client.poll.withLocked { () throws(DNSSDError) -> AdvertisementRecord in
            self.nextID += 1
            let record = AdvertisementRecord(
                id: self.nextID,
                spec: spec,
                client: self.client,
                logger: self.logger,
                continuation: continuation
            )
            try record.register()
            record.onEnd = { [weak self] id in self?.records[id] = nil }
            self.records[record.id] = record
            return record
        }
        continuation.onTermination = { [weak record, client] termination in
            guard case .cancelled = termination, let record else { return }
            client.poll.performLocked { record.end() }
        }
        return Advertisement(record: record, type: spec.type, events: events, registry: self)
    }

    /// Withdraws every advertisement (shutdown).
    func endAll() {
        self.client.poll.withLocked {
            for record in Array(self.records.values) { record.end() }
        }
    }

    // MARK: - Lock held

    private func clientEvent(_ event: AvahiClientEvent) {
        switch event {
        case .running:
            // In registration order, so earlier advertisements keep precedence for their names.
            for record in self.records.values.sorted(by: { $0.id < $1.id }) { record.resume() }
        case .registering, .lost:
            for record in self.records.values { record.suspend() }
        }
    }
}
