import DNSCore
import Glibc

/// What the resolver keeps of an upstream reply: the bailiwick rules, applied before anything is cached.
///
/// An upstream, or anyone on its path who can answer first, may append records to a reply that the question did
/// not ask for (`victim.example. A 6.6.6.6` beside an unrelated answer). A forwarding resolver must keep only what
/// answers the question, as Unbound's `iterator/iter_scrub.c` does for a recursive one:
///
/// - **Answer**: the alias chain that starts at the question name (a CNAME at the current name, or a DNAME at one of
///   its ancestors, each hop once, bounded), the records of the asked type at the chain's end, and the RRSIGs at
///   those owners that cover a kept type. Everything else (other owners, other classes, extra CNAMEs) goes.
/// - **Authority**: an SOA only when its owner is the chain's last name or an ancestor of it (the zone that says
///   "no such data"); NSEC/NSEC3 and their RRSIGs only inside that zone, or for a positive answer inside the zone
///   that signed it (wildcard proofs). NS and everything else go: a stub follows no referrals.
/// - **Additional**: never kept (glue and "helpful" addresses are not answers).
public enum ReplyScrubber {
    /// A scrubbed reply.
    public struct Scrubbed: Sendable, Equatable {
        /// The alias chain and the records of the asked type at its end (with covering RRSIGs).
        public var answer: [ResourceRecord]
        /// SOA and denial proofs of the chain end's zone.
        public var authority: [ResourceRecord]
        /// The names of the chain, starting with the question name.
        public var chain: [String]
        /// Whether the answer holds records of the asked type at the chain's end.
        public var hasData: Bool
        /// How many records of the reply (all sections) were not kept (a CNAME synthesized from a DNAME is kept but
        /// was never in the reply, so it does not make this smaller).
        public var dropped: Int
    }

    /// RRSIG (RFC 4034 §3), NSEC, NSEC3.
    static let rrsig = RRType(46)
    static let nsec = RRType(47)
    static let nsec3 = RRType(50)
    /// DNAME (RFC 6672).
    static let dname = RRType(39)

    /// Applies the rules to `message`, the reply to `question`.
    /// - Parameters:
    ///   - maximumHops: the alias hop limit of the resolver (the chain stops there).
    public static func scrub(_ message: DNSMessage, question: DNSQuestion, maximumHops: Int) -> Scrubbed {
        scrub(
            answer: message.answer, authority: message.authority, additionalCount: message.additional.count,
            question: question, maximumHops: maximumHops)
    }

    /// The same for sections already taken apart (a persisted cache entry is checked against its key this way).
    public static func scrub(
        answer: [ResourceRecord], authority: [ResourceRecord], additionalCount: Int = 0, question: DNSQuestion,
        maximumHops: Int
    ) -> Scrubbed {
        let rrClass = question.class
        let type = question.type
        // Most replies: only records of the asked type at the asked name, unsigned, no authority. The rules below
        // keep all of them and nothing else; say so without building the chain's arrays.
        if authority.isEmpty, !answer.isEmpty, type != .any, type != rrsig,
            answer.allSatisfy({ $0.type == type && $0.class == rrClass && $0.name == question.name })
        {
            return Scrubbed(
                answer: answer, authority: [], chain: [question.name], hasData: true, dropped: additionalCount)
        }
        // Most negative replies (NXDOMAIN, NODATA): no answer, and the zone's SOA alone in the authority section,
        // unsigned. The rules keep the SOA when its zone holds the name, and nothing else was there to keep; say
        // so without them (a cold miss of the lab is such a reply: its scrub took about 30 reference-count
        // operations and six arrays, BENCHMARKS.md, round 23).
        if answer.isEmpty, authority.count == 1, authority[0].type == .soa, authority[0].class == rrClass,
            isAncestor(authority[0].name, of: question.name)
        {
            return Scrubbed(
                answer: [], authority: authority, chain: [question.name], hasData: false, dropped: additionalCount)
        }
        return scrubByTheRules(
            answer: answer, authority: authority, additionalCount: additionalCount, question: question,
            maximumHops: maximumHops)
    }

