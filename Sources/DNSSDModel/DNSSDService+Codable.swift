#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
