#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One DNS-SD service instance, merged over every interface and protocol it was seen on.
public struct DNSSDService: Hashable, Sendable {
    /// The instance name, e.g. `Living Room Printer`.
    public var name: String
    /// The service type, e.g. `_ipp._tcp`.
    public var type: String
    /// The domain, e.g. `local`.
    public var domain: String
    /// Names of the interfaces the instance was seen on (from `if_indextoname`, `if<N>` if the index is unknown).
    public var interfaces: [String]
    /// The target host name (SRV), once resolved.
    public var host: String?
    /// The port (SRV), once resolved.
    public var port: Int?
    /// Addresses of the host; IPv6 link-local ones carry their zone, e.g. `fe80::1%eth0`.
    public var addresses: [String]
    /// TXT attributes with UTF-8 keys and values (see `TXTRecord.dictionary`): `nil` for a boolean attribute (`key`
    /// without `=`), "" for `key=`; of a key given twice the first occurrence (RFC 6763 §6.4).
    public var txt: [String: String?]
    /// The raw TXT strings in wire order, present only when `txt` cannot show them all: a string that is not UTF-8,
    /// a duplicate key, a string without a key (`TXTRecord.dictionaryIsLossy`; the daemon sends them base64-encoded).
    public var txtRaw: [[UInt8]]?

    /// Creates a service value.
    public init(
        name: String,
        type: String,
        domain: String,
        interfaces: [String] = [],
        host: String? = nil,
        port: Int? = nil,
        addresses: [String] = [],
        txt: [String: String?] = [:],
        txtRaw: [[UInt8]]? = nil
    ) {
        self.name = name
        self.type = type
        self.domain = domain
        self.interfaces = interfaces
        self.host = host
        self.port = port
        self.addresses = addresses
        self.txt = txt
        self.txtRaw = txtRaw
    }
}

/// The JSON form of a service: the `Service` type of `io.discoverd.Discovery` (docs/API.md). The daemon writes it,
/// the client library reads it, so both sides of the socket use this one type.
///
/// `txtRaw` is on the wire as base64, one string per TXT string, in wire order.
extension DNSSDService: Codable {
    /// The JSON keys, in the order the daemon writes them.
    public enum CodingKeys: String, CodingKey, CaseIterable {
        case name, type, domain, interfaces, host, port, addresses, txt, txtRaw
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let raw = try container.decodeIfPresent([String].self, forKey: .txtRaw)
        self.init(
            name: try container.decode(String.self, forKey: .name),
            type: try container.decode(String.self, forKey: .type),
            domain: try container.decode(String.self, forKey: .domain),
            interfaces: try container.decodeIfPresent([String].self, forKey: .interfaces) ?? [],
            host: try container.decodeIfPresent(String.self, forKey: .host),
            port: try container.decodeIfPresent(Int.self, forKey: .port),
            addresses: try container.decodeIfPresent([String].self, forKey: .addresses) ?? [],
            txt: try container.decodeIfPresent([String: String?].self, forKey: .txt) ?? [:],
            txtRaw: try raw.map { strings in
                try strings.map { text in
                    guard let bytes = Data(base64Encoded: text) else {
                        throw DecodingError.dataCorruptedError(
                            forKey: .txtRaw, in: container, debugDescription: "txtRaw entry is not base64")
                    }
                    return Array(bytes)
                }
            })
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(type, forKey: .type)
        try container.encode(domain, forKey: .domain)
        try container.encode(interfaces, forKey: .interfaces)
        try container.encodeIfPresent(host, forKey: .host)
        try container.encodeIfPresent(port, forKey: .port)
        try container.encode(addresses, forKey: .addresses)
        try container.encode(txt, forKey: .txt)
        try container.encodeIfPresent(txtRawBase64, forKey: .txtRaw)
    }

    /// `txtRaw` as the wire has it: base64 of each string.
    public var txtRawBase64: [String]? {
        txtRaw.map { $0.map { Data($0).base64EncodedString() } }
    }
}