    /// ``scrub(answer:authority:additionalCount:question:maximumHops:)`` without its shortcuts (the tests check that
    /// they agree).
    static func scrubByTheRules(
        answer: [ResourceRecord], authority: [ResourceRecord], additionalCount: Int, question: DNSQuestion,
        maximumHops: Int
    ) -> Scrubbed {
        let rrClass = question.class
        let type = question.type
        let inClass = answer.filter { $0.class == rrClass }
        var chain = [question.name]
        var kept: [ResourceRecord] = []
        var keptTypes: [(owner: String, type: RRType)] = []
        var hasData = false
        // CNAMEs made from a DNAME because the reply had none that agreed: kept, but no record of the reply.
        var synthesized = 0

        func keep(_ records: [ResourceRecord], owner: String, type: RRType) {
            kept += records
            keptTypes.append((owner, type))
        }

        var current = question.name
        while true {
            let data = inClass.filter { $0.name == current && ($0.type == type || type == .any) && $0.type != rrsig }
            if !data.isEmpty {
                hasData = true
                for record in data where !keptTypes.contains(where: { $0.owner == current && $0.type == record.type }) {
                    keep(data.filter { $0.type == record.type }, owner: current, type: record.type)
                }
                break
            }
            if type == .cname || type == .any { break }
            // A DNAME at an ancestor rewrites every name below it (RFC 6672 §2.2); its synthesized CNAME is
            // kept only when it says the same.
            var next: String?
            if let dname = inClass.first(where: {
                $0.type == dname && current != $0.name && isAncestor($0.name, of: current)
            }), let target = (try? DNSName(wire: dname.rdata))?.text {
                let rewritten = String(current.dropLast(dname.name.count)) + (target == "." ? "" : target)
                if rewritten.utf8.count <= DNSName.maximumWireLength + 1, (try? DNSName(rewritten)) != nil {
                    keep([dname], owner: dname.name, type: Self.dname)
                    next = rewritten
                    if let given = inClass.first(where: {
                        $0.name == current && $0.type == .cname && (try? $0.cnameTarget()) == rewritten
                    }) {
                        keep([given], owner: current, type: .cname)
                    } else {
                        synthesized += 1
                        let made = ResourceRecord(
                            name: current, type: .cname, class: rrClass, ttl: dname.ttl,
                            rdata: (try? DNSName(rewritten).wire) ?? [0])
                        keep([made], owner: current, type: .cname)
                    }
                }
            } else if let cname = inClass.first(where: { $0.name == current && $0.type == .cname }),
                let target = try? cname.cnameTarget()
            {
                // One CNAME per owner (RFC 2181 §10.1): the first one counts, the rest are dropped.
                keep([cname], owner: current, type: .cname)
                next = target
            }
            guard let next, !chain.contains(next), chain.count <= maximumHops else { break }
            chain.append(next)
            current = next
        }
        // Signatures over what was kept, at the same owner, of the same class.
        for (owner, covered) in keptTypes {
            kept += inClass.filter { $0.name == owner && $0.type == rrsig && coveredType($0) == covered }
        }

        let end = chain[chain.count - 1]
        var authorityKept: [ResourceRecord] = []
        let soa = authority.first { $0.type == .soa && $0.class == rrClass && isAncestor($0.name, of: end) }
        // The zone proofs must come from: the SOA's for a negative answer, the signer's for a positive one.
        let zone: String? =
            soa?.name
            ?? kept.first(where: { $0.type == rrsig && $0.name == end }).flatMap(signerName)
        if let soa {
            authorityKept.append(soa)
            authorityKept += authority.filter {
                $0.type == rrsig && $0.name == soa.name && coveredType($0) == .soa && $0.class == rrClass
            }
        }
        if let zone {
            for record in authority where record.class == rrClass && isAncestor(zone, of: record.name) {
                if record.type == nsec || record.type == nsec3 {
                    authorityKept.append(record)
                } else if record.type == rrsig, let covered = coveredType(record), covered == nsec || covered == nsec3 {
                    authorityKept.append(record)
                }
            }
        }
        let dropped =
            answer.count - (kept.count - synthesized) + authority.count - authorityKept.count + additionalCount
        return Scrubbed(answer: kept, authority: authorityKept, chain: chain, hasData: hasData, dropped: dropped)
    }

    /// Whether `zone` is `name` or one of its ancestors (both absolute, lowercased; `.` is everyone's).
    public static func isAncestor(_ zone: String, of name: String) -> Bool {
        if zone == "." || zone == name { return true }
        // Compared as bytes, in place: names here are presentation text, where a byte comparison is the right one
        // (not String's Unicode equivalence), and copying the name to an array cost more than the rest of a negative
        // answer's scrub (BENCHMARKS.md, round 22). A native string is read where it is (`withUTF8` on a `var` copy
        // took a reference count of each); any other is made contiguous first.
        let inPlace = name.utf8.withContiguousStorageIfAvailable { bytes in
            zone.utf8.withContiguousStorageIfAvailable { suffix in isAncestor(suffix, of: bytes) }
        }
        if let answer = inPlace ?? nil { return answer }
        var name = name, zone = zone
        return name.withUTF8 { bytes in zone.withUTF8 { suffix in isAncestor(suffix, of: bytes) } }
    }

    /// The byte comparison of ``isAncestor(_:of:)``: `suffix` ends `bytes` and starts at an unescaped label boundary.
    private static func isAncestor(_ suffix: UnsafeBufferPointer<UInt8>, of bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count > suffix.count else { return false }
        let boundary = bytes.count - suffix.count - 1
        let tail = bytes.baseAddress! + boundary + 1
        guard suffix.isEmpty || memcmp(tail, suffix.baseAddress!, suffix.count) == 0 else { return false }
        // The suffix must start at a label boundary: the byte before it is an unescaped dot.
        guard bytes[boundary] == UInt8(ascii: ".") else { return false }
        var backslashes = 0
        var index = boundary - 1
        while index >= 0 && bytes[index] == UInt8(ascii: "\\") {
            backslashes += 1
            index -= 1
        }
        return backslashes % 2 == 0
    }

    /// The type an RRSIG covers (RFC 4034 §3.1.1).
    static func coveredType(_ record: ResourceRecord) -> RRType? {
        guard record.rdata.count >= 2 else { return nil }
        return RRType(UInt16(record.rdata[0]) << 8 | UInt16(record.rdata[1]))
    }

    /// The signer's name of an RRSIG (RFC 4034 §3.1.7), lowercased and absolute.
    static func signerName(_ record: ResourceRecord) -> String? {
        guard record.rdata.count > 18, let (name, _) = try? DNSName.read(wire: record.rdata, at: 18) else { return nil }
        return name.text
    }
}
