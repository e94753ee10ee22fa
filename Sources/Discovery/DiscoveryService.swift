import CAvahi
import DNSSDModel
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// DNS-SD over Avahi: the one object a process creates and shares.
///
/// It owns the process's single Avahi client (`AVAHI_CLIENT_NO_FAIL` on a threaded poll): it works while
/// avahi-daemon is absent (calls fail with `avahiUnavailable`), connects when the daemon appears, and after a daemon
/// restart re-creates every browser and re-registers every advertisement by itself. Browses of the same
/// (type, domain, subtype, interface) share one Avahi browser.
///
/// Creating it starts nothing; ``start()`` starts the poll thread and the connection (swift-service-lifecycle's
/// rule for libraries: no thread or task in an `init`).
///
/// ```swift
/// let discovery = try DiscoveryService(logger: logger)
/// try discovery.start()
/// for try await event in try discovery.browse(type: "_http._tcp", resolve: true) { ... }
/// let ad = try discovery.advertise(name: "My Web", type: "_http._tcp", port: 8080, txt: ["path": "/"])
/// ```
public final class DiscoveryService: Sendable {
    /// Default time limit of `resolve`, `browseTypes` and `browseDomains`.
    public static let defaultTimeout: Duration = .seconds(5)

    private let poll: ThreadedPoll
    let client: AvahiClientHandle
    /// Events buffered per browse or record-stream subscriber before it is dropped as too slow.
    let subscriberBufferLimit: Int
    private let hub: BrowseHub
    private let registry: AdvertisementRegistry
    private let logger: Logger

    /// Creates the service; ``start()`` starts connecting to avahi-daemon.
    /// - Parameters:
    ///   - logger: where the module logs (info and below).
    ///   - dbusSystemBusAddress: if set, exported as `DBUS_SYSTEM_BUS_ADDRESS` before the first connection. libdbus
    ///     reads that variable once per process, at the first system-bus connection, so this only has an effect if
    ///     nothing in the process has connected to the system bus yet.
    ///   - subscriberBufferLimit: events buffered per browse subscriber before it is dropped as too slow.
    /// - Throws: `avahiFailure` if Avahi cannot create its poll.
    public init(
        logger: Logger = Logger(label: "discoverd.discovery"),
        dbusSystemBusAddress: String? = nil,
        subscriberBufferLimit: Int = 10_000
    ) throws(DNSSDError) {
        if let dbusSystemBusAddress {
            setenv("DBUS_SYSTEM_BUS_ADDRESS", dbusSystemBusAddress, 1)
        }
        self.logger = logger
        self.poll = try ThreadedPoll()
        self.client = AvahiClientHandle(poll: self.poll, logger: logger)
        self.subscriberBufferLimit = max(subscriberBufferLimit, 1)
        self.hub = BrowseHub(client: self.client, logger: logger, bufferLimit: subscriberBufferLimit)
        self.registry = AdvertisementRegistry(client: self.client, logger: logger)
    }

    /// Starts the poll thread and connecting to avahi-daemon (and re-connecting whenever it comes back). Idempotent;
    /// until it is called every call fails with `avahiUnavailable`.
    /// - Throws: `avahiFailure` if the poll thread cannot be started.
    public func start() throws(DNSSDError) {
        guard try self.poll.start() else { return }
        self.client.start()
    }

    deinit {
        self.shutdown()
    }

    /// Withdraws every advertisement, ends every browse stream, closes the Avahi client and stops the poll thread.
    /// Idempotent. Do not call from inside a stream consumer that holds no other reference (it is cheap to call twice).
    public func shutdown() {
        self.registry.endAll()
        self.hub.failAll(DNSSDError(.avahiUnavailable, "the discovery service is shutting down"))
        self.client.close()
        self.poll.stop()
    }

    // MARK: - State

    /// The connection state right now (without waiting for Avahi's lock).
    public var avahiState: AvahiState {
        self.client.publishedState.withLock { $0 }
    }

    /// State changes, starting with the current state.
    public var avahiStates: AsyncStream<AvahiState> {
        self.client.stateStream()
    }

    /// Live Avahi objects (browsers, resolvers, entry groups), for Status and benchmarks.
    public var objectCounts: AvahiObjectCounts {
        self.poll.withLocked { self.client.counts }
    }

    /// Counters for Status.
    public struct Statistics: Hashable, Sendable {
        /// Live browse subscribers.
        public var subscribers: Int
        /// Shared browsers (distinct type/domain/subtype/interface).
        public var sharedBrowsers: Int
        /// Live advertisements.
        public var advertisements: Int
        /// Live Avahi objects.
        public var objects: AvahiObjectCounts
    }

