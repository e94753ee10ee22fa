import DNSSDModel
import Logging

/// What identifies a shared browser: every browse with the same key shares one set of Avahi objects.
struct BrowseKey: Hashable, Sendable {
    /// The base service type, e.g. `_http._tcp`.
    var type: String
    /// A normalized domain, or nil for every browse domain Avahi knows (`local` plus the domain browser's).
    var domain: String?
    /// A subtype label with underscore (`_printer`), or nil.
    var subtype: String?
    /// An interface index, or `AVAHI_IF_UNSPEC`.
    var interface: Int32

    /// The type string given to Avahi (`_printer._sub._http._tcp` for a subtype).
    var avahiType: String {
        self.subtype.map { "\($0)._sub.\(self.type)" } ?? self.type
    }
}

/// One Avahi service browser per domain, the long-lived resolvers of its instances while any subscriber wants them,
/// the merged instance table, and the subscribers.
///
/// Everything here runs with the poll lock held: Avahi callbacks, and `BrowseHub` methods inside `withLocked`.
final class SharedBrowser: @unchecked Sendable {
    // @unchecked Sendable: all state is only touched with the poll lock held (Avahi callbacks, BrowseHub inside
    // `withLocked`, and retry tasks that take the lock before looking at anything).
    private struct ResolverKey: Hashable, Sendable {
        var instance: InstanceKey
        var sighting: Sighting
    }

    let key: BrowseKey
    private let client: AvahiClientHandle
    private let logger: Logger

    /// Avahi browsers by domain; "" is Avahi's default domain (passed as NULL).
    private var avahiBrowsers: [String: ServiceBrowserHandle] = [:]
    /// Domains whose browser has not said ALL_FOR_NOW yet.
    private var pendingAllForNow: Set<String> = []
    private var allForNowReached = false
    private var table = ServiceInstanceTable()
    private var resolvers: [ResolverKey: ServiceResolverHandle] = [:]
    private var resolverFailures: [ResolverKey: Int] = [:]
    private(set) var subscribers: [UInt64: BrowseSubscriber] = [:]
    private var resolvingSubscribers = 0
    private var overflowed: [BrowseSubscriber] = []
    /// True between `start` and `stop`/`close`.
    private(set) var isStarted = false
    private var isClosed = false

    init(key: BrowseKey, client: AvahiClientHandle, logger: Logger) {
        self.key = key
        self.client = client
        var logger = logger
        logger[metadataKey: "dnssd.type"] = "\(key.avahiType)"
        self.logger = logger
    }

    var instanceCount: Int { self.table.count }

    // MARK: - Lifecycle

    /// Creates the Avahi browsers (one per domain). Lock held.
    /// - Throws: the first browser's error if none could be created.
    func start(extraDomains: Set<String>) throws(DNSSDError) {
        guard !self.isStarted, !self.isClosed else { return }
        self.isStarted = true
        self.allForNowReached = false
        let domains = self.key.domain.map { [$0] } ?? ([""] + extraDomains.sorted())
        var firstError: DNSSDError?
        for domain in domains {
            do {
                try self.addAvahiBrowser(domain: domain)
            } catch {
                firstError = firstError ?? error
            }
        }
        if self.avahiBrowsers.isEmpty, let firstError {
            self.isStarted = false
            throw firstError
        }
    }

    /// A browse domain appeared (only for browses over all domains). Lock held.
    func addDomain(_ domain: String) {
        guard self.key.domain == nil, self.isStarted, self.avahiBrowsers[domain] == nil else { return }
        do {
            try self.addAvahiBrowser(domain: domain)
        } catch {
            self.logger.info("cannot browse domain", metadata: ["dnssd.domain": "\(domain)", "error": "\(error)"])
        }
    }

    /// A browse domain disappeared: its browser goes and its instances are reported removed. Lock held.
    func removeDomain(_ domain: String) {
        guard self.key.domain == nil, let browser = self.avahiBrowsers.removeValue(forKey: domain) else { return }
        browser.close()
        self.pendingAllForNow.remove(domain)
        for change in self.table.removeAll(where: { $0.domain == domain }) {
            self.closeResolvers(of: change.before?.key)
            self.emit(change)
        }
        self.flushOverflow()
    }

    /// Avahi went away: free every Avahi object and report every instance removed. Lock held.
    func stop() {
        guard self.isStarted else { return }
        self.isStarted = false
        self.closeAvahiObjects()
        for change in self.table.removeAll() { self.emit(change) }
        self.flushOverflow()
    }

