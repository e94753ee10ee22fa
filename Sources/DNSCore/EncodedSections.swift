/// Resource records already in wire format, with where each TTL field sits, so a reply can be assembled by
/// copying bytes and patching TTLs (docs/DESIGN.md, "One cache, two front doors").
///
/// Owner names are written uncompressed (RFC 1035 §4.1.4 allows it; the RDATA is kept as received, already
/// uncompressed by the parser). Records of the DNSSEC types are counted separately so that a reply to a client
/// without the DO bit can leave them out (RFC 4035 §3.2.1). A class, immutable: handing a cached answer to a
/// reply costs one reference count, not one per array.
public final class EncodedSections: Sendable, Hashable {
    /// The answer records, back to back.
    public let answer: [UInt8]
    /// The authority records, back to back.
    public let authority: [UInt8]
    /// Record counts of the two sections.
    public let answerCount: UInt16
    public let authorityCount: UInt16
    /// Offsets of the 4-byte TTL fields in `answer` and `authority`.
    public let answerTTLOffsets: [Int]
    public let authorityTTLOffsets: [Int]
    /// Each section holds its other records first and its RRSIG/NSEC/NSEC3 records after them, so the reply to a
    /// client without DO is a prefix of each section, copied as one block like any other reply: the prefix's
    /// length in bytes and its record count. (RFC 4035 §3.1.1 asks that the RRSIGs be in the same section as the
    /// RRset, not in any order within it.)
    public let answerPlainBytes: Int
    public let answerPlainCount: UInt16
    public let authorityPlainBytes: Int
    public let authorityPlainCount: UInt16

    /// Encodes `answer` and `authority`; a record whose owner name cannot be encoded is left out.
    public init(answer: [ResourceRecord], authority: [ResourceRecord]) {
        var offsets: [Int] = []
        (self.answer, self.answerCount, self.answerPlainBytes, self.answerPlainCount) =
            Self.encode(answer, ttlOffsets: &offsets)
        self.answerTTLOffsets = offsets
        offsets = []
        (self.authority, self.authorityCount, self.authorityPlainBytes, self.authorityPlainCount) =
            Self.encode(authority, ttlOffsets: &offsets)
        self.authorityTTLOffsets = offsets
    }

    public static func == (lhs: EncodedSections, rhs: EncodedSections) -> Bool {
        lhs === rhs
            || (lhs.answer == rhs.answer && lhs.authority == rhs.authority && lhs.answerCount == rhs.answerCount
                && lhs.authorityCount == rhs.authorityCount && lhs.answerTTLOffsets == rhs.answerTTLOffsets
                && lhs.authorityTTLOffsets == rhs.authorityTTLOffsets)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(answer)
        hasher.combine(authority)
    }

    /// RRSIG, NSEC, NSEC3 (RFC 4034, 5155): what DO=0 leaves out of the answer and authority sections.
    public static func isDNSSEC(_ type: RRType) -> Bool {
        type.rawValue == 46 || type.rawValue == 47 || type.rawValue == 50
    }

    /// Appends `records` to `out` in wire format; returns how many were written.
    @discardableResult
    public static func append(_ records: [ResourceRecord], to out: inout [UInt8], ttlOffsets: inout [Int]) -> Int {
        var written = 0
        for record in records {
            guard record.rdata.count <= Int(UInt16.max) else { continue }
            if !DNSName.appendPlainWire(record.name, to: &out) {
                guard let name = try? DNSName(record.name) else { continue }
                out.append(contentsOf: name.wire)
            }
            out.append(UInt8(record.type.rawValue >> 8))
            out.append(UInt8(record.type.rawValue & 0xFF))
            out.append(UInt8(record.class.rawValue >> 8))
            out.append(UInt8(record.class.rawValue & 0xFF))
            ttlOffsets.append(out.count)
            for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: record.ttl >> shift)) }
            out.append(UInt8(record.rdata.count >> 8))
            out.append(UInt8(record.rdata.count & 0xFF))
            out.append(contentsOf: record.rdata)
            written += 1
        }
        return written
    }

    /// The records without DNSSEC types, then those with: bytes, count, and the first part's bytes and count.
    private static func encode(_ records: [ResourceRecord], ttlOffsets: inout [Int])
        -> ([UInt8], UInt16, Int, UInt16)
    {
        var out: [UInt8] = []
        // Room for every record written out in full (a plain name's wire form is its text plus at most 2 octets):
        // one allocation, not one per growth.
        out.reserveCapacity(records.reduce(0) { $0 + $1.name.utf8.count + 2 + 10 + $1.rdata.count })
        guard records.contains(where: { isDNSSEC($0.type) }) else {
            let count = UInt16(clamping: append(records, to: &out, ttlOffsets: &ttlOffsets))
            return (out, count, out.count, count)
        }
        let plain = append(records.filter { !isDNSSEC($0.type) }, to: &out, ttlOffsets: &ttlOffsets)
        let plainBytes = out.count
        let signed = append(records.filter { isDNSSEC($0.type) }, to: &out, ttlOffsets: &ttlOffsets)
        return (out, UInt16(clamping: plain + signed), plainBytes, UInt16(clamping: plain))
    }
}
