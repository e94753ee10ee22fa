import DNSCore

/// Names the resolver answers itself and never forwards (RFC 6761 §6, RFC 7686, RFC 9462 §6.1).
///
/// - `localhost.` and every name below it: A 127.0.0.1, AAAA ::1, NODATA for other types (RFC 6761 §6.3: "name
///   resolution APIs and libraries SHOULD recognize localhost names as special and SHOULD always return the IP
///   loopback address"; sending them upstream leaks what programs on this machine ask for).
/// - `invalid.` and below (RFC 6761 §6.4) and `onion.` and below (RFC 7686 §2: looking up an onion name on the
///   DNS leaks it to the network): NXDOMAIN.
/// - `resolver.arpa.` and below (RFC 9462 §6.1): a client asking its resolver for `_dns.resolver.arpa` must learn
///   about this resolver, not about the upstream behind it, or it would bypass the machine's resolver. discoverd
///   serves no encrypted DNS of its own yet, so it designates nothing: NODATA.
public enum SpecialUseNames {
    /// What a special-use name is answered with.
    public enum Kind: Sendable, Hashable {
        case loopback
        case nonexistent
        case noData
    }

    /// The TTL of synthesized loopback records.
    public static let ttl: UInt32 = 86_400

    /// The kind of `name` (absolute, lowercased), or nil for an ordinary name. Cheap (it runs for every hop of
    /// every walk, cache hits included): one backward scan of the bytes of the last label, and of `resolver` when
    /// that label is `arpa`.
    public static func kind(of name: String) -> Kind? {
        if let kind = name.utf8.withContiguousStorageIfAvailable({ kind(bytes: $0) }) { return kind }
        return Array(name.utf8).withUnsafeBufferPointer { kind(bytes: $0) }
    }

    private static let dot = UInt8(ascii: ".")
    private static let backslash = UInt8(ascii: "\\")

    private static func kind(bytes: UnsafeBufferPointer<UInt8>) -> Kind? {
        let end = bytes.count - 1  // the final dot
        guard end >= 1, bytes[end] == dot else { return nil }
        guard let start = labelStart(bytes, before: end) else { return nil }
        switch end - start {
        case 9 where matches(bytes, at: start, "localhost"): return .loopback
        case 7 where matches(bytes, at: start, "invalid"): return .nonexistent
        case 5 where matches(bytes, at: start, "onion"): return .nonexistent
        case 4 where matches(bytes, at: start, "arpa"):
            // `resolver.arpa.` itself or a name below it.
            guard start >= 9, let label = labelStart(bytes, before: start - 1), start - 1 - label == 8,
                matches(bytes, at: label, "resolver")
            else { return nil }
            return .noData
        default: return nil
        }
    }

    /// Where the label that ends before the dot at `end` starts; nil when the dot before it is escaped (`\.` is
    /// part of a label, and such names are never special).
    private static func labelStart(_ bytes: UnsafeBufferPointer<UInt8>, before end: Int) -> Int? {
        var index = end - 1
        while index >= 0, bytes[index] != dot { index -= 1 }
        if index >= 1, bytes[index - 1] == backslash { return nil }
        return index + 1
    }

    private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, at start: Int, _ label: StaticString) -> Bool {
        let count = label.utf8CodeUnitCount
        guard start + count <= bytes.count else { return false }
        let pointer = label.utf8Start
        for offset in 0..<count where bytes[start + offset] != pointer[offset] { return false }
        return true
    }

    /// The synthesized answer for (name, type) when `name` is special, else nil.
    public static func answer(_ name: String, type: RRType, class rrClass: RRClass = .in) -> CacheAnswer<CachedRRset>? {
        guard let kind = kind(of: name) else { return nil }
        switch kind {
        case .nonexistent:
            return .nxdomain(nil)
        case .noData:
            return .nodata(nil)
        case .loopback:
            guard rrClass == .in else { return .nodata(nil) }
            if type == .a {
                return .positive(loopbackA(name))
            }
            if type == .aaaa {
                return .positive(loopbackAAAA(name))
            }
            return .nodata(nil)
        }
    }

    private static func loopbackA(_ name: String) -> CachedRRset {
        CachedRRset(records: [ResourceRecord(name: name, type: .a, ttl: ttl, rdata: [127, 0, 0, 1])])
    }

    private static func loopbackAAAA(_ name: String) -> CachedRRset {
        CachedRRset(records: [ResourceRecord(name: name, type: .aaaa, ttl: ttl, rdata: Array(repeating: 0, count: 15) + [1])])
    }
}