    /// The last subscriber left: free every Avahi object, silently. Lock held.
    func close() {
        self.isClosed = true
        self.isStarted = false
        self.closeAvahiObjects()
    }

    private func closeAvahiObjects() {
        for browser in self.avahiBrowsers.values { browser.close() }
        self.avahiBrowsers.removeAll()
        self.pendingAllForNow.removeAll()
        self.allForNowReached = false
        for resolver in self.resolvers.values { resolver.close() }
        self.resolvers.removeAll()
        self.resolverFailures.removeAll()
    }

    private func addAvahiBrowser(domain: String) throws(DNSSDError) {
        let browser = try ServiceBrowserHandle(
            client: self.client,
            interface: self.key.interface,
            type: self.key.avahiType,
            domain: domain.isEmpty ? nil : domain
        ) { [weak self] event in
            self?.handleBrowser(event, browserDomain: domain)
        }
        self.avahiBrowsers[domain] = browser
        self.pendingAllForNow.insert(domain)
    }

    // MARK: - Subscribers

    /// Adds a subscriber and replays the current instances as `added`, then `allForNow` if already reached.
    func subscribe(_ subscriber: BrowseSubscriber) {
        self.subscribers[subscriber.id] = subscriber
        if subscriber.includeResolved {
            self.resolvingSubscribers += 1
            if self.resolvingSubscribers == 1 { self.startAllResolvers() }
        }
        var ok = true
        for instance in self.table.instances.values.sorted(by: { $0.key.name < $1.key.name }) where ok {
            ok = subscriber.send(.added(instance.service(includeResolved: subscriber.includeResolved)))
        }
        if ok, self.allForNowReached { ok = subscriber.send(.allForNow) }
        if !ok { self.overflowed.append(subscriber) }
    }

    /// Removes a subscriber; returns true if none is left.
    func unsubscribe(_ id: UInt64) -> Bool {
        if let subscriber = self.subscribers.removeValue(forKey: id), subscriber.includeResolved {
            self.resolvingSubscribers -= 1
            if self.resolvingSubscribers == 0 {
                for resolver in self.resolvers.values { resolver.close() }
                self.resolvers.removeAll()
                self.resolverFailures.removeAll()
                self.table.clearResolutions()
            }
        }
        return self.subscribers.isEmpty
    }

    /// Ends every subscriber with `error` (ending unsubscribes them).
    func fail(_ error: DNSSDError) {
        for subscriber in self.subscribers.values { subscriber.finish(error) }
    }

    /// Terminates subscribers whose buffer overflowed. Call last: it may re-enter `BrowseHub.unsubscribe`.
    func flushOverflow() {
        guard !self.overflowed.isEmpty else { return }
        let overflowed = self.overflowed
        self.overflowed.removeAll()
        for subscriber in overflowed {
            self.logger.info("browse subscriber too slow; dropping it", metadata: ["subscriber": "\(subscriber.id)"])
            subscriber.finish(
                DNSSDError(
                    .subscriberTooSlow,
                    "the subscriber did not consume browse events fast enough and was dropped"
                )
            )
        }
    }

    /// - Parameter callbackAt: when the Avahi callback that caused `change` started, if a benchmark is observing
    ///   (`BrowseBenchmarkHook`); 0 otherwise.
    private func emit(_ change: InstanceChange, callbackAt: UInt64 = 0) {
        if callbackAt != 0, let observer = BrowseBenchmarkHook.observer, let event = change.event(includeResolved: false) {
            observer(event, callbackAt)
        }
        var resolvedEvent: BrowseEvent??
        var plainEvent: BrowseEvent??
        for subscriber in self.subscribers.values {
            let event: BrowseEvent?
            if subscriber.includeResolved {
                if resolvedEvent == nil { resolvedEvent = .some(change.event(includeResolved: true)) }
                event = resolvedEvent!
            } else {
                if plainEvent == nil { plainEvent = .some(change.event(includeResolved: false)) }
                event = plainEvent!
            }
            if let event, !subscriber.send(event) { self.overflowed.append(subscriber) }
        }
    }

    private func emitToAll(_ event: BrowseEvent) {
        for subscriber in self.subscribers.values where !subscriber.send(event) {
            self.overflowed.append(subscriber)
        }
    }

    // MARK: - Avahi callbacks (poll thread, lock held)

