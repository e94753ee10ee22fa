import DNSSDModel
import Logging

/// Shares Avahi browsers between subscribers: one `SharedBrowser` per `BrowseKey`, reference-counted by its
/// subscribers, re-created when avahi-daemon comes back.
final class BrowseHub: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is only touched with the poll lock held (`client.poll.withLocked`, or
    // in Avahi callbacks and client events, which run with the lock held).
    private let client: AvahiClientHandle
    private let logger: Logger
    private let bufferLimit: Int
    private var browsers: [BrowseKey: SharedBrowser] = [:]
    private var nextID: UInt64 = 0
    private var domainBrowser: DomainBrowserHandle?
    private var extraDomains: Set<String> = []

    init(client: AvahiClientHandle, logger: Logger, bufferLimit: Int) {
        self.client = client
        self.logger = logger
        self.bufferLimit = max(bufferLimit, 1)
        client.poll.withLocked {
            client.addListener { [weak self] event in self?.clientEvent(event) }
        }
    }

    /// Number of live subscribers over all browsers.
    var subscriberCount: Int {
        self.client.poll.withLocked { self.browsers.values.reduce(0) { $0 + $1.subscribers.count } }
    }

    /// Number of shared browsers.
    var browserCount: Int {
        self.client.poll.withLocked { self.browsers.count }
    }

    /// Subscribes to a browse; the stream ends when its consumer is cancelled or fails.
    /// - Throws: `avahiUnavailable` if avahi-daemon is not connected, or the Avahi error of the first browser.
    func subscribe(key: BrowseKey, includeResolved: Bool) throws(DNSSDError) -> AsyncThrowingStream<
        BrowseEvent, any Error
    > {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: BrowseEvent.self,
            throwing: (any Error).self,
            bufferingPolicy: .bufferingOldest(self.bufferLimit)
        )
        try self.add(key: key) { id in
            // Termination may come from a task being cancelled on an event loop: never wait for the lock there.
            continuation.onTermination = { [weak self, poll = self.client.poll] _ in
                guard let self else { return }
                poll.performLocked { [self] in self.unsubscribe(key: key, id: id) }
            }
            return .stream(id: id, includeResolved: includeResolved, continuation: continuation)
        }
        return stream
    }

    /// Subscribes `sink` to a browse: each event is handed over on the poll thread as it happens, with no buffer
    /// and no task between. The subscription ends with `cancel()` or when the browse fails (`sink.end`).
    /// - Throws: `avahiUnavailable` if avahi-daemon is not connected, or the Avahi error of the first browser.
    func subscribe(key: BrowseKey, includeResolved: Bool, sink: BrowseSink) throws(DNSSDError) -> BrowseSubscription {
        let poll = self.client.poll
        let id = try self.add(key: key) { [weak self] id in
            BrowseSubscriber(
                id: id, includeResolved: includeResolved,
                send: { event in
                    sink.event(event)
                    return true
                },
                finish: { error in
                    sink.end(error)
                    poll.performLocked { [weak self] in self?.unsubscribe(key: key, id: id) }
                })
        }
        return BrowseSubscription { [weak self] in
            poll.performLocked { [weak self] in self?.unsubscribe(key: key, id: id) }
        }
    }

    /// Adds the subscriber `make` builds for a fresh id to the browser of `key`, creating that browser if needed.
    @discardableResult
    private func add(
        key: BrowseKey, _ make: (UInt64) -> BrowseSubscriber
    ) throws(DNSSDError) -> UInt64 {
        try self.client.poll.withLocked { () throws(DNSSDError) -> UInt64 in
            _ = try self.client.connectedClient()
            self.nextID += 1
            let id = self.nextID
            let shared: SharedBrowser
            if let existing = self.browsers[key] {
                shared = existing
            } else {
                shared = SharedBrowser(key: key, client: self.client, logger: self.logger)
                try shared.start(extraDomains: self.extraDomains)
                self.browsers[key] = shared
                if key.domain == nil { self.startDomainBrowser() }
                self.logger.debug("browser created", metadata: ["dnssd.type": "\(key.avahiType)"])
            }
            shared.subscribe(make(id))
            shared.flushOverflow()
            return id
        }
    }

    /// Removes a subscriber; the last one frees the Avahi browser and resolvers.
    func unsubscribe(key: BrowseKey, id: UInt64) {
        self.client.poll.withLocked {
            guard let shared = self.browsers[key], shared.subscribers[id] != nil else { return }
            guard shared.unsubscribe(id) else { return }
            shared.close()
            self.browsers[key] = nil
            self.logger.debug("browser freed", metadata: ["dnssd.type": "\(key.avahiType)"])
            if !self.browsers.keys.contains(where: { $0.domain == nil }) {
                self.domainBrowser?.close()
                self.domainBrowser = nil
                self.extraDomains.removeAll()
            }
        }
    }

    /// Ends every subscriber with `error` (shutdown).
    func failAll(_ error: DNSSDError) {
        self.client.poll.withLocked {
            for shared in Array(self.browsers.values) { shared.fail(error) }
        }
    }

    // MARK: - Lock held

    private func clientEvent(_ event: AvahiClientEvent) {
        switch event {
        case .running, .registering:
            // Browsing works while avahi-daemon (re-)establishes its host name, so start as soon as connected.
            for shared in Array(self.browsers.values) where !shared.isStarted {
                do {
                    try shared.start(extraDomains: self.extraDomains)
                } catch {
                    self.logger.info(
                        "cannot re-create browser",
                        metadata: ["dnssd.type": "\(shared.key.avahiType)", "error": "\(error)"]
                    )
                    shared.fail(error)
                }
            }
            if self.browsers.keys.contains(where: { $0.domain == nil }) { self.startDomainBrowser() }
        case .lost:
            self.domainBrowser?.close()
            self.domainBrowser = nil
            self.extraDomains.removeAll()
            for shared in Array(self.browsers.values) { shared.stop() }
        }
    }

    private func startDomainBrowser() {
        guard self.domainBrowser == nil else { return }
        do {
            self.domainBrowser = try DomainBrowserHandle(client: self.client) { [weak self] event in
                self?.handleDomain(event)
            }
        } catch {
            self.logger.info("cannot browse for browse domains", metadata: ["error": "\(error)"])
        }
    }

    private func handleDomain(_ event: DomainBrowserEvent) {
        let domain = AvahiConversions.normalizedDomain(event.domain)
        guard !domain.isEmpty, domain != "local" else { return }
        switch event.kind {
        case .new:
            guard self.extraDomains.insert(domain).inserted else { return }
            self.logger.info("browse domain found", metadata: ["dnssd.domain": "\(domain)"])
            for shared in Array(self.browsers.values) where shared.key.domain == nil { shared.addDomain(domain) }
        case .remove:
            guard self.extraDomains.remove(domain) != nil else { return }
            for shared in Array(self.browsers.values) where shared.key.domain == nil { shared.removeDomain(domain) }
        case .allForNow, .cacheExhausted, .failure:
            break
        }
    }
}
