#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A host with an optional port, as people type them: `example.com`, `example.com:8443`, `192.0.2.10`,
/// `2001:db8::10`, `[2001:db8::10]:443`, `fe80::1%eth0`, or an origin such as `https://example.com:8443/`.
///
/// ```swift
/// let target = try HostPort(parsing: "[2001:db8::10]:443")   // host "2001:db8::10", port 443
/// let plan = try await client.connectionPlan(host: target.host, port: target.port ?? 443)
/// ```
public struct HostPort: Equatable, Sendable, CustomStringConvertible {
    /// The host: a name as given, or an address without brackets.
    public var host: String
    /// The port, when one was given.
    public var port: Int?
    /// Whether the host is an IPv4 or IPv6 address (no DNS needed).
    public var isAddressLiteral: Bool

    /// Why a host could not be parsed: a code, and one plain sentence for people.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// The kind of mistake.
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            private let name: String
            /// Nothing before the port, or nothing at all.
            public static let missingHost = Code(name: "missingHost")
            /// A scheme other than `https://`.
            public static let unsupportedScheme = Code(name: "unsupportedScheme")
            /// Brackets that do not hold exactly an IPv6 address, or are not followed by `:PORT`.
            public static let invalidBrackets = Code(name: "invalidBrackets")
            /// Several colons that do not make an IPv6 address.
            public static let invalidAddress = Code(name: "invalidAddress")
            /// A port that is missing after `:`, not a number, or outside 1...65535.
            public static let invalidPort = Code(name: "invalidPort")
            public var description: String { name }
        }

        public var code: Code
        public var message: String
        public var description: String { message }
    }

    /// A host (a name, or an address without brackets) and an optional port.
    public init(host: String, port: Int? = nil) {
        self.host = host
        self.port = port
        isAddressLiteral = Self.isIPv6(Substring(host)) || Self.isIPv4(Substring(host))
    }

    /// Parses `text`.
    /// - Throws: ``ParseError`` explaining what is wrong, e.g. "port 70000 is not between 1 and 65535".
    public init(parsing text: String) throws(ParseError) {
        var rest = Substring(text)
        if let scheme = rest.firstRange(of: "://") {
            guard rest[..<scheme.lowerBound].lowercased() == "https" else {
                throw ParseError(code: .unsupportedScheme, message: "\(text): only https:// origins are understood")
            }
            rest = rest[scheme.upperBound...]
            if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        }
        guard !rest.isEmpty else { throw ParseError(code: .missingHost, message: "missing host in \"\(text)\"") }

        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw ParseError(code: .invalidBrackets, message: "\(text): '[' without ']' (write [ADDRESS]:PORT)")
            }
            let inside = rest[rest.index(after: rest.startIndex)..<close]
            guard Self.isIPv6(inside) else {
                throw ParseError(
                    code: .invalidBrackets,
                    message: "\(text): brackets are for IPv6 addresses, and \"\(inside)\" is not one")
            }
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else {
                    throw ParseError(code: .invalidBrackets, message: "\(text): expected ':PORT' after ']'")
                }
                portText = after.dropFirst()
            }
            rest = inside
        } else if rest.filter({ $0 == ":" }).count == 1, let colon = rest.firstIndex(of: ":") {
            portText = rest[rest.index(after: colon)...]
            rest = rest[..<colon]
            guard !rest.isEmpty else { throw ParseError(code: .missingHost, message: "missing host in \"\(text)\"") }
        } else if rest.contains(":") && !Self.isIPv6(rest) {
            throw ParseError(
                code: .invalidAddress,
                message: "\(text) is not an IPv6 address; write an IPv6 address with a port as [ADDRESS]:PORT")
        }

        host = String(rest)
        isAddressLiteral = Self.isIPv6(rest) || Self.isIPv4(rest)
        if let portText {
            guard !portText.isEmpty else {
                throw ParseError(code: .invalidPort, message: "\(text): missing port after ':'")
            }
            guard portText.allSatisfy(\.isASCII), portText.allSatisfy(\.isNumber), portText.count <= 5,
                let number = Int(portText)
            else {
                throw ParseError(code: .invalidPort, message: "\(text): port \"\(portText)\" is not a number")
            }
            guard (1...65535).contains(number) else {
                throw ParseError(code: .invalidPort, message: "port \(number) is not between 1 and 65535")
            }
            port = number
        } else {
            port = nil
        }
    }

    /// `host`, `host:port`, or `[v6]:port`.
    public var description: String {
        guard let port else { return host }
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Dotted-quad IPv4 (`inet_pton` rules: exactly four decimal parts).
    static func isIPv4(_ text: Substring) -> Bool {
        var address = in_addr()
        return !text.isEmpty && text.utf8.count < 16 && inet_pton(AF_INET, String(text), &address) == 1
    }

    /// RFC 4291 IPv6 text, optionally with a `%zone`.
    static func isIPv6(_ text: Substring) -> Bool {
        let address = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = address.first, !first.isEmpty, first.utf8.count < 46,
            address.count == 1 || !address[1].isEmpty
        else { return false }
        var bytes = in6_addr()
        return inet_pton(AF_INET6, String(first), &bytes) == 1
    }
}
