import DNSCore
import NIOCore

/// A DNS server to ask, and how: plain DNS, DNS over TLS (RFC 7858) or DNS over HTTPS (RFC 8484).
///
/// The text forms are those operators already write for systemd-resolved and dnsproxy:
///
/// | text | meaning |
/// |---|---|
/// | `192.0.2.53`, `192.0.2.53:5353`, `[2001:db8::53]:53`, `2001:db8::53` | plain DNS (UDP, TCP on truncation), port 53 |
/// | `192.0.2.53#dns.example` | DNS over TLS, port 853, certificate checked for `dns.example` (resolved's `DNS=`) |
/// | `tls://192.0.2.53[:853][#dns.example]` | the same; without `#NAME` the certificate must carry the address (IP SAN) |
/// | `https://dns.example[:443]/dns-query#192.0.2.53` | DNS over HTTPS; `#ADDR` (or `[resolver] bootstrap`) gives the address |
/// | `https://192.0.2.53/dns-query` | DNS over HTTPS to an address; the certificate must carry it (IP SAN) |
/// | `https://dns.example/dns-query{?dns}#192.0.2.53` | the same with RFC 8484's URI template (`{?dns}` or `{&dns}`) |
/// | `192.168.1.1 encryption=no` | a plain upstream with its own `encryption` mode (`strict`, `opportunistic`, `no`) |
/// | `tls://192.0.2.53 pin-sha256=BASE64` | DoT (or DoH) authenticated by its key's pin instead of a CA (repeatable) |
///
/// The client never resolves names to reach an upstream (it must not depend on the resolver it is), so every
/// form carries a numeric address, given directly or by `#ADDR`.
public struct UpstreamServer: Hashable, Sendable, CustomStringConvertible {
    /// How the server is reached.
    public enum Transport: String, Sendable, Hashable, Codable, CaseIterable {
        /// Plain DNS: UDP, TCP on truncation.
        case plain
        /// DNS over TLS (RFC 7858).
        case tls
        /// DNS over HTTPS (RFC 8484), HTTP/2.
        case https
    }

    public var transport: Transport
    /// The numeric IPv4 or IPv6 address connected to; empty for a DoH upstream whose address is not known yet.
    public var host: String
    public var port: Int
    /// The name the certificate must be valid for (`#NAME` of DoT, the host of a DoH URL); nil: the certificate
    /// must name `host` as an IP address (subjectAltName iPAddress).
    public var tlsName: String?
    /// The DoH path or URI template's path (`/dns-query`, `/dns-query{?dns}`, ``DoHPathTemplate``); empty for the
    /// other transports.
    public var path: String
    /// `encryption=MODE` after a plain upstream: its own mode instead of `[resolver] encryption` (e.g. `no` for a
    /// router whose DDR answer is known to be wrong, `strict` for one that must be upgraded or not used); nil:
    /// the global mode. Always nil for DoT and DoH upstreams, which are always verified.
    public var encryption: EncryptionMode?
    /// `pin-sha256=BASE64` after a DoT or DoH upstream (repeatable: a backup key for a rotation): the server is
    /// authenticated by its key instead of a CA and a name, as stubby's `tls_pubkey_pinset` and kdig's `+tls-pin`
    /// do (RFC 7858 §4.2): the SHA-256 of the leaf certificate's SubjectPublicKeyInfo (RFC 7469 §2.4) must be one
    /// of these, in padded base64. Empty: the certificate is verified against the trust store. Set by parsing,
    /// which checks each one.
    public internal(set) var pins: [String] = []

    /// A plain DNS server.
    public init(host: String, port: Int = 53) {
        self.init(transport: .plain, host: host, port: port)
    }

    /// A server reached by `transport`.
    ///
    /// - Parameters:
    ///   - transport: plain, tls or https.
    ///   - host: the numeric address (may be empty for https until a bootstrap address is set).
    ///   - port: 53, 853 and 443 are the defaults of the three.
    ///   - tlsName: the name to verify; nil verifies the address.
    ///   - path: the DoH path.
    public init(transport: Transport, host: String, port: Int? = nil, tlsName: String? = nil, path: String = "") {
        self.transport = transport
        self.host = host
        self.port = port ?? Self.defaultPort(transport)
        self.tlsName = tlsName.map { $0.lowercased() }
        self.path = transport == .https ? (path.isEmpty ? "/dns-query" : path) : ""
    }

    /// 53, 853 (RFC 7858 §3.1) or 443.
    public static func defaultPort(_ transport: Transport) -> Int {
        switch transport {
        case .plain: 53
        case .tls: 853
        case .https: 443
        }
    }

    /// Whether queries to this server travel encrypted.
    public var isEncrypted: Bool { transport != .plain }