    /// Counters for Status.
    public var statistics: Statistics {
        Statistics(
            subscribers: self.hub.subscriberCount,
            sharedBrowsers: self.hub.browserCount,
            advertisements: self.registry.count,
            objects: self.objectCounts
        )
    }

    /// Runs `body` on the thread this service keeps for waiting on Avahi, and returns its result.
    ///
    /// The synchronous methods (`browse`, `advertise`, and `Advertisement`'s `updateTXT` and `withdraw`) take Avahi's
    /// lock, which its poll thread holds while it works, and may wait for a D-Bus round trip to avahi-daemon. Code
    /// whose executor must not block (a SwiftNIO event loop) calls them through this; the async methods already
    /// wait there.
    public func onAvahiThread<Result: Sendable>(
        _ body: @escaping @Sendable () throws -> Result
    ) async throws -> Result {
        try await self.poll.offloaded(body)
    }

    // MARK: - Browse

    /// Browses for services of a type.
    ///
    /// The stream starts with the instances already known (as `added`, then `allForNow` if Avahi reached it), then
    /// follows the network. One instance seen on several interfaces/protocols is one `Service`. If avahi-daemon goes
    /// away every known instance is reported `removed`; they are `added` again when it is back. Cancelling the
    /// consuming task ends the subscription; the last subscriber of a browse frees its Avahi objects. A subscriber
    /// that falls more than `subscriberBufferLimit` events behind ends with `subscriberTooSlow`.
    /// - Parameters:
    ///   - type: `_name._tcp` or `_name._udp`; any service name Avahi can report (`browsableServiceType`), not only
    ///     RFC 6335's 15-character ones.
    ///   - domain: a browse domain; nil browses `local` and every browse domain Avahi reports.
    ///   - subtype: a subtype such as `_printer`.
    ///   - interface: an interface name; nil for all.
    ///   - resolve: also resolve each instance (host, port, addresses, TXT) and report their changes.
    /// - Throws: `invalidServiceType`, `invalidName`, `invalidParameter` (unknown interface), `avahiUnavailable`.
    public func browse(
        type: String,
        domain: String? = nil,
        subtype: String? = nil,
        interface: String? = nil,
        resolve: Bool = false
    ) throws(DNSSDError) -> AsyncThrowingStream<BrowseEvent, any Error> {
        let key = try self.browseKey(type: type, domain: domain, subtype: subtype, interface: interface)
        return try self.hub.subscribe(key: key, includeResolved: resolve)
    }

    /// Browses for services of a type, handing each event to `sink` as it happens: on Avahi's poll thread, with no
    /// buffer or task between (the daemon's fan-out). The same events as ``browse(type:domain:subtype:interface:resolve:)``;
    /// `sink` must return quickly and never block. Cancel the subscription to end it.
    /// - Throws: as ``browse(type:domain:subtype:interface:resolve:)``.
    public func browse(
        type: String,
        domain: String? = nil,
        subtype: String? = nil,
        interface: String? = nil,
        resolve: Bool = false,
        sink: BrowseSink
    ) throws(DNSSDError) -> BrowseSubscription {
        let key = try self.browseKey(type: type, domain: domain, subtype: subtype, interface: interface)
        return try self.hub.subscribe(key: key, includeResolved: resolve, sink: sink)
    }

    private func browseKey(
        type: String,
        domain: String?,
        subtype: String?,
        interface: String?
    ) throws(DNSSDError) -> BrowseKey {
        let parsed = try ServiceValidation.browsableServiceType(type)
        var normalizedDomain: String?
        if let domain {
            try ServiceValidation.domain(domain)
            normalizedDomain = AvahiConversions.normalizedDomain(domain)
        }
        let sub = try subtype.map { (value) throws(DNSSDError) in
            try ServiceValidation.subtype(value, of: parsed.string)
        }
        var index = AvahiConversions.interfaceUnspecified
        if let interface {
            guard let found = AvahiConversions.interfaceIndex(interface) else {
                throw DNSSDError(.invalidParameter, "no interface named \"\(interface)\"")
            }
            index = found
        }
        return BrowseKey(type: parsed.string, domain: normalizedDomain, subtype: sub, interface: index)
    }

    // MARK: - Advertise

