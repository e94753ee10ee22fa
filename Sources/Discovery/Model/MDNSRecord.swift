/// One resource record as mDNS reported it (through Avahi's record browser).
///
/// `name` is absolute and lowercased presentation format (`lab-a.local.`, `my\032printer._ipp._tcp.local.`):
/// printable ASCII as is except `"().;@$\` (backslash-escaped), other bytes as `\DDD`. `rdata` is in uncompressed
/// wire format: names inside PTR, SRV, CNAME and NS rdata are plain label sequences (Avahi re-serializes each record
/// without a compression table), in the case the publisher used.
public struct MDNSRecord: Sendable, Hashable {
    /// The owner name, e.g. `lab-b.local.`.
    public var name: String
    /// The RR type, e.g. 1 for A.
    public var type: UInt16
    /// The class, 1 (IN) in practice; without the mDNS cache-flush bit.
    public var dnsClass: UInt16
    /// The TTL in seconds.
    ///
    /// Avahi's client API does not hand over the TTL a record arrived with, so this is the TTL RFC 6762 §10
    /// recommends and Avahi and python-zeroconf give their own records: `hostRecordTTL` (120 s) for records that
    /// name a host or carry its address (A, AAAA, SRV, HINFO, CNAME, NS and PTR under `in-addr.arpa`/`ip6.arpa`),
    /// `otherRecordTTL` (4500 s) for the rest. A unicast DNS answer built from it should not use more than 10 s
    /// (RFC 6762 §6.7).
    public var ttl: UInt32
    /// The RDATA in uncompressed wire format.
    public var rdata: [UInt8]
    /// The interface index (in avahi-daemon's network namespace) the record was seen on; the first one when seen on
    /// several.
    public var interfaceIndex: Int32

    /// RFC 6762 §10's TTL for host name records.
    public static let hostRecordTTL: UInt32 = 120
    /// RFC 6762 §10's TTL for other records (75 minutes).
    public static let otherRecordTTL: UInt32 = 4500

    /// Creates a record value.
    public init(name: String, type: UInt16, dnsClass: UInt16 = 1, ttl: UInt32, rdata: [UInt8], interfaceIndex: Int32) {
        self.name = name
        self.type = type
        self.dnsClass = dnsClass
        self.ttl = ttl
        self.rdata = rdata
        self.interfaceIndex = interfaceIndex
    }

    /// The TTL `ttl` documents for a record of `type` owned by `name` (canonical text).
    static func nominalTTL(type: UInt16, name: String) -> UInt32 {
        switch type {
        case 1, 2, 5, 13, 28, 33:  // A, NS, CNAME, HINFO, AAAA, SRV
            return hostRecordTTL
        case 12 where name.hasSuffix(".in-addr.arpa.") || name.hasSuffix(".ip6.arpa."):
            return hostRecordTTL
        default:
            return otherRecordTTL
        }
    }
}

/// A change of the records of one (name, type) on the link, reported by `DiscoveryService.recordUpdates`.
public enum MDNSRecordEvent: Sendable, Hashable {
    /// A record appeared (first seen on any interface/protocol).
    case added(MDNSRecord)
    /// A record went away (goodbye or expiry on the last interface/protocol it was seen on).
    case removed(MDNSRecord)
    /// Avahi sent what it had in its cache and waited a second for answers (`AVAHI_BROWSER_ALL_FOR_NOW`).
    case allForNow
}
