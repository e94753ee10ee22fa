
/// One part of an answer: encoded records and the TTL to write into each of them.
public struct AnswerPart: Sendable {
    public var sections: EncodedSections
    public var ttl: UInt32

    public init(sections: EncodedSections, ttl: UInt32) {
        self.sections = sections
        self.ttl = ttl
    }
}

/// Assembles reply messages from stored bytes (RFC 1035 §4.1, RFC 6891 §6.1.3, RFC 8914).
public enum StubReply {
    /// The UDP payload size the stub advertises and the most it sends over UDP (DNS Flag Day 2020).
    public static let ourPayloadSize: UInt16 = 1232

    /// Response codes, including the extended BADVERS.
    public enum Code: UInt16, Sendable {
        case noError = 0, formErr = 1, servFail = 2, nxDomain = 3, notImp = 4, refused = 5, badVers = 16
    }

    /// How large a reply to `query` may be: 65535 over TCP; over UDP the client's EDNS size (at least 512), at most
    /// ours, or 512 without EDNS (RFC 1035 §4.2.1, RFC 6891 §6.2.5).
    public static func sizeLimit(for query: StubQuery, overTCP: Bool) -> Int {
        if overTCP { return 65535 }
        guard let edns = query.edns else { return 512 }
        return Int(min(max(edns.udpPayloadSize, 512), ourPayloadSize))
    }

    /// The reply to `query`: header, the echoed question, `parts` (answer records, then authority records),
    /// and an OPT record when the query had one. When it would exceed `limit`, the records are left out and TC
    /// is set (RFC 2181 §9): the client asks again over TCP.
    ///
    /// - Parameter includeDNSSEC: keep RRSIG/NSEC/NSEC3 records (the client set DO, or asked for that type).
    public static func make(
        to query: StubQuery, code: Code, parts: [AnswerPart] = [], includeDNSSEC: Bool = false,
        error ede: ExtendedDNSError? = nil, authenticated: Bool = false, limit: Int
    ) -> (bytes: [UInt8], truncated: Bool) {
        let opt = query.edns.map { optRecord(code: code, dnssecOK: $0.dnssecOK, error: ede) } ?? []
        return direct(
            to: query, code: code, parts: parts, opt: opt, includeDNSSEC: includeDNSSEC, authenticated: authenticated,
            limit: limit)
    }

    /// The stored sections are copied once into a reply of the right size and their TTLs patched in place (one
    /// allocation per reply). Without DNSSEC records, each section's prefix without them is copied instead
    /// (``EncodedSections`` stores them last).
    private static func direct(
        to query: StubQuery, code: Code, parts: [AnswerPart], opt: [UInt8], includeDNSSEC: Bool, authenticated: Bool,
        limit: Int
    )
        -> (bytes: [UInt8], truncated: Bool)
    {
        var answerBytes = 0
        var authorityBytes = 0
        var answerCount = 0
        var authorityCount = 0
        // The parts are read in place, by index: `for part in parts` copied each part's four arrays (a reference
        // count each, three loops over them) for a reply that reads them once (BENCHMARKS.md, round 24).
        for index in parts.indices {
            answerBytes += includeDNSSEC ? parts[index].sections.answer.count : parts[index].sections.answerPlainBytes
            authorityBytes +=
                includeDNSSEC ? parts[index].sections.authority.count : parts[index].sections.authorityPlainBytes
            answerCount += Int(includeDNSSEC ? parts[index].sections.answerCount : parts[index].sections.answerPlainCount)
            authorityCount += Int(
                includeDNSSEC ? parts[index].sections.authorityCount : parts[index].sections.authorityPlainCount)
        }
        let head = 12 + query.questionWire.count
        let truncated = head + answerBytes + authorityBytes + opt.count > limit
        if truncated {
            answerCount = 0
            authorityCount = 0
        }
        var out: [UInt8] = []
        out.reserveCapacity(head + (truncated ? 0 : answerBytes + authorityBytes) + opt.count)
        header(
            into: &out, id: query.id, rd: query.recursionDesired, cd: query.checkingDisabled, tc: truncated,
            ad: authenticated, rcode: UInt8(code.rawValue & 0x0F), qd: 1, an: answerCount, ns: authorityCount, ar: opt.isEmpty ? 0 : 1)
        out.append(contentsOf: query.questionWire)
        if !truncated {
            for index in parts.indices {
                append(
                    parts[index].sections.answer, parts[index].sections.answerTTLOffsets,
                    keeping: includeDNSSEC
                        ? nil : (parts[index].sections.answerPlainBytes, Int(parts[index].sections.answerPlainCount)),
                    ttl: parts[index].ttl, to: &out)
            }
            for index in parts.indices {
                append(
                    parts[index].sections.authority, parts[index].sections.authorityTTLOffsets,
                    keeping: includeDNSSEC
                        ? nil
                        : (parts[index].sections.authorityPlainBytes, Int(parts[index].sections.authorityPlainCount)),
                    ttl: parts[index].ttl, to: &out)
            }
        }
        out.append(contentsOf: opt)
        return (out, truncated)
    }

