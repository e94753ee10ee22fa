import DNSSDModel
import Discovery
import Synchronization
import WideAreaDiscovery

/// DNS-SD for a program: browse, resolve, advertise and list types in one domain or in every browse domain, over
/// mDNS (Avahi) for `local` and over unicast DNS for every other domain, as the daemon does it.
///
/// It chooses the side for each call (``usesUnicast(_:)``), merges the streams of a browse over every browse
/// domain, and keeps Avahi's thread rule: the synchronous Avahi calls (creating a browse or an advertisement,
/// changing its TXT, withdrawing it) wait for Avahi's lock on ``DiscoveryService/onAvahiThread(_:)``, never on the
/// caller's executor, which may be an event loop.
///
/// ```swift
/// let dnssd = ServiceDiscovery(mdns: try DiscoveryService(), unicast: wideArea)
/// for try await event in try await dnssd.browse(type: "_ipp._tcp", resolve: true) { ... }
/// let registration = try await dnssd.advertise(name: "Web", type: "_http._tcp", port: 8080)
/// ```
public final class ServiceDiscovery: Sendable {
    /// Default time limit of the one-shot calls.
    public static let defaultTimeout = DiscoveryService.defaultTimeout

    /// DNS-SD over mDNS, through Avahi.
    public let mdns: DiscoveryService
    /// DNS-SD over unicast DNS; nil when only the link is wanted.
    public let unicast: UnicastDNSSD?

    /// Creates the facade over the two sides.
    /// - Parameters:
    ///   - mdns: the process's Avahi client.
    ///   - unicast: unicast DNS-SD; without it every domain goes to Avahi.
    public init(mdns: DiscoveryService, unicast: UnicastDNSSD? = nil) {
        self.mdns = mdns
        self.unicast = unicast
    }

    /// Whether a call for `domain` goes to unicast DNS: a domain other than `local` (and its subdomains and the
    /// link-local reverse zones), when unicast DNS-SD is configured. Nil means every browse domain, not unicast.
    public func usesUnicast(_ domain: String?) -> Bool {
        unicast != nil && WideAreaDomain.isUnicast(domain)
    }

    // MARK: - Browse

    /// Browses `type`.
    ///
    /// With a domain: that domain, over mDNS or unicast DNS. Without one (and without an interface): the link and
    /// every unicast browse domain (the configured ones and the `lb._dns-sd._udp` ones, RFC 6763 §11) as one stream,
    /// whose `allForNow` comes once every source said it; a failing unicast domain stops contributing, the link's
    /// failure ends the stream. Cancelling the consuming task ends the browse.
    /// - Parameters:
    ///   - interface: an interface name (mDNS only); nil for all.
    ///   - resolve: also resolve each instance (host, port, addresses, TXT) and report their changes.
    /// - Throws: ``DNSSDError`` (`invalidServiceType`, `invalidName`, `invalidParameter`, `avahiUnavailable`).
    public func browse(
        type: String, domain: String? = nil, subtype: String? = nil, interface: String? = nil, resolve: Bool = false
    ) async throws -> AsyncThrowingStream<BrowseEvent, any Error> {
        if let unicast, usesUnicast(domain), let domain {
            return try unicast.browse(type: type, domain: domain, subtype: subtype, resolve: resolve)
        }
        let mdns = self.mdns
        let local = try await mdns.onAvahiThread {
            try mdns.browse(type: type, domain: domain, subtype: subtype, interface: interface, resolve: resolve)
        }
        guard let unicast, domain == nil, interface == nil else { return local }
        var streams = [local]
        for domain in await unicast.defaultBrowseDomains() {
            if let stream = try? unicast.browse(type: type, domain: domain, subtype: subtype, resolve: resolve) {
                streams.append(stream)
            }
        }
        return MergedBrowse.merge(streams)
    }

    /// Browses `type` like ``browse(type:domain:subtype:interface:resolve:)``, handing each event to `sink` as it
    /// happens, with no stream between: an mDNS event is handed over on Avahi's poll thread, a unicast one on the
    /// task that polls the zone. Over every browse domain, `allForNow` comes once every source said it, a failing
    /// unicast domain only stops contributing, and the link's end ends the browse. Cancel the subscription to end it.
    /// - Throws: ``DNSSDError`` (`invalidServiceType`, `invalidName`, `invalidParameter`, `avahiUnavailable`).
    public func browse(
        type: String, domain: String? = nil, subtype: String? = nil, interface: String? = nil, resolve: Bool = false,
        sink: BrowseSink
    ) async throws -> BrowseSubscription {
        if let unicast, usesUnicast(domain), let domain {
            let stream = try unicast.browse(type: type, domain: domain, subtype: subtype, resolve: resolve)
            return MergedBrowse.forward(stream, to: sink)
        }
        guard let unicast, domain == nil, interface == nil else {
            let mdns = self.mdns
            return try await mdns.onAvahiThread {
                try mdns.browse(
                    type: type, domain: domain, subtype: subtype, interface: interface, resolve: resolve, sink: sink)
            }
        }
        var unicastStreams: [AsyncThrowingStream<BrowseEvent, any Error>] = []
        for domain in await unicast.defaultBrowseDomains() {
            if let stream = try? unicast.browse(type: type, domain: domain, subtype: subtype, resolve: resolve) {
                unicastStreams.append(stream)
            }
        }
        let merged = MergedBrowse.Sink(sink, sources: 1 + unicastStreams.count)
        let mdns = self.mdns
        let local = try await mdns.onAvahiThread {
            try mdns.browse(type: type, subtype: subtype, resolve: resolve, sink: merged.sink(for: 0))
        }
        let others = unicastStreams.enumerated().map { index, stream in
            MergedBrowse.forward(stream, to: merged.sink(for: index + 1))
        }
        return BrowseSubscription {
            local.cancel()
            for other in others { other.cancel() }
        }
    }

