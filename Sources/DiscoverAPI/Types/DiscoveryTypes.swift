// Wire types of the io.discoverd.Discovery interface (docs/API.md). A service is the model's own ``DNSSDService``
// (its Codable form is the IDL's `Service`), so no wire twin of it exists.

import DNSSDModel

/// What happened to a browsed service.
public enum BrowseEventKind: String, Codable, Sendable {
    case added, removed, changed, allForNow
}

/// Parameters of `Browse`.
public struct BrowseParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable {
        case type, domain, subtype, interface, resolve, timeoutMs
    }
    public var type: String
    public var domain: String?
    public var subtype: String?
    public var interface: String?
    public var resolve: Bool?
    /// Without `more`: how long to wait for all-for-now (default 3000).
    public var timeoutMs: Int?

    public init(
        type: String, domain: String? = nil, subtype: String? = nil, interface: String? = nil,
        resolve: Bool? = nil, timeoutMs: Int? = nil
    ) {
        self.type = type
        self.domain = domain
        self.subtype = subtype
        self.interface = interface
        self.resolve = resolve
        self.timeoutMs = timeoutMs
    }
}

/// Reply of `Browse`: an event when streaming (`more`), else `services`.
public struct BrowseReply: Codable, Equatable, Sendable {
    public var event: BrowseEventKind?
    public var service: DNSSDService?
    public var services: [DNSSDService]?

    public init(event: BrowseEventKind? = nil, service: DNSSDService? = nil, services: [DNSSDService]? = nil) {
        self.event = event
        self.service = service
        self.services = services
    }
}

/// Parameters of `Resolve`.
public struct ResolveServiceParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case name, type, domain, timeoutMs }
    public var name: String
    public var type: String
    public var domain: String?
    public var timeoutMs: Int?

    public init(name: String, type: String, domain: String? = nil, timeoutMs: Int? = nil) {
        self.name = name
        self.type = type
        self.domain = domain
        self.timeoutMs = timeoutMs
    }
}

/// Reply of `Resolve`.
public struct ResolveServiceReply: Codable, Equatable, Sendable {
    public var service: DNSSDService
    public init(service: DNSSDService) { self.service = service }
}

/// Parameters of `Advertise`.
public struct AdvertiseParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case name, type, port, txt, subtypes, domain, host }
    /// Default: the host name.
    public var name: String?
    public var type: String
    public var port: Int
    /// A `nil` value (JSON `null`) is a boolean attribute, published as `key` without `=`.
    public var txt: [String: String?]?
    public var subtypes: [String]?
    public var domain: String?
    public var host: String?

    public init(
        name: String? = nil, type: String, port: Int, txt: [String: String?]? = nil, subtypes: [String]? = nil,
        domain: String? = nil, host: String? = nil
    ) {
        self.name = name
        self.type = type
        self.port = port
        self.txt = txt
        self.subtypes = subtypes
        self.domain = domain
        self.host = host
    }
}

/// What happened to an advertisement.
public enum AdvertiseEventKind: String, Codable, Sendable {
    case registered, renamed, failed
    /// Withdrawn by `Withdraw` (from another connection of the owner, or root); the call ends.
    case withdrawn
}

/// Reply of `Advertise` (a stream).
public struct AdvertiseReply: Codable, Equatable, Sendable {
    public var event: AdvertiseEventKind
    public var id: String
    /// The final name after collision renames.
    public var name: String
    /// Why it failed, for `failed`.
    public var error: String?

    public init(event: AdvertiseEventKind, id: String, name: String, error: String? = nil) {
        self.event = event
        self.id = id
        self.name = name
        self.error = error
    }
}

/// Parameters of `UpdateAdvertisement`.
public struct UpdateAdvertisementParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case id, txt }
    public var id: String
    /// As in `AdvertiseParameters.txt`.
    public var txt: [String: String?]

    public init(id: String, txt: [String: String?]) {
        self.id = id
        self.txt = txt
    }
}

/// Parameters of `Withdraw`.
public struct WithdrawParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case id }
    public var id: String
    public init(id: String) { self.id = id }
}

/// Parameters of `BrowseTypes`.
public struct BrowseTypesParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case domain }
    public var domain: String?
    public init(domain: String? = nil) { self.domain = domain }
}

/// Reply of `BrowseTypes`.
public struct BrowseTypesReply: Codable, Equatable, Sendable {
    public var types: [String]
    public init(types: [String]) { self.types = types }
}

/// Reply of `BrowseDomains`.
public struct BrowseDomainsReply: Codable, Equatable, Sendable {
    public var domains: [String]
    public init(domains: [String]) { self.domains = domains }
}

extension DNSSDService: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("name", name)
        writer.field("type", type)
        writer.field("domain", domain)
        writer.field("interfaces", strings: interfaces)
        writer.field("host", host)
        writer.field("port", port)
        writer.field("addresses", strings: addresses)
        writer.field("txt", object: txt)
        if let txtRaw = txtRawBase64 { writer.field("txtRaw", strings: txtRaw) }
        writer.endObject()
    }
}

extension BrowseReply: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("event", event?.rawValue)
        if let service { writer.field("service", service) }
        if let services { writer.field("services", array: services) }
        writer.endObject()
    }
}

/// The methods of `io.discoverd.Discovery`.
extension Methods {
    public static let browse = VarlinkMethod<BrowseParameters, BrowseReply>("io.discoverd.Discovery.Browse")
    public static let resolveService = VarlinkMethod<ResolveServiceParameters, ResolveServiceReply>(
        "io.discoverd.Discovery.Resolve")
    public static let advertise = VarlinkMethod<AdvertiseParameters, AdvertiseReply>("io.discoverd.Discovery.Advertise")
    public static let updateAdvertisement = VarlinkMethod<UpdateAdvertisementParameters, VarlinkEmpty>(
        "io.discoverd.Discovery.UpdateAdvertisement")
    public static let withdraw = VarlinkMethod<WithdrawParameters, VarlinkEmpty>("io.discoverd.Discovery.Withdraw")
    public static let browseTypes = VarlinkMethod<BrowseTypesParameters, BrowseTypesReply>(
        "io.discoverd.Discovery.BrowseTypes")
    public static let browseDomains = VarlinkMethod<VarlinkEmpty, BrowseDomainsReply>(
        "io.discoverd.Discovery.BrowseDomains")
}