    /// REFUSED with the header and the question only (no OPT, no EDE): what a client outside `[stub] allow` gets. It
    /// is never larger than the query, which held at least the same header and question.
    public static func bareRefusal(to query: StubQuery) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(12 + query.questionWire.count)
        header(into: &out, id: query.id, rd: query.recursionDesired, cd: query.checkingDisabled, tc: false, rcode: 5,
            qd: 1, an: 0, ns: 0, ar: 0)
        out.append(contentsOf: query.questionWire)
        return out
    }

    /// FORMERR or NOTIMP to a message that is not a usable query: the header, and the question when known.
    public static func problem(_ problem: StubQueryProblem) -> [UInt8]? {
        var out: [UInt8] = []
        switch problem {
        case .ignore:
            return nil
        case .formatError(let id, let rd, let question, _):
            header(into: &out, id: id, rd: rd, cd: false, tc: false, rcode: 1, qd: question == nil ? 0 : 1, an: 0,
                ns: 0, ar: 0)
            if let question { out.append(contentsOf: question) }
        case .notImplemented(let id, let rd, _):
            header(into: &out, id: id, rd: rd, cd: false, tc: false, rcode: 4, qd: 0, an: 0, ns: 0, ar: 0)
        }
        return out
    }

    private static func header(
        into out: inout [UInt8], id: UInt16, rd: Bool, cd: Bool, tc: Bool, ad: Bool = false, rcode: UInt8, qd: Int,
        an: Int, ns: Int, ar: Int
    ) {
        // QR and RA set; AA never (the data is forwarded, not ours: RFC 1035 §4.1.1); AD only for an answer
        // validated secure, to a client that set DO or AD (RFC 6840 §5.7).
        var flags: UInt16 = 0x8000 | 0x0080
        if ad { flags |= 0x0020 }
        if rd { flags |= 0x0100 }
        if tc { flags |= 0x0200 }
        if cd { flags |= 0x0010 }
        flags |= UInt16(rcode & 0x0F)
        let (an, ns) = (UInt16(clamping: an), UInt16(clamping: ns))
        let bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (
            UInt8(id >> 8), UInt8(id & 0xFF), UInt8(flags >> 8), UInt8(flags & 0xFF), UInt8(qd >> 8), UInt8(qd & 0xFF),
            UInt8(an >> 8), UInt8(an & 0xFF), UInt8(ns >> 8), UInt8(ns & 0xFF), UInt8(ar >> 8), UInt8(ar & 0xFF)
        )
        withUnsafeBytes(of: bytes) { out.append(contentsOf: $0) }
    }

    /// Copies one stored section, or with `keeping` only its first bytes and records (those before its DNSSEC
    /// records), with every TTL set to `ttl`.
    private static func append(
        _ bytes: [UInt8], _ ttlOffsets: [Int], keeping prefix: (bytes: Int, records: Int)?, ttl: UInt32,
        to out: inout [UInt8]
    ) {
        let base = out.count
        out.append(contentsOf: bytes[0..<(prefix?.bytes ?? bytes.count)])
        for offset in ttlOffsets[0..<(prefix?.records ?? ttlOffsets.count)] { writeTTL(ttl, into: &out, at: base + offset) }
    }

    private static func writeTTL(_ ttl: UInt32, into out: inout [UInt8], at offset: Int) {
        out[offset] = UInt8(truncatingIfNeeded: ttl >> 24)
        out[offset + 1] = UInt8(truncatingIfNeeded: ttl >> 16)
        out[offset + 2] = UInt8(truncatingIfNeeded: ttl >> 8)
        out[offset + 3] = UInt8(truncatingIfNeeded: ttl)
    }

    /// An EDE's EXTRA-TEXT as sent: at most 400 bytes, a longer one cut before a character rather than inside one
    /// and ended in "…", so that the client always gets valid UTF-8 (RFC 8914 §2) and knows the text goes on.
    static func extraText(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        guard let end = UTF8Cut.end(of: bytes, limit: 400) else { return bytes }
        return Array(bytes[..<end]) + UTF8Cut.ellipsis
    }

    /// Our OPT record (RFC 6891 §6.1.2): payload 1232, the upper rcode bits, version 0, DO copied (RFC 3225 §3),
    /// and an EDE option when there is one. The client's options are not echoed.
    static func optRecord(code: Code, dnssecOK: Bool, error ede: ExtendedDNSError?) -> [UInt8] {
        let text = ede.map { extraText($0.text) }
        let options = text.map { 6 + $0.count } ?? 0
        return [UInt8](unsafeUninitializedCapacity: 11 + options) { out, count in
            // Owner root, TYPE 41, CLASS = our payload size, TTL = extended RCODE, version 0, DO, zero.
            let fixed: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (
                0, 0, 41, UInt8(ourPayloadSize >> 8), UInt8(ourPayloadSize & 0xFF), UInt8(code.rawValue >> 4), 0,
                dnssecOK ? 0x80 : 0, 0, UInt8(options >> 8), UInt8(options & 0xFF)
            )
            withUnsafeBytes(of: fixed) { bytes in
                for index in 0..<11 { out[index] = bytes[index] }
            }
            count = 11
            if let ede, let text {
                let length = 2 + text.count
                for byte in [0, 15, UInt8(length >> 8), UInt8(length & 0xFF), UInt8(ede.code >> 8), UInt8(ede.code & 0xFF)] + text {
                    out[count] = byte
                    count += 1
                }
            }
        }
    }
}