    /// `192.0.2.53:53`, `tls://192.0.2.53:853#dns.example` or `https://dns.example:443/dns-query#192.0.2.53`;
    /// a plain upstream with its own mode ends in ` encryption=MODE`.
    public var description: String {
        switch transport {
        case .plain:
            return Self.hostPort(host, port) + (encryption.map { " encryption=\($0.rawValue)" } ?? "")
        case .tls:
            return "tls://\(Self.hostPort(host, port))" + (tlsName.map { "#\($0)" } ?? "") + pinWords
        case .https:
            if let tlsName {
                return "https://\(Self.hostPort(tlsName, port))\(path)" + (host.isEmpty ? "" : "#\(host)") + pinWords
            }
            return "https://\(Self.hostPort(host, port))\(path)" + pinWords
        }
    }

    private var pinWords: String { pins.isEmpty ? "" : pins.map { " pin-sha256=\($0)" }.joined() }

    /// The pins as the 32-byte digests they spell.
    var pinDigests: [[UInt8]] { pins.compactMap(Base64.decode) }

    /// The `:authority` of DoH requests: the name, or the address.
    var authority: String {
        let name = tlsName ?? host
        return port == 443 ? Self.bracketed(name) : Self.hostPort(name, port)
    }

    private static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }
    private static func hostPort(_ host: String, _ port: Int) -> String { "\(bracketed(host)):\(port)" }

    /// Parses one of the forms in the type's documentation.
    ///
    /// - Throws: ``UpstreamSyntaxError`` naming what is wrong; never traps, whatever `text` holds.
    public init(parsing text: String) throws(UpstreamSyntaxError) {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let first = words.first else { throw UpstreamSyntaxError(text: text, reason: "empty") }
        if let count = Self.listed(text) {
            // resolved's `DNS=` takes a list; here each server is a value of its own, so say so rather than
            // reject the first one's name.
            throw UpstreamSyntaxError(
                text: text, reason: "\(count) upstreams in one value: give each its own (an `upstream =` line or "
                    + "an --upstream per server)")
        }
        // Options are KEY=VALUE words after the address; anything else with blanks is a malformed address.
        let options = words.dropFirst().allSatisfy { $0.contains("=") } ? Array(words.dropFirst()) : []
        let trimmed = options.isEmpty ? words.joined(separator: " ") : first
        var mode: EncryptionMode?
        var pins: [String] = []
        for option in options {
            let parts = option.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            switch parts.count == 2 ? parts[0].lowercased() : "" {
            case "encryption":
                guard let value = EncryptionMode(rawValue: parts[1].lowercased()) else {
                    throw UpstreamSyntaxError(
                        text: text, reason: "encryption '\(parts[1])' is not strict, opportunistic or no")
                }
                mode = value
            case "pin-sha256":
                pins.append(try Self.pin(parts[1], text: text))
            default:
                throw UpstreamSyntaxError(
                    text: text,
                    reason: "unknown option '\(option)' (after the address: encryption=MODE for a plain upstream, "
                        + "pin-sha256=BASE64 for DoT and DoH)")
            }
        }
        try self.init(parsingAddress: trimmed, text: text)
        if let mode {
            guard transport == .plain else {
                throw UpstreamSyntaxError(
                    text: text, reason: "encryption=MODE is for plain upstreams (DoT and DoH are always verified)")
            }
            encryption = mode
        }
        if !pins.isEmpty {
            guard transport != .plain else {
                throw UpstreamSyntaxError(
                    text: text,
                    reason: "pin-sha256 is for DoT and DoH upstreams: write tls://ADDR[#NAME] pin-sha256=... (or "
                        + "https://...)")
            }
            self.pins = pins
        }
    }

    /// A `pin-sha256=` value: padded base64 of 32 bytes, in quotes or not (RFC 7469 writes `pin-sha256="..."`).
    private static func pin(_ value: String, text: String) throws(UpstreamSyntaxError) -> String {
        var bare = Substring(value)
        if bare.count >= 2, bare.first == "\"", bare.last == "\"" { bare = bare.dropFirst().dropLast() }
        guard let digest = Base64.decode(String(bare)), digest.count == 32 else {
            throw UpstreamSyntaxError(
                text: text,
                reason: "pin-sha256 '\(value)' is not the base64 of a SHA-256 digest (32 bytes, 44 characters); "
                    + "`discover query @UPSTREAM NAME` prints a server's pin")
        }
        return Base64.encode(digest)
    }

    /// How many upstreams `text` lists, separated by commas or blanks, when it is a list of at least two that
    /// each parse alone; nil otherwise (`192.0.2.53 encryption=no` is one upstream with an option).
    private static func listed(_ text: String) -> Int? {
        let pieces = text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        guard pieces.count > 1, !pieces.contains(where: { $0.contains("=") }) else { return nil }
        return pieces.allSatisfy { (try? UpstreamServer(parsing: String($0))) != nil } ? pieces.count : nil
    }

    private init(parsingAddress trimmed: String, text: String) throws(UpstreamSyntaxError) {
        let lower = trimmed.lowercased()
        if lower.hasPrefix("https://") {
            self = try Self.parseHTTPS(String(trimmed.dropFirst(8)), text: text)
        } else if lower.hasPrefix("tls://") {
            self = try Self.parseAddressForm(String(trimmed.dropFirst(6)), transport: .tls, text: text)
        } else if lower.hasPrefix("udp://") || lower.hasPrefix("dns://") {
            self = try Self.parseAddressForm(String(trimmed.dropFirst(6)), transport: .plain, text: text)
        } else if let scheme = lower.range(of: "://") {
            throw UpstreamSyntaxError(
                text: text,
                reason: "unknown scheme '\(lower[..<scheme.lowerBound])' (plain ADDR[:PORT], ADDR[:PORT]#NAME, "
                    + "tls://ADDR[:PORT][#NAME] or https://HOST[:PORT]/PATH[#ADDR])")
        } else if trimmed.contains("#") {
            self = try Self.parseAddressForm(trimmed, transport: .tls, text: text)
        } else {
            self = try Self.parseAddressForm(trimmed, transport: .plain, text: text)
        }
    }

    /// `ADDR[:PORT][#NAME]` (a `#NAME` only for tls).
    private static func parseAddressForm(_ rest: String, transport: Transport, text: String)
        throws(UpstreamSyntaxError) -> UpstreamServer
    {
        var authority = rest
        var name: String?
        if let hash = rest.firstIndex(of: "#") {
            guard transport == .tls else {
                throw UpstreamSyntaxError(text: text, reason: "'#NAME' is for DNS over TLS only")
            }
            authority = String(rest[..<hash])
            name = try validName(String(rest[rest.index(after: hash)...]), text: text)
        }
        let (host, port) = try hostAndPort(authority, defaultPort: defaultPort(transport), text: text)
        guard isIPAddress(host) else {
            // The daemon never resolves a name to reach an upstream; DoT names the server after the address.
            let hint =
                transport == .tls && name == nil
                ? ": write its address and the name to check, tls://ADDR#\(host.lowercased())"
                : " (host names are not allowed here)"
            throw UpstreamSyntaxError(text: text, reason: "'\(host)' is not an IPv4 or IPv6 address\(hint)")
        }
        return UpstreamServer(transport: transport, host: host, port: port, tlsName: name)
    }

    /// `HOST[:PORT][/PATH][#ADDR]` after `https://`; PATH may be a URI template (``DoHPathTemplate``).
    private static func parseHTTPS(_ rest: String, text: String) throws(UpstreamSyntaxError) -> UpstreamServer {
        var url = rest
        var address = ""
        if let hash = rest.firstIndex(of: "#") {
            url = String(rest[..<hash])
            address = String(rest[rest.index(after: hash)...])
            guard isIPAddress(address) else {
                throw UpstreamSyntaxError(text: text, reason: "'#\(address)' is not an IPv4 or IPv6 address")
            }
        }
        var authority = url
        var path = "/dns-query"
        if let slash = url.firstIndex(of: "/") {
            authority = String(url[..<slash])
            path = String(url[slash...])
        }
        do {
            _ = try DoHPathTemplate(path)
        } catch {
            throw UpstreamSyntaxError(text: text, reason: error.reason)
        }
        let (host, port) = try hostAndPort(authority, defaultPort: 443, text: text)
        if isIPAddress(host) {
            guard address.isEmpty || address == host else {
                throw UpstreamSyntaxError(text: text, reason: "'#\(address)' differs from the address in the URL")
            }
            return UpstreamServer(transport: .https, host: host, port: port, tlsName: nil, path: path)
        }
        let name = try validName(host, text: text)
        return UpstreamServer(transport: .https, host: address, port: port, tlsName: name, path: path)
    }

    /// The `ADDR[:PORT]` part, by the one parser of DNS settings (``HostAndPort``), with its reason in an
    /// upstream error.
    private static func hostAndPort(_ text: String, defaultPort: Int, text original: String)
        throws(UpstreamSyntaxError) -> (String, Int)
    {
        do {
            let parsed = try HostAndPort(parsing: text, defaultPort: defaultPort)
            return (parsed.host, parsed.port)
        } catch {
            throw UpstreamSyntaxError(text: original, reason: error.reason)
        }
    }

    private static func validName(_ name: String, text: String) throws(UpstreamSyntaxError) -> String {
        let bare = name.hasSuffix(".") ? String(name.dropLast()) : name
        let labels = bare.split(separator: ".", omittingEmptySubsequences: false)
        let ok =
            !bare.isEmpty && bare.utf8.count <= 253
            && labels.allSatisfy { label in
                !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                    && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
            }
        guard ok else { throw UpstreamSyntaxError(text: text, reason: "'\(name)' is not a valid host name") }
        return bare.lowercased()
    }

    /// Whether `text` is a numeric IPv4 or IPv6 address (an IPv6 zone, `%eth0`, is allowed).
    public static func isIPAddress(_ text: String) -> Bool {
        let bare = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        guard !bare.isEmpty else { return false }
        return (try? SocketAddress(ipAddress: bare, port: 0)) != nil
    }
}

/// An upstream written in a form ``UpstreamServer/init(parsing:)`` does not accept.
public struct UpstreamSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text as given.
    public var text: String
    /// What is wrong with it.
    public var reason: String

    public init(text: String, reason: String) {
        self.text = text
        self.reason = reason
    }

    public var description: String { "upstream '\(text)': \(reason)" }
}