    /// The services present once every source said all-for-now, or when `timeout` passes, sorted by name and
    /// domain (a Browse without `more`).
    /// - Throws: what ``browse(type:domain:subtype:interface:resolve:)`` throws, and the stream's error.
    public func services(
        type: String, domain: String? = nil, subtype: String? = nil, interface: String? = nil, resolve: Bool = false,
        timeout: Duration = .seconds(3)
    ) async throws -> [DNSSDService] {
        let stream = try await browse(type: type, domain: domain, subtype: subtype, interface: interface, resolve: resolve)
        return try await Self.collect(stream, timeout: timeout)
    }

    /// The instances a browse stream reports until its first `allForNow`, or until `timeout`.
    static func collect(
        _ stream: AsyncThrowingStream<BrowseEvent, any Error>, timeout: Duration
    ) async throws -> [DNSSDService] {
        let found = Found()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await event in stream {
                    switch event {
                    case .added(let service), .changed(let service):
                        found.services.withLock { $0[service.instanceKey] = service }
                    case .removed(let service):
                        _ = found.services.withLock { $0.removeValue(forKey: service.instanceKey) }
                    case .allForNow:
                        return
                    }
                }
            }
            group.addTask { try await Task.sleep(for: timeout) }
            try await group.next()
            group.cancelAll()
        }
        return found.services.withLock { $0.values.sorted { ($0.name, $0.domain) < ($1.name, $1.domain) } }
    }

    /// What a one-shot browse found so far.
    private final class Found: Sendable {
        let services = Mutex<[String: DNSSDService]>([:])
    }

    // MARK: - Resolve, types, domains

    /// Resolves one instance: host, port, addresses and TXT.
    /// - Throws: ``DNSSDError`` (`invalidName`, `invalidServiceType`, `notFound`, `timeout`, `avahiUnavailable`) or,
    ///   in a unicast domain, ``WideAreaError``.
    public func resolve(
        name: String, type: String, domain: String? = nil, timeout: Duration = ServiceDiscovery.defaultTimeout
    ) async throws -> DNSSDService {
        if let unicast, usesUnicast(domain), let domain {
            return try await unicast.resolve(name: name, type: type, domain: domain)
        }
        return try await mdns.resolve(name: name, type: type, domain: domain, timeout: timeout)
    }

    /// The service types present in `domain` (nil: `local`), sorted.
    public func browseTypes(
        domain: String? = nil, timeout: Duration = ServiceDiscovery.defaultTimeout
    ) async throws -> [String] {
        if let unicast, usesUnicast(domain), let domain {
            return try await unicast.browseTypes(domain: domain)
        }
        return try await mdns.browseTypes(domain: domain, timeout: timeout)
    }

    /// The browse domains: `local`, those Avahi reports, and the unicast ones (configured and enumerated), sorted.
    public func browseDomains(timeout: Duration = ServiceDiscovery.defaultTimeout) async throws -> [String] {
        let local = try await mdns.browseDomains(timeout: timeout)
        let unicast = await self.unicast?.browseDomains() ?? []
        return Array(Set(local + unicast)).sorted()
    }

    // MARK: - Advertise

    /// Publishes a service: on the link through Avahi, or in a unicast domain by DNS UPDATE.
    ///
    /// The registration's `events` say `registered` (with the final name), later `renamed` or `failed`. Withdraw
    /// it with ``withdraw(_:)``; releasing it withdraws it too.
    /// - Throws: ``DNSSDError`` for bad arguments or `avahiUnavailable`; ``WideAreaError`` `noKey` in a unicast domain
    ///   without a TSIG key.
    public func advertise(
        name: String? = nil, type: String, port: Int, txt: [String: String?] = [:], subtypes: [String] = [],
        domain: String? = nil, host: String? = nil
    ) async throws -> any ServiceRegistration {
        if let unicast, usesUnicast(domain), let domain {
            return try unicast.advertise(
                name: name, type: type, port: port, txt: txt, subtypes: subtypes, domain: domain, host: host)
        }
        let mdns = self.mdns
        return try await mdns.onAvahiThread {
            try mdns.advertise(
                name: name, type: type, port: port, txt: txt, subtypes: subtypes, domain: domain, host: host)
        }
    }

    /// Replaces the TXT record of a registration (a `nil` value is a boolean attribute).
    public func updateTXT(of registration: any ServiceRegistration, to txt: [String: String?]) async throws {
        try await mdns.onAvahiThread { try registration.updateTXT(txt) }
    }

    /// Withdraws a registration. Idempotent.
    public func withdraw(_ registration: any ServiceRegistration) async {
        _ = try? await mdns.onAvahiThread { registration.withdraw() }
    }
}

extension DNSSDService {
    /// What tells one instance from another in a result: name, type and domain.
    var instanceKey: String { "\(name)\u{0}\(type)\u{0}\(domain)" }
}
