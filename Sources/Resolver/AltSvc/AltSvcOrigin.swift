import DNSCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An HTTPS origin (RFC 6454) that Alt-Svc information belongs to: `https://host:port`.
///
/// Normalized: the host is lowercased, IPv6 literals are kept without brackets, the port defaults to 443.
public struct AltSvcOrigin: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The host: a DNS name, an IPv4 address or an IPv6 address (without brackets), lowercased.
    public let host: String
    /// The port, 443 unless given.
    public let port: UInt16

    /// Creates an origin from its parts.
    ///
    /// - Throws: ``AltSvcError`` with code `.invalidOrigin` when the host is not a valid host name or address.
    public init(host: String, port: UInt16 = 443) throws(AltSvcError) {
        guard port != 0 else { throw Self.invalid("port 0 is not allowed") }
        guard let normalized = HostSyntax.validate(host.utf8) else { throw Self.invalid(HostSyntax.reason(host)) }
        self.host = normalized
        self.port = port
    }

    /// Parses an origin as given to `ReportAltSvc`, like `https://example.com:443`.
    ///
    /// Accepted: the `https` scheme (any case), a host name, IPv4 or bracketed IPv6 address, an optional port, and
    /// at most a lone `/` as path. Rejected: other schemes, user information, paths, queries and fragments.
    /// - Throws: ``AltSvcError`` with code `.invalidOrigin` explaining what is wrong.
    public init(parsing text: String) throws(AltSvcError) {
        let bytes = Array(text.utf8)
        guard let separator = Self.find(Array("://".utf8), in: bytes) else {
            throw Self.invalid("expected https://host[:port]")
        }
        let scheme = String(decoding: bytes[..<separator], as: UTF8.self)
        guard scheme.lowercased() == "https" else {
            throw Self.invalid("scheme must be https, not \"\(scheme)\"")
        }
        var authority = bytes[(separator + 3)...]
        if authority.last == UInt8(ascii: "/") { authority = authority.dropLast() }
        for (byte, what) in [("/", "a path"), ("?", "a query"), ("#", "a fragment"), ("@", "user information")]
        where authority.contains(UInt8(ascii: Unicode.Scalar(byte)!)) {
            throw Self.invalid("an origin has no \(what)")
        }
        guard !authority.isEmpty else { throw Self.invalid("missing host") }

        var hostBytes = authority
        var port: UInt16 = 443
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else {
                throw Self.invalid("unterminated IPv6 literal")
            }
            hostBytes = authority[authority.startIndex...close]
            let rest = authority[(close + 1)...]
            if !rest.isEmpty {
                guard rest.first == UInt8(ascii: ":"), let parsed = AltSvcParser.parsePort(rest.dropFirst()) else {
                    throw Self.invalid("invalid port")
                }
                port = parsed
            }
        } else if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            hostBytes = authority[..<colon]
            guard let parsed = AltSvcParser.parsePort(authority[(colon + 1)...]) else {
                throw Self.invalid("invalid port")
            }
            port = parsed
        }
        try self.init(host: String(decoding: hostBytes, as: UTF8.self), port: port)
    }

    /// The serialized origin, `https://host:port`, with brackets around IPv6 addresses.
    public var description: String {
        host.contains(":") ? "https://[\(host)]:\(port)" : "https://\(host):\(port)"
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        try self.init(parsing: text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    private static func invalid(_ message: String) -> AltSvcError {
        AltSvcError(code: .invalidOrigin, message: message)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count)
        where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }
}

/// Host syntax shared by origins and alt-authorities.
enum HostSyntax {
    /// Validates a host (name, IPv4, or IPv6 without brackets; bracketed IPv6 also accepted) and lowercases it.
    ///
    /// Names are restricted to LDH labels plus `_` (RFC 1123 §2.1, with the underscore seen in practice), 63 bytes
    /// per label and 253 in all, an optional trailing dot. Non-ASCII names must come as A-labels (RFC 5890).
    static func validate(_ bytes: some Collection<UInt8>) -> String? {
        var host = Array(bytes)[...]
        if host.first == UInt8(ascii: "["), host.last == UInt8(ascii: "]") {
            host = host.dropFirst().dropLast()
            guard isIPv6(host) else { return nil }
        }
        if host.contains(UInt8(ascii: ":")) {
            guard isIPv6(host) else { return nil }
            return String(decoding: host, as: UTF8.self).lowercased()
        }
        guard isHostName(host) else { return nil }
        return String(decoding: host, as: UTF8.self).lowercased()
    }

    /// Why `host` is rejected, for error messages.
    static func reason(_ host: String) -> String {
        if host.isEmpty { return "missing host" }
        if host.utf8.contains(where: { $0 >= 0x80 }) {
            return "host \"\(host)\" is not ASCII; give the A-label (punycode) form"
        }
        return "invalid host \"\(host)\""
    }

    static func isIPv6(_ bytes: some Collection<UInt8>) -> Bool {
        guard !bytes.isEmpty, bytes.count < 64 else { return false }
        var address = in6_addr()
        let text = String(decoding: bytes, as: UTF8.self)
        return inet_pton(AF_INET6, text, &address) == 1
    }

    private static func isHostName(_ bytes: ArraySlice<UInt8>) -> Bool {
        var name = bytes
        if name.last == UInt8(ascii: ".") { name = name.dropLast() }
        guard !name.isEmpty, name.count <= 253 else { return false }
        for label in name.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard !label.isEmpty, label.count <= 63,
                label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-"),
                label.allSatisfy({ byte in
                    AltSvcParser.isDigit(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                        || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
                })
            else { return false }
        }
        return true
    }
}
