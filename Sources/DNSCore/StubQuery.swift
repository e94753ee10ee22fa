
/// A DNS query as the stub received it, checked as far as answering it needs (RFC 1035 §4.1, RFC 6891 §6).
///
/// The question is kept byte for byte (`questionWire`) so the reply echoes it exactly, case included
/// (resolvers that randomise case, draft-vixie-dnsext-dns0x20, check it).
public struct StubQuery: Sendable, Hashable {
    /// The message ID.
    public var id: UInt16
    /// Recursion desired: copied into the reply.
    public var recursionDesired: Bool
    /// Checking disabled (RFC 4035 §3.2.2): copied into the reply.
    public var checkingDisabled: Bool
    /// QNAME, QTYPE and QCLASS as received.
    public var questionWire: [UInt8]
    /// QNAME lowercased and absolute, in presentation format (the cache key's spelling).
    public var nameText: String
    public var type: RRType
    public var `class`: RRClass
    /// The client's OPT record, when it sent one.
    public var edns: EDNSRequest?
    /// Authentic data (RFC 6840 §5.7): a client that sets it in a query understands AD in the reply.
    public var authenticData: Bool = false
}

/// What a query's OPT record asked for (RFC 6891 §6.1.3). Options are checked for form and otherwise ignored.
public struct EDNSRequest: Sendable, Hashable {
    /// The requestor's UDP payload size; values below 512 count as 512 (RFC 6891 §6.2.3).
    public var udpPayloadSize: UInt16
    public var version: UInt8
    /// The DO bit (RFC 3225).
    public var dnssecOK: Bool
}

/// Why a message gets no ordinary answer.
public enum StubQueryProblem: Error, Sendable, Hashable {
    /// Not even a header, or a response (QR set): nothing is sent back (a reply to a reply could loop).
    case ignore
    /// Malformed: FORMERR with this header's ID (RFC 1035 §4.1.1), and the question when it could be read.
    case formatError(id: UInt16, recursionDesired: Bool, question: [UInt8]?, reason: String)
    /// An opcode other than QUERY: NOTIMP.
    case notImplemented(id: UInt16, recursionDesired: Bool, opcode: UInt8)
}

extension StubQuery {
    /// Parses a query message.
    /// - Throws: ``StubQueryProblem`` saying how to answer a message that is not a usable query.
    public static func parse(_ bytes: [UInt8]) throws(StubQueryProblem) -> StubQuery {
        guard bytes.count >= 12 else { throw .ignore }
        let id = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let flags = UInt16(bytes[2]) << 8 | UInt16(bytes[3])
        guard flags & 0x8000 == 0 else { throw .ignore }
        let rd = flags & 0x0100 != 0
        let opcode = UInt8(flags >> 11 & 0x0F)
        func count(_ offset: Int) -> Int { Int(bytes[offset]) << 8 | Int(bytes[offset + 1]) }
        let (qd, an, ns, ar) = (count(4), count(6), count(8), count(10))
        guard opcode == 0 else { throw .notImplemented(id: id, recursionDesired: rd, opcode: opcode) }
        func formErr(_ reason: String, _ question: [UInt8]? = nil) -> StubQueryProblem {
            .formatError(id: id, recursionDesired: rd, question: question, reason: reason)
        }
        guard qd == 1 else { throw formErr("QDCOUNT is \(qd), not 1") }
        let nameText: String
        var offset: Int
        if let (text, end) = Self.plainName(bytes, at: 12) {
            (nameText, offset) = (text, end)
        } else {
            do {
                let (name, end) = try DNSName.read(wire: bytes, at: 12)
                (nameText, offset) = (name.text, end)
            } catch {
                throw formErr("question name: \(error)")
            }
        }
        guard offset + 4 <= bytes.count else { throw formErr("question cut short") }
        let type = RRType(UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1]))
        let rrClass = RRClass(UInt16(bytes[offset + 2]) << 8 | UInt16(bytes[offset + 3]))
        offset += 4
        let question = Array(bytes[12..<offset])

        var reader = RecordSkipper(bytes: bytes, offset: offset)
        var edns: EDNSRequest?
        do throws(RecordSkipper.Malformed) {
            for _ in 0..<(an + ns) { _ = try reader.next() }
            for _ in 0..<ar {
                let record = try reader.next()
                guard record.type == RRType.opt.rawValue else { continue }
                // RFC 6891 §6.1.1: one OPT, owned by the root.
                guard edns == nil else { throw RecordSkipper.Malformed(reason: "more than one OPT record") }
                guard record.rootOwner else { throw RecordSkipper.Malformed(reason: "OPT owner is not the root") }
                try RecordSkipper.checkOptions(bytes, record.rdata)
                edns = EDNSRequest(
                    udpPayloadSize: max(512, record.rrClass), version: UInt8(truncatingIfNeeded: record.ttl >> 16),
                    dnssecOK: record.ttl & 0x8000 != 0)
            }
        } catch {
            throw formErr(error.reason, question)
        }
        return StubQuery(
            id: id, recursionDesired: rd, checkingDisabled: flags & 0x0010 != 0, questionWire: question,
            nameText: nameText, type: type, class: rrClass, edns: edns, authenticData: flags & 0x0020 != 0)
    }

    /// QNAME as a ``DNSName`` (labels), parsed again from the question: only the slow paths need it.
    public var name: DNSName {
        (try? DNSName.read(wire: questionWire, at: 0).name) ?? .root
    }

    /// The hot path's name decoding: a name of letters, digits, `-` and `_` only (nearly every query) becomes its
    /// lowercased presentation text in one allocation; anything else (escapes, compression, bad lengths) returns
    /// nil and goes through ``DNSName``, which also validates.
    static func plainName(_ bytes: [UInt8], at start: Int) -> (String, Int)? {
        var index = start
        var length = 0
        while true {
            guard index < bytes.count else { return nil }
            let label = Int(bytes[index])
            if label == 0 { break }
            guard label <= 63, index + 1 + label < bytes.count else { return nil }
            for offset in (index + 1)...(index + label) {
                let byte = bytes[offset]
                let plain = (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A)
                    || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
                guard plain else { return nil }
            }
            length += label + 1
            guard length < 255 else { return nil }
            index += 1 + label
        }
        let end = index + 1
        if length == 0 { return (".", end) }
        let text = String(unsafeUninitializedCapacity: length) { buffer in
            var out = 0
            var at = start
            while bytes[at] != 0 {
                let label = Int(bytes[at])
                for offset in (at + 1)...(at + label) {
                    let byte = bytes[offset]
                    buffer[out] = byte >= 0x41 && byte <= 0x5A ? byte + 32 : byte
                    out += 1
                }
                buffer[out] = UInt8(ascii: ".")
                out += 1
                at += 1 + label
            }
            return out
        }
        return (text, end)
    }
}

