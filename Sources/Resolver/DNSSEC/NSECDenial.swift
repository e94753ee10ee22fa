import DNSCore

/// NSEC denial of existence (RFC 4035 §5.4, RFC 4034 §6.1 canonical order), done here rather than by ldns, whose
/// check takes the wildcard as `*.` + the name's parent instead of the closest encloser and does not know empty
/// non-terminals. The records must be verified already; this is only the logic.
enum NSECDenial {
    /// Lowercased labels, most specific first (as `DNSName` stores them).
    typealias Labels = [[UInt8]]

    static func labels(_ name: String) -> Labels? { (try? DNSName(name))?.labels }

    /// RFC 4034 §6.1: compare from the root label down, octet by octet; a name sorts before its descendants.
    static func compare(_ a: Labels, _ b: Labels) -> Int {
        var i = a.count - 1
        var j = b.count - 1
        while i >= 0 && j >= 0 {
            let x = a[i]
            let y = b[j]
            if x != y {
                for (p, q) in zip(x, y) where p != q { return p < q ? -1 : 1 }
                return x.count < y.count ? -1 : 1
            }
            i -= 1
            j -= 1
        }
        if i < 0 && j < 0 { return 0 }
        return i < 0 ? -1 : 1
    }

    static func isSubdomain(_ name: Labels, of zone: Labels) -> Bool {
        name.count >= zone.count && Array(name.suffix(zone.count)) == zone
    }

    /// Whether the NSEC from `owner` to `next` covers `name` strictly (owner < name < next, or the last NSEC
    /// of the zone, next ≤ owner, covering everything after owner).
    static func covers(owner: Labels, next: Labels, _ name: Labels) -> Bool {
        if compare(owner, next) < 0 { return compare(owner, name) < 0 && compare(name, next) < 0 }
        return compare(owner, name) < 0 || compare(name, next) < 0
    }

    struct Record {
        var owner: Labels
        var next: Labels
        var types: Set<UInt16>
    }

    static func parse(_ records: [ResourceRecord]) -> [Record] {
        records.compactMap { record in
            guard record.type.rawValue == 47, let owner = labels(record.name),
                let (nextLabels, _) = try? DNSName.readLabels(record.rdata, at: 0),
                let next = try? DNSName(labels: nextLabels), let types = DNSSECCrypto.nsecTypes(record)
            else { return nil }
            return Record(owner: owner, next: next.labels, types: types)
        }
    }

    /// The longest common ancestor of two names.
    static func commonAncestor(_ a: Labels, _ b: Labels) -> Labels {
        var result: Labels = []
        for (x, y) in zip(a.reversed(), b.reversed()) {
            guard x == y else { break }
            result.insert(x, at: 0)
        }
        return result
    }

    /// Whether `records` prove that `name` has no `type` (NODATA, `nameExists`) or does not exist (NXDOMAIN).
    static func proves(name: String, type: RRType, nameExists: Bool, records: [ResourceRecord]) -> Bool {
        guard let qname = labels(name) else { return false }
        let nsecs = parse(records)
        let qtype = type.rawValue
        if let match = nsecs.first(where: { compare($0.owner, qname) == 0 }) {
            // The name exists: NODATA when neither the type nor a CNAME is there (for DS, at a delegation, the
            // parent's NSEC is the one; a DS query at a zone's apex must not be answered by the child's).
            guard nameExists else { return false }
            return !match.types.contains(qtype) && !match.types.contains(5)
        }
        guard let covering = nsecs.first(where: { covers(owner: $0.owner, next: $0.next, qname) }) else { return false }
        if nameExists {
            // An empty non-terminal: the next name is below the asked one (RFC 4035 §3.1.3.2).
            if isSubdomain(covering.next, of: qname) { return true }
            // A wildcard NODATA: the wildcard at the closest encloser exists without the type.
            let encloser = closestEncloser(qname, covering)
            let wildcard = [Array("*".utf8)] + encloser
            if let atWildcard = nsecs.first(where: { compare($0.owner, wildcard) == 0 }) {
                return !atWildcard.types.contains(qtype) && !atWildcard.types.contains(5)
            }
            return false
        }
        // NXDOMAIN: the name is covered, and so is the wildcard at its closest encloser.
        let encloser = closestEncloser(qname, covering)
        let wildcard = [Array("*".utf8)] + encloser
        if compare(wildcard, qname) == 0 { return true }
        return nsecs.contains { covers(owner: $0.owner, next: $0.next, wildcard) }
    }

    /// The closest encloser proven by a covering NSEC: the deeper of the name's common ancestors with the NSEC's
    /// owner and next name.
    static func closestEncloser(_ qname: Labels, _ covering: Record) -> Labels {
        let a = commonAncestor(qname, covering.owner)
        let b = commonAncestor(qname, covering.next)
        return a.count >= b.count ? a : b
    }
}
