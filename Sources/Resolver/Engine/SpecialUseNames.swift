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

    /// The kind of `name` (absolute, lowercased), or nil for an ordinary name. Cheap: it looks only at the last
    /// label unless that is `arpa`.
    public static func kind(of name: String) -> Kind? {
        let bytes = name.utf8
        // The last label: between the second-to-last dot and the final one.
        guard bytes.count >= 2, bytes.last == UInt8(ascii: ".") else { return nil }
        let body = bytes.dropLast()
        let lastLabel: Substring.UTF8View
        if let dot = body.lastIndex(of: UInt8(ascii: ".")) {
            // An escaped dot (`\.`) is part of a label, not a boundary: such names are never special.
            if dot > body.startIndex, body[body.index(before: dot)] == UInt8(ascii: "\\") { return nil }
            lastLabel = Substring(name).utf8[body.index(after: dot)..<body.endIndex]
        } else {
            lastLabel = Substring(name).utf8[body.startIndex..<body.endIndex]
        }
        switch lastLabel.count {
        case 9 where lastLabel.elementsEqual("localhost".utf8): return .loopback
        case 7 where lastLabel.elementsEqual("invalid".utf8): return .nonexistent
        case 5 where lastLabel.elementsEqual("onion".utf8): return .nonexistent
        case 4 where lastLabel.elementsEqual("arpa".utf8):
            return name == "resolver.arpa." || name.hasSuffix(".resolver.arpa.") ? .noData : nil
        default: return nil
        }
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
