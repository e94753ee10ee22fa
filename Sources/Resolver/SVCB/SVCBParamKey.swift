import DNSCore

/// An SvcParamKey (RFC 9460 §14.3.2), kept as its 16-bit number; unregistered keys are valid values.
public struct SVCBParamKey: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The key number.
    public var rawValue: UInt16

    /// Creates a key from its number.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Creates a key from its number.
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// Keys that must be understood (RFC 9460 §8).
    public static let mandatory = SVCBParamKey(0)
    /// Additional supported protocols (RFC 9460 §7.1).
    public static let alpn = SVCBParamKey(1)
    /// No support for the default protocol (RFC 9460 §7.1).
    public static let noDefaultAlpn = SVCBParamKey(2)
    /// Port of the alternative endpoint (RFC 9460 §7.2).
    public static let port = SVCBParamKey(3)
    /// IPv4 address hints (RFC 9460 §7.3).
    public static let ipv4hint = SVCBParamKey(4)
    /// Encrypted ClientHello configuration list.
    public static let ech = SVCBParamKey(5)
    /// IPv6 address hints (RFC 9460 §7.3).
    public static let ipv6hint = SVCBParamKey(6)
    /// DNS-over-HTTPS URI template (RFC 9461 §5).
    public static let dohpath = SVCBParamKey(7)

    private static let names: [UInt16: String] = [
        0: "mandatory", 1: "alpn", 2: "no-default-alpn", 3: "port", 4: "ipv4hint", 5: "ech", 6: "ipv6hint",
        7: "dohpath",
    ]

    /// The registered name, e.g. `no-default-alpn`, or `keyNNNNN` (RFC 9460 §2.1).
    public var description: String { Self.names[rawValue] ?? "key\(rawValue)" }

    public static func < (lhs: SVCBParamKey, rhs: SVCBParamKey) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// An SVCB/HTTPS record that must be rejected.
public struct SVCBError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule the record breaks.
    public enum Code: String, Hashable, Sendable {
        /// RDATA ends before SvcPriority or inside TargetName.
        case truncated
        /// TargetName is not an uncompressed wire-format name (RFC 9460 §2.2).
        case invalidTargetName
        /// The RDATA ends inside a SvcParam (RFC 9460 §2.2).
        case paramOverrun
        /// SvcParamKeys are not in strictly increasing order, including duplicates (RFC 9460 §2.2).
        case keysNotIncreasing
        /// A SvcParamValue does not have the format of its key (RFC 9460 §2.2, §7, §8).
        case invalidValue
    }

    /// Which rule the record breaks.
    public var code: Code
    /// The key whose value is wrong, for `.invalidValue`.
    public var key: SVCBParamKey?
    /// Details for people.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, key: SVCBParamKey? = nil, _ message: String) {
        self.code = code
        self.key = key
        self.message = message
    }

    public var description: String {
        if let key { return "malformed SVCB record (\(code.rawValue), \(key)): \(message)" }
        return "malformed SVCB record (\(code.rawValue)): \(message)"
    }
}