    private func handleBrowser(_ event: ServiceBrowserEvent, browserDomain: String) {
        guard self.isStarted else { return }
        let callbackAt = BrowseBenchmarkHook.observer == nil ? 0 : BrowseBenchmarkHook.monotonicNanoseconds()
        let instance = InstanceKey(
            name: event.name,
            type: self.key.type,
            domain: AvahiConversions.normalizedDomain(event.domain)
        )
        let sighting = Sighting(interface: event.interface, proto: event.proto)
        switch event.kind {
        case .new:
            let name = AvahiConversions.interfaceName(event.interface)
            if let change = self.table.add(instance, on: sighting, interfaceName: name) {
                self.logger.debug(
                    "service sighted",
                    metadata: ["dnssd.name": "\(event.name)", "if": "\(event.interface)", "proto": "\(event.proto)"]
                )
                self.emit(change, callbackAt: callbackAt)
                if self.resolvingSubscribers > 0 {
                    self.startResolver(ResolverKey(instance: instance, sighting: sighting))
                }
            }
        case .remove:
            let resolverKey = ResolverKey(instance: instance, sighting: sighting)
            self.resolvers.removeValue(forKey: resolverKey)?.close()
            self.resolverFailures[resolverKey] = nil
            if let change = self.table.remove(instance, on: sighting) { self.emit(change, callbackAt: callbackAt) }
        case .allForNow:
            self.pendingAllForNow.remove(browserDomain)
            if self.pendingAllForNow.isEmpty, !self.allForNowReached {
                self.allForNowReached = true
                self.emitToAll(.allForNow)
            }
        case .cacheExhausted:
            break
        case .failure(let error):
            self.logger.info(
                "service browser failed", metadata: ["dnssd.domain": "\(browserDomain)", "error": "\(error)"])
            self.avahiBrowsers.removeValue(forKey: browserDomain)?.close()
            self.pendingAllForNow.remove(browserDomain)
            if self.avahiBrowsers.isEmpty {
                self.fail(error)
            } else if self.pendingAllForNow.isEmpty, !self.allForNowReached {
                self.allForNowReached = true
                self.emitToAll(.allForNow)
            }
        }
        self.flushOverflow()
    }

    private func startAllResolvers() {
        guard self.isStarted else { return }
        for (instance, sighting) in self.table.allSightings {
            self.startResolver(ResolverKey(instance: instance, sighting: sighting))
        }
    }

    private func startResolver(_ resolverKey: ResolverKey) {
        guard self.isStarted, self.resolvers[resolverKey] == nil else { return }
        do {
            self.resolvers[resolverKey] = try ServiceResolverHandle(
                client: self.client,
                interface: resolverKey.sighting.interface,
                proto: resolverKey.sighting.proto,
                name: resolverKey.instance.name,
                type: self.key.type,
                domain: resolverKey.instance.domain
            ) { [weak self] event in
                self?.handleResolver(event, resolverKey: resolverKey)
            }
        } catch {
            self.logger.info(
                "cannot start resolver",
                metadata: ["dnssd.name": "\(resolverKey.instance.name)", "error": "\(error)"]
            )
        }
    }

    private func closeResolvers(of instance: InstanceKey?) {
        guard let instance else { return }
        for key in self.resolvers.keys where key.instance == instance {
            self.resolvers.removeValue(forKey: key)?.close()
            self.resolverFailures[key] = nil
        }
    }

    private func handleResolver(_ event: ServiceResolverEvent, resolverKey: ResolverKey) {
        guard self.isStarted else { return }
        switch event.result {
        case .success(let found):
            self.resolverFailures[resolverKey] = nil
            let resolution = Resolution(host: found.host, port: found.port, address: found.address, txt: found.txt)
            if let change = self.table.resolved(resolverKey.instance, on: resolverKey.sighting, resolution) {
                self.emit(change)
            }
        case .failure(let error):
            // A resolver that timed out stays dead in Avahi; retry a few times with a growing delay while the
            // instance is still there.
            self.resolvers.removeValue(forKey: resolverKey)?.close()
            let failures = (self.resolverFailures[resolverKey] ?? 0) + 1
            self.resolverFailures[resolverKey] = failures
            self.logger.debug(
                "resolver failed",
                metadata: [
                    "dnssd.name": "\(resolverKey.instance.name)", "error": "\(error)", "failures": "\(failures)",
                ]
            )
            guard failures <= 5 else { break }
            let poll = self.client.poll
            Task { [weak self] in
                try? await Task.sleep(for: .seconds(failures))
                guard let self else { return }
                poll.performLocked { [self] in
                    guard self.resolvingSubscribers > 0, self.resolverFailures[resolverKey] != nil,
                        self.table.instances[resolverKey.instance]?.sightings[resolverKey.sighting] != nil
                    else { return }
                    self.startResolver(resolverKey)
                }
            }
        }
        self.flushOverflow()
    }
}
