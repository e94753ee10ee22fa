import DNSCore
import DNSSDModel

/// Record look-ups over Avahi's record browser: a one-shot collection and a stream of changes.
enum RecordLookups {
    /// A validated request: the name in Avahi's text form, class, type and interface.
    struct Query {
        var avahiName: String
        var dnsClass: UInt16
        var type: UInt16
        var interface: Int32

        /// Validates the arguments of `lookupRecords` and `recordUpdates`.
        /// - Throws: `invalidName` for a malformed name, `invalidParameter` for a query-only type or class (Avahi's
        ///   record browser takes one concrete type and class) or an interface index below 1.
        init(name: String, type: UInt16, dnsClass: UInt16, interface: Int32?) throws(DNSSDError) {
            self.avahiName = try DNSName.avahiText(DNSName.recordLabels(name))
            // RFC 6895 §3.1: 0 is reserved, 251-255 are query types (IXFR, AXFR, MAILB, MAILA, ANY).
            guard type != 0, !(251...255).contains(type) else {
                throw DNSSDError(.invalidParameter, "type \(type) cannot be looked up: name one record type")
            }
            // RFC 6895 §3.2: 0 is reserved, 254 (NONE) and 255 (ANY) are query classes; mDNS uses the top bit of the
            // class field itself (RFC 6762 §10.2, §5.4).
            guard dnsClass != 0, dnsClass != 254, dnsClass != 255, dnsClass < 0x8000 else {
                throw DNSSDError(.invalidParameter, "class \(dnsClass) cannot be looked up: name one record class")
            }
            if let interface, interface < 1 {
                throw DNSSDError(.invalidParameter, "interface index \(interface) is not positive")
            }
            self.type = type
            self.dnsClass = dnsClass
            self.interface = interface ?? AvahiConversions.interfaceUnspecified
        }
    }

    struct CollectState {
        var handle: RecordBrowserHandle?
        var records = RecordSet()
    }

    /// Collects the records until all-for-now, the timeout or cancellation (the last two return what was seen).
    static func lookup(client: AvahiClientHandle, query: Query, timeout: Duration) async throws(DNSSDError)
        -> [MDNSRecord]
    {
        let operation = OneShotOperation<[MDNSRecord], CollectState>(client: client, state: CollectState()) { state in
            state.handle?.close()
            state.handle = nil
        }
        do {
            return try await operation.run(timeout: timeout) { operation in
                operation.state.handle = try RecordBrowserHandle(
                    client: client,
                    interface: query.interface,
                    name: query.avahiName,
                    dnsClass: query.dnsClass,
                    type: query.type
                ) { [weak operation] event in
                    guard let operation, !operation.isFinished else { return }
                    switch event.kind {
                    case .new, .remove: _ = operation.state.records.apply(event)
                    case .allForNow: operation.finish(.success(operation.state.records.all))
                    case .cacheExhausted: break
                    case .failure(let error): operation.finish(.failure(error))
                    }
                }
            } onTimeout: { operation in
                .success(operation.state.records.all)
            } onCancel: { operation in
                .success(operation.state.records.all)
            }
        } catch let error as DNSSDError {
            throw error
        } catch {
            // run() fails only with what start and the callbacks give it, all DNSSDError.
            throw DNSSDError(.avahiFailure, "record lookup failed: \(error)")
        }
    }

    /// Starts a stream of record changes; it ends when its consumer is cancelled, when the browser fails, when the
    /// connection to avahi-daemon is lost (`avahiUnavailable`) or when the consumer lags `bufferLimit` events behind
    /// (`subscriberTooSlow`).
    static func updates(client: AvahiClientHandle, query: Query, bufferLimit: Int) throws(DNSSDError)
        -> AsyncThrowingStream<MDNSRecordEvent, any Error>
    {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: MDNSRecordEvent.self,
            throwing: (any Error).self,
            bufferingPolicy: .bufferingOldest(max(bufferLimit, 1))
        )
        let subscription = RecordSubscription(client: client, continuation: continuation)
        // Termination runs inside the consumer's cancellation, with its task's status lock held; the poll thread,
        // holding the poll lock, takes that same task lock when it yields an event. Waiting for the poll lock here
        // deadlocked both (the daemon's event loops hung under fuzzed stub traffic): so never wait, enqueue.
        continuation.onTermination = { _ in client.poll.performLocked { subscription.end(nil) } }
        try client.poll.withLocked { () throws(DNSSDError) in try subscription.start(query) }
        return stream
    }
}

/// One `recordUpdates` stream: its record browser, the merged set, and the continuation it feeds.
final class RecordSubscription: @unchecked Sendable {
    // @unchecked Sendable: `handle`, `records`, `lossObserver` and `ended` are only touched with the poll lock held
    // (in `start`, `end` and the browser's callbacks); `client` and `continuation` are immutable.
    private let client: AvahiClientHandle
    private let continuation: AsyncThrowingStream<MDNSRecordEvent, any Error>.Continuation
    private var handle: RecordBrowserHandle?
    private var records = RecordSet()
    private var lossObserver: UInt64?
    private var ended = false

    init(client: AvahiClientHandle, continuation: AsyncThrowingStream<MDNSRecordEvent, any Error>.Continuation) {
        self.client = client
        self.continuation = continuation
    }

    /// Creates the browser. Lock held.
    func start(_ query: RecordLookups.Query) throws(DNSSDError) {
        self.handle = try RecordBrowserHandle(
            client: self.client,
            interface: query.interface,
            name: query.avahiName,
            dnsClass: query.dnsClass,
            type: query.type
        ) { [weak self] event in
            self?.handle(event)
        }
        self.lossObserver = self.client.addLossObserver { [weak self] in
            self?.end(DNSSDError(.avahiUnavailable, "avahi-daemon went away"))
        }
    }

    /// Frees the browser and finishes the stream (with `error` if given). Lock held; idempotent.
    func end(_ error: DNSSDError?) {
        guard !self.ended else { return }
        self.ended = true
        if let lossObserver = self.lossObserver {
            self.lossObserver = nil
            self.client.removeLossObserver(lossObserver)
        }
        self.handle?.close()
        self.handle = nil
        self.continuation.finish(throwing: error)
    }

    private func handle(_ event: RecordBrowserEvent) {
        guard !self.ended else { return }
        let output: MDNSRecordEvent
        switch event.kind {
        case .new, .remove:
            switch self.records.apply(event) {
            case .added(let record): output = .added(record)
            case .removed(let record): output = .removed(record)
            case nil: return
            }
        case .allForNow:
            output = .allForNow
        case .cacheExhausted:
            return
        case .failure(let error):
            self.end(error)
            return
        }
        if case .dropped = self.continuation.yield(output) {
            self.end(DNSSDError(.subscriberTooSlow, "the record stream's consumer fell too far behind"))
        }
    }
}