    /// Publishes a service.
    ///
    /// Everything is validated before Avahi is asked. The name defaults to the host name. If the name is taken the
    /// next alternative (`Name #2`, …) is used; `events` reports the final name. If avahi-daemon restarts, the
    /// service is registered again under the requested name.
    /// - Parameters:
    ///   - name: the instance name (≤ 63 bytes of UTF-8), or nil for the host name.
    ///   - type: `_name._tcp` or `_name._udp`.
    ///   - port: 0-65535.
    ///   - txt: the TXT record (see `TXTRecord(validating:)`).
    ///   - subtypes: subtypes such as `_printer`.
    ///   - domain: the domain to register in; nil for Avahi's default (`local`).
    ///   - host: the SRV target host; nil for this host.
    /// - Throws: `invalidServiceType`, `invalidName`, `invalidParameter`, `avahiUnavailable` (also while the daemon
    ///   is away: existing advertisements survive restarts, new ones are refused), `nameConflict`.
    public func advertise(
        name: String? = nil,
        type: String,
        port: Int,
        txt: TXTRecord = TXTRecord(),
        subtypes: [String] = [],
        domain: String? = nil,
        host: String? = nil
    ) throws(DNSSDError) -> Advertisement {
        if let name { try ServiceValidation.instanceName(name) }
        let parsed = try ServiceValidation.serviceType(type)
        let validPort = try ServiceValidation.port(port)
        let validTXT = try TXTRecord(validating: txt.strings)
        var fullSubtypes: [String] = []
        for subtype in subtypes {
            let label = try ServiceValidation.subtype(subtype, of: parsed.string)
            fullSubtypes.append("\(label)._sub.\(parsed.string)")
        }
        if let domain { try ServiceValidation.domain(domain) }
        if let host { try ServiceValidation.hostName(host) }
        let spec = AdvertisementSpec(
            requestedName: name,
            type: parsed.string,
            port: validPort,
            txt: validTXT,
            subtypes: fullSubtypes,
            domain: domain,
            host: host
        )
        return try self.registry.add(spec)
    }

    /// Publishes a service with a TXT record given as key/value pairs (see the other `advertise`); a `nil` value is
    /// a boolean attribute (`key` without `=`, RFC 6763 §6.4).
    public func advertise(
        name: String? = nil,
        type: String,
        port: Int,
        txt: [String: String?],
        subtypes: [String] = [],
        domain: String? = nil,
        host: String? = nil
    ) throws(DNSSDError) -> Advertisement {
        try self.advertise(
            name: name,
            type: type,
            port: port,
            txt: TXTRecord(validating: txt),
            subtypes: subtypes,
            domain: domain,
            host: host
        )
    }

    // MARK: - One-shot lookups

    /// Resolves one service instance: host, port, addresses (IPv4 and IPv6) and TXT.
    ///
    /// Queries over IPv4 and IPv6 at once; returns when both answered, or shortly (250 ms) after the first answer.
    /// - Throws: `invalidName`, `invalidServiceType`, `avahiUnavailable`, `notFound` (Avahi gave up: nobody
    ///   answered for the instance), `timeout` (no answer within `timeout`), `CancellationError`.
    public func resolve(
        name: String,
        type: String,
        domain: String? = nil,
        timeout: Duration = DiscoveryService.defaultTimeout
    ) async throws -> DNSSDService {
        try ServiceValidation.instanceName(name)
        let parsed = try ServiceValidation.browsableServiceType(type)
        if let domain { try ServiceValidation.domain(domain) }
        let domainName = domain.map(AvahiConversions.normalizedDomain) ?? "local"
        return try await ServiceLookups.resolve(
            client: self.client,
            key: InstanceKey(name: name, type: parsed.string, domain: domainName),
            timeout: timeout
        )
    }

    /// Lists the service types present in a domain (`_http._tcp`, …), sorted.
    ///
    /// Collects until Avahi says all-for-now; after `timeout` returns what it has.
    /// - Throws: `invalidName`, `avahiUnavailable`, `CancellationError`.
    public func browseTypes(
        domain: String? = nil,
        timeout: Duration = DiscoveryService.defaultTimeout
    ) async throws -> [String] {
        if let domain { try ServiceValidation.domain(domain) }
        return try await ServiceLookups.browseTypes(client: self.client, domain: domain, timeout: timeout)
    }

    /// Lists the browse domains: `local` plus those Avahi discovers or is configured with, sorted.
    ///
    /// Collects until Avahi says all-for-now; after `timeout` returns what it has.
    /// - Throws: `avahiUnavailable`, `CancellationError`.
    public func browseDomains(timeout: Duration = DiscoveryService.defaultTimeout) async throws -> [String] {
        try await ServiceLookups.browseDomains(client: self.client, timeout: timeout)
    }
}