/// Walks resource records without decoding them: owner (compression pointers end a name), fixed fields, RDATA.
struct RecordSkipper {
    struct Malformed: Error { var reason: String }
    struct Record {
        var rootOwner: Bool
        var type: UInt16
        var rrClass: UInt16
        var ttl: UInt32
        var rdata: Range<Int>
    }

    let bytes: [UInt8]
    var offset: Int

    mutating func next() throws(Malformed) -> Record {
        let start = offset
        // Owner name: labels until the root or a pointer. Pointers are not followed: skipping needs only their
        // two bytes, so a pointer loop cannot trap us.
        var length = 0
        while true {
            guard offset < bytes.count else { throw Malformed(reason: "record owner cut short") }
            let label = Int(bytes[offset])
            if label == 0 {
                offset += 1
                break
            }
            if label & 0xC0 == 0xC0 {
                guard offset + 2 <= bytes.count else { throw Malformed(reason: "compression pointer cut short") }
                offset += 2
                break
            }
            guard label & 0xC0 == 0 else { throw Malformed(reason: "extended label type") }
            length += label + 1
            guard length < 255 else { throw Malformed(reason: "owner name over 255 octets") }
            offset += 1 + label
        }
        let rootOwner = offset == start + 1
        guard offset + 10 <= bytes.count else { throw Malformed(reason: "record header cut short") }
        func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1]) }
        let type = u16(offset)
        let rrClass = u16(offset + 2)
        let ttl = UInt32(u16(offset + 4)) << 16 | UInt32(u16(offset + 6))
        let rdlength = Int(u16(offset + 8))
        offset += 10
        guard offset + rdlength <= bytes.count else { throw Malformed(reason: "RDATA runs past the message") }
        let rdata = offset..<offset + rdlength
        offset += rdlength
        return Record(rootOwner: rootOwner, type: type, rrClass: rrClass, ttl: ttl, rdata: rdata)
    }

    /// RFC 6891 §6.1.2: OPT RDATA is a sequence of {code, length, data}; unknown codes are ignored, but the
    /// lengths must add up.
    static func checkOptions(_ bytes: [UInt8], _ range: Range<Int>) throws(Malformed) {
        var at = range.lowerBound
        while at < range.upperBound {
            guard at + 4 <= range.upperBound else { throw Malformed(reason: "EDNS option header cut short") }
            let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            at += 4 + length
            guard at <= range.upperBound else { throw Malformed(reason: "EDNS option runs past the OPT record") }
        }
    }
}
