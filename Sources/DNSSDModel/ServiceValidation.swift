/// Checks of names, types and parameters done before anything reaches Avahi, so callers get a precise error.
public enum ServiceValidation {
    /// Longest instance name: one DNS label (RFC 6763 §4.1.1).
    public static let maximumInstanceNameLength = 63

    /// A parsed service type `_name._tcp` or `_name._udp`.
    public struct ServiceType: Hashable, Sendable {
        /// The service name without underscore, e.g. `http`.
        public var name: String
        /// `tcp` or `udp` (lower case).
        public var transport: String
        /// The canonical type string, e.g. `_http._tcp`.
        public var string: String { "_\(self.name)._\(self.transport)" }
    }

    /// Validates a service type to advertise, per RFC 6763 §7 and RFC 6335 §5.1 (browsing is more liberal:
    /// `browsableServiceType`).
    ///
    /// The service name is 1-15 characters of letters, digits and hyphens, with at least one letter, no hyphen at
    /// either end and no two hyphens in a row; the transport is `_tcp` or `_udp` (any case).
    /// - Throws: `DNSSDError.invalidServiceType` saying which rule failed.
    @discardableResult
    public static func serviceType(_ type: String) throws(DNSSDError) -> ServiceType {
        let fail = failure(type)
        let (name, transport) = try split(type)
        guard !name.isEmpty, name.utf8.count <= 15 else { throw fail("the service name must be 1-15 characters") }
        var hasLetter = false
        var previous: UInt8 = 0
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                hasLetter = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                break
            case UInt8(ascii: "-"):
                if previous == UInt8(ascii: "-") { throw fail("the service name must not contain \"--\"") }
            default:
                throw fail("the service name may contain only letters, digits and hyphens")
            }
            previous = byte
        }
        guard hasLetter else { throw fail("the service name must contain at least one letter") }
        guard name.first != "-", name.last != "-" else {
            throw fail("the service name must not start or end with a hyphen")
        }
        return ServiceType(name: String(name), transport: transport)
    }

    /// Validates a service type to browse or resolve: liberal, because any type seen on the network must be usable
    /// (e.g. `_androidtvremote2._tcp`, `_nvstream_dbd._tcp`). Advertising uses the strict `serviceType`.
    ///
    /// The service name is 1-62 bytes of printable ASCII other than `.` and `\` (its label, underscore included, at
    /// most 63 bytes, RFC 6763 §7.2); the transport is `_tcp` or `_udp` (any case).
    /// - Throws: `DNSSDError.invalidServiceType` saying which rule failed.
    @discardableResult
    public static func browsableServiceType(_ type: String) throws(DNSSDError) -> ServiceType {
        let fail = failure(type)
        let (name, transport) = try split(type)
        guard !name.isEmpty, name.utf8.count <= maximumInstanceNameLength - 1 else {
            throw fail("the service name must be 1-\(maximumInstanceNameLength - 1) bytes")
        }
        for byte in name.utf8 where byte < 0x21 || byte > 0x7E || byte == UInt8(ascii: "\\") {
            throw fail("the service name may contain only printable ASCII without '.' or '\\'")
        }
        return ServiceType(name: String(name), transport: transport)
    }

    /// An error about `type`, saying which rule failed.
    private static func failure(_ type: String) -> (String) -> DNSSDError {
        { reason in DNSSDError(.invalidServiceType, "invalid service type \"\(type)\": \(reason)") }
    }

    /// Splits `_name._tcp` / `_name._udp` into the service name (without underscore, unchecked) and the transport
    /// (lower case, without underscore).
    private static func split(_ type: String) throws(DNSSDError) -> (name: Substring, transport: String) {
        let fail = failure(type)
        let labels = type.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count == 2 else { throw fail("expected _name._tcp or _name._udp") }
        let transport = labels[1].lowercased()
        guard transport == "_tcp" || transport == "_udp" else {
            throw fail("the second label must be _tcp or _udp")
        }
        guard labels[0].hasPrefix("_") else { throw fail("the service name must start with '_'") }
        let name = labels[0].dropFirst()
        return (name, String(transport.dropFirst()))
    }

    /// Validates a subtype and returns its label with the leading underscore, e.g. `_printer`.
    ///
    /// Accepts `_printer`, `printer` or the full form `_printer._sub._http._tcp` (whose base type must be `type`).
    /// A subtype label is 1-63 bytes of printable ASCII other than '.' (RFC 6763 §7.1 allows any bytes, but Avahi
    /// and most clients only handle these).
    /// - Throws: `DNSSDError.invalidServiceType`.
    public static func subtype(_ subtype: String, of type: String) throws(DNSSDError) -> String {
        func fail(_ reason: String) -> DNSSDError {
            DNSSDError(.invalidServiceType, "invalid subtype \"\(subtype)\": \(reason)")
        }
        var label = Substring(subtype)
        let parts = subtype.split(separator: ".", omittingEmptySubsequences: false)
        if let sub = parts.firstIndex(where: { $0.lowercased() == "_sub" }) {
            guard sub == 1, parts[2...].joined(separator: ".").lowercased() == type.lowercased() else {
                throw fail("expected _label._sub.\(type)")
            }
            label = parts[0]
        }
        if label.hasPrefix("_") { label = label.dropFirst() }
        guard !label.isEmpty, label.utf8.count <= 62 else { throw fail("the label must be 1-62 characters") }
        for byte in label.utf8 where byte < 0x21 || byte > 0x7E || byte == UInt8(ascii: ".") {
            throw fail("the label may contain only printable ASCII without '.' or spaces")
        }
        return "_" + label
    }

    /// Validates a service instance name: non-empty, at most 63 bytes of UTF-8, no control characters.
    /// - Throws: `DNSSDError.invalidName`.
    public static func instanceName(_ name: String) throws(DNSSDError) {
        guard !name.isEmpty else {
            throw DNSSDError(.invalidName, "the service instance name must not be empty")
        }
        let count = name.utf8.count
        guard count <= maximumInstanceNameLength else {
            throw DNSSDError(
                .invalidName,
                "the service instance name is \(count) bytes of UTF-8; at most \(maximumInstanceNameLength) allowed"
            )
        }
        // RFC 6763 §4.1.1: instance names must not contain ASCII control characters.
        for scalar in name.unicodeScalars where scalar.value < 0x20 || scalar.value == 0x7F {
            throw DNSSDError(.invalidName, "the service instance name contains a control character")
        }
    }

    /// Validates a domain such as `local` or `example.com` (a trailing dot is allowed).
    /// - Throws: `DNSSDError.invalidName`.
    public static func domain(_ domain: String) throws(DNSSDError) {
        try dnsName(domain, what: "domain")
    }

    /// Validates a host name such as `printer.local`.
    /// - Throws: `DNSSDError.invalidName`.
    public static func hostName(_ host: String) throws(DNSSDError) {
        try dnsName(host, what: "host name")
    }

    private static func dnsName(_ name: String, what: String) throws(DNSSDError) {
        var trimmed = Substring(name)
        if trimmed.hasSuffix(".") { trimmed = trimmed.dropLast() }
        guard !trimmed.isEmpty, trimmed.utf8.count <= 253 else {
            throw DNSSDError(.invalidName, "the \(what) \"\(name)\" must be 1-253 bytes")
        }
        for label in trimmed.split(separator: ".", omittingEmptySubsequences: false) {
            guard !label.isEmpty, label.utf8.count <= 63 else {
                throw DNSSDError(.invalidName, "the \(what) \"\(name)\" has an empty label or one over 63 bytes")
            }
            for scalar in label.unicodeScalars where scalar.value <= 0x20 || scalar.value == 0x7F {
                throw DNSSDError(.invalidName, "the \(what) \"\(name)\" contains a space or control character")
            }
        }
    }

    /// Validates a port number (0-65535; 0 is allowed for placeholder registrations).
    /// - Throws: `DNSSDError.invalidParameter`.
    public static func port(_ port: Int) throws(DNSSDError) -> UInt16 {
        guard let value = UInt16(exactly: port) else {
            throw DNSSDError(.invalidParameter, "port \(port) is outside 0-65535")
        }
        return value
    }
}
