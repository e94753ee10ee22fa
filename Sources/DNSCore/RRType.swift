/// A DNS resource record type (RFC 1035 §3.2.2 and the IANA registry), kept as its 16-bit number.
///
/// Unknown numbers are valid values; they print as `TYPEnnn` (RFC 3597 §5).
public struct RRType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The number.
    public var rawValue: UInt16

    /// Creates a type from its number.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Creates a type from its number.
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// IPv4 address (RFC 1035).
    public static let a = RRType(1)
    /// Name server (RFC 1035).
    public static let ns = RRType(2)
    /// Canonical name (RFC 1035).
    public static let cname = RRType(5)
    /// Start of authority (RFC 1035).
    public static let soa = RRType(6)
    /// Domain name pointer (RFC 1035).
    public static let ptr = RRType(12)
    /// Mail exchange (RFC 1035).
    public static let mx = RRType(15)
    /// Text strings (RFC 1035).
    public static let txt = RRType(16)
    /// IPv6 address (RFC 3596).
    public static let aaaa = RRType(28)
    /// Service location (RFC 2782).
    public static let srv = RRType(33)
    /// EDNS(0) pseudo-record (RFC 6891).
    public static let opt = RRType(41)
    /// General service binding (RFC 9460).
    public static let svcb = RRType(64)
    /// HTTPS service binding (RFC 9460 §9).
    public static let https = RRType(65)
    /// Any type (QTYPE only).
    public static let any = RRType(255)

    private static let names: [UInt16: String] = [
        1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 13: "HINFO", 15: "MX", 16: "TXT", 17: "RP", 28: "AAAA",
        29: "LOC", 33: "SRV", 35: "NAPTR", 39: "DNAME", 41: "OPT", 43: "DS", 44: "SSHFP", 46: "RRSIG", 47: "NSEC",
        48: "DNSKEY", 50: "NSEC3", 51: "NSEC3PARAM", 52: "TLSA", 53: "SMIMEA", 59: "CDS", 60: "CDNSKEY",
        61: "OPENPGPKEY", 62: "CSYNC", 63: "ZONEMD", 64: "SVCB", 65: "HTTPS", 99: "SPF", 108: "EUI48", 109: "EUI64",
        249: "TKEY", 250: "TSIG", 251: "IXFR", 252: "AXFR", 255: "ANY", 256: "URI", 257: "CAA",
    ]

    /// The mnemonic, e.g. `HTTPS`, or `TYPE123` for a type without one.
    public var description: String { Self.names[rawValue] ?? "TYPE\(rawValue)" }
}

/// A DNS class (RFC 1035 §3.2.4); in practice always `IN`.
public struct RRClass: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The number.
    public var rawValue: UInt16

    /// Creates a class from its number.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Creates a class from its number.
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// The Internet class.
    public static let `in` = RRClass(1)
    /// The Chaos class.
    public static let ch = RRClass(3)
    /// Any class (QCLASS only).
    public static let any = RRClass(255)

    /// The mnemonic, e.g. `IN`, or `CLASS7` (RFC 3597 §5).
    public var description: String {
        switch rawValue {
        case 1: return "IN"
        case 3: return "CH"
        case 255: return "ANY"
        default: return "CLASS\(rawValue)"
        }
    }
}

/// A DNS response code, including the EDNS extended bits (RFC 6891 §6.1.3): values above 15 are possible.
public struct RCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The number.
    public var rawValue: UInt16

    /// Creates a response code from its (extended) number.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Creates a response code from its (extended) number.
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// No error.
    public static let noError = RCode(0)
    /// Format error.
    public static let formErr = RCode(1)
    /// Server failure.
    public static let servFail = RCode(2)
    /// The name does not exist.
    public static let nxDomain = RCode(3)
    /// Not implemented.
    public static let notImp = RCode(4)
    /// Refused.
    public static let refused = RCode(5)
    /// Unsupported EDNS version (RFC 6891).
    public static let badVers = RCode(16)

    /// The mnemonic used in API timing records, e.g. `NOERROR`, or `RCODE42`. A switch over literals, not a
    /// dictionary: every upstream try's record names its code, on the path of the answer (BENCHMARKS.md, round 22).
    public var description: String {
        switch rawValue {
        case 0: "NOERROR"
        case 1: "FORMERR"
        case 2: "SERVFAIL"
        case 3: "NXDOMAIN"
        case 4: "NOTIMP"
        case 5: "REFUSED"
        case 6: "YXDOMAIN"
        case 7: "YXRRSET"
        case 8: "NXRRSET"
        case 9: "NOTAUTH"
        case 10: "NOTZONE"
        case 16: "BADVERS"
        case 23: "BADCOOKIE"
        default: "RCODE\(rawValue)"
        }
    }
}
