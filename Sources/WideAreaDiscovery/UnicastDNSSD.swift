import DNSCore
import DNSSDModel
import Logging
import Resolver
import Synchronization

/// DNS-SD over unicast DNS (RFC 6763): browse, resolve, types and domain enumeration through the resolver's
/// optimistic cache, and registration by DNS UPDATE signed with TSIG (RFC 2136, RFC 8945).
///
/// Every domain other than `local` (``WideAreaDomain/isUnicast(_:)``) is handled here instead of by Avahi.
///
/// ```swift
/// let wideArea = UnicastDNSSD(source: ResolverRecordSource(resolver: resolver), settings: settings)
/// for try await event in try wideArea.browse(type: "_http._tcp", domain: "example.com", resolve: true) { ... }
/// ```
public final class UnicastDNSSD: Sendable {
    let source: any RecordSource
    private let state: Mutex<WideAreaSettings>
    let logger: Logger
    let journal: RegistrationJournal
    /// Registrations of ours by host they publish addresses for: the addresses go with the last of them.
    let hostUsers = Mutex<[String: Set<String>]>([:])
    /// Deletions still running (awaited at shutdown).
    let pending = Mutex<[Int: Task<Void, Never>]>([:])
    let counter = Atomic<Int>(0)

    /// Creates the service.
    /// - Parameters:
    ///   - source: where records come from (``ResolverRecordSource`` in the daemon).
    ///   - settings: the `[wide-area]` settings.
    ///   - stateDirectory: where registrations are journaled (deleted at the next start after a crash); nil for none.
    ///   - logger: where the module logs (info and below).
    public init(
        source: any RecordSource, settings: WideAreaSettings, stateDirectory: String? = nil,
        logger: Logger = Logger(label: "discoverd.widearea")
    ) {
        self.source = source
        self.journal = RegistrationJournal(directory: stateDirectory)
        self.state = Mutex(settings)
        self.logger = logger
    }

    /// The settings in effect.
    public var settings: WideAreaSettings { state.withLock { $0 } }

    /// Replaces the settings (on reload); running browses keep their schedule, new calls use the new settings.
    public func update(_ settings: WideAreaSettings) {
        state.withLock { $0 = settings }
    }

    // MARK: - Browse

    /// Browses `type` in the unicast `domain`.
    ///
    /// Yields every instance present, then `allForNow`, then changes found when the TTLs run out (never sooner
    /// than every 10 s). With `resolve`, instances carry host, port, addresses and TXT, and an instance that cannot
    /// be resolved (no SRV, target `.`) is left out.
    /// - Throws: `DNSSDError` `invalidServiceType` or `invalidName` for bad arguments; the stream ends with a
    ///   ``WideAreaError`` (`timeout`, `lookupFailed`) when the first look fails.
    public func browse(
        type: String, domain: String, subtype: String? = nil, resolve: Bool = false
    ) throws(DNSSDError) -> AsyncThrowingStream<BrowseEvent, any Error> {
        let parsed = try ServiceValidation.serviceType(type)
        try ServiceValidation.domain(domain)
        let sub = try subtype.map { (value) throws(DNSSDError) in
            try ServiceValidation.subtype(value, of: parsed.string)
        }
        let browser = UnicastBrowser(
            type: parsed.string, domain: WideAreaDomain.normalized(domain), subtype: sub, resolve: resolve,
            source: source, schedule: settings.schedule, logger: logger)
        return browser.events()
    }

    // MARK: - Resolve

    /// Resolves one instance: host, port, addresses and TXT.
    /// - Throws: `DNSSDError` for bad arguments; ``WideAreaError`` `notFound` (no SRV, or its target is `.`),
    ///   `timeout`, `lookupFailed`.
    public func resolve(name: String, type: String, domain: String) async throws -> DNSSDService {
        try ServiceValidation.instanceName(name)
        let parsed = try ServiceValidation.serviceType(type)
        try ServiceValidation.domain(domain)
        let instance = ServiceInstanceName(instance: name, type: parsed.string, domain: domain)
        return try await InstanceResolver.resolve(instance, source: source, fresh: false).service
    }

    // MARK: - Types and domains

    /// The service types registered in `domain` (`_services._dns-sd._udp`, RFC 6763 §9), sorted.
    /// - Throws: `DNSSDError.invalidName`; ``WideAreaError`` `timeout`, `lookupFailed`.
    public func browseTypes(domain: String) async throws -> [String] {
        try ServiceValidation.domain(domain)
        let normalized = WideAreaDomain.normalized(domain)
        let set = try await source.records("_services._dns-sd._udp.\(normalized).", type: .ptr, fresh: false)
        var types = Set<String>()
        let domainLabels = WideAreaDomain.labels(of: normalized)
        for record in set.records {
            guard let labels = try? DNSName.labels(wire: record.rdata), labels.count == domainLabels.count + 2,
                labels.suffix(domainLabels.count).map { DNSName.lowercased(label: $0) } == domainLabels
            else { continue }
            let type = labels.prefix(2).map { String(decoding: DNSName.lowercased(label: $0), as: UTF8.self) }
                .joined(separator: ".")
            if (try? ServiceValidation.serviceType(type)) != nil { types.insert(type) }
        }
        return types.sorted()
    }

    /// The domain enumeration records (`b`, `db`, `lb`, `r`, `dr`) under each search domain and each configured
    /// browse domain.
    public func enumerateDomains() async -> EnumeratedDomains {
        let settings = self.settings
        return await DomainEnumeration.enumerate(
            bases: settings.searchDomains + settings.browseDomains, source: source, logger: logger)
    }

    /// The unicast browse domains: the configured ones and those the enumeration records name, sorted.
    public func browseDomains() async -> [String] {
        let found = await enumerateDomains()
        return Array(Set(settings.browseDomains + found.allBrowse)).filter(WideAreaDomain.isUnicast).sorted()
    }

    /// The domains a browse without a domain covers besides `local`: the configured browse domains and the `lb`
    /// ("legacy browse") domains (RFC 6763 §11).
    public func defaultBrowseDomains() async -> [String] {
        let found = await enumerateDomains()
        return Array(Set(settings.browseDomains + found.legacyBrowse)).filter(WideAreaDomain.isUnicast).sorted()
    }
}
