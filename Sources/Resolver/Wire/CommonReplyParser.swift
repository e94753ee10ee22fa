import DNSCore

/// A parser in Swift for the replies a resolver gets nearly always: one question and records of the types whose
/// RDATA layout is fixed by RFC 1035 and RFC 3596 (A, AAAA, NS, CNAME, SOA, PTR, MX, TXT, DNAME) and one OPT.
///
/// It is the fast path of ``DNSMessage/parse(_:)``: ldns built every message into C structures and the Resolver
/// copied them out again, about 28 000 instructions of a cache miss's 316 000 (BENCHMARKS.md, "What a miss over
/// DoT costs"). This reads the bytes once. It accepts only what it understands completely and returns nil for
/// everything else (another record type, a second question or OPT, an OPT outside the additional section, a
/// forward or looping compression pointer, a name over 255 octets, bytes left over, anything short or malformed),
/// and ldns then decides as before. So it never accepts what ldns rejects, and where it accepts it gives what ldns
/// gives (owner names lowercased as ``DNSName/text`` writes them, names inside RDATA expanded with their case
/// kept): `CommonReplyParserTests` compares the two on a corpus and on 30 000 mutated messages, and the SVCB
/// fuzzer on every input it accepts.
enum CommonReplyParser {
    /// - Parameter knownQuestionName: the question's name as ``DNSName/text`` writes it and its wire length, when
    ///   the caller has checked the bytes at offset 12 against it (``PendingQuery``'s own question, echoed): used as
    ///   it is, not decoded again.
    static func parse(
        _ bytes: [UInt8], header: DNSHeader, knownQuestionName: (text: String, wireLength: Int)? = nil
    ) -> DNSMessage? {
        guard header.questionCount == 1 else { return nil }
        return bytes.withUnsafeBufferPointer { buffer -> DNSMessage? in
            var reader = Reader(bytes: buffer, position: 12)
            if let knownQuestionName, 12 + knownQuestionName.wireLength <= buffer.count {
                reader.take(knownQuestionName.text, wireLength: knownQuestionName.wireLength)
            }
            guard let questionName = reader.ownerText(),
                let questionType = reader.uint16(), let questionClass = reader.uint16()
            else { return nil }
            var edns: EDNSInfo?
            var extendedRCode: UInt8 = 0
            var sections: [[ResourceRecord]] = [[], [], []]
            for section in 0..<3 {
                let count = Int(section == 0 ? header.answerCount : section == 1 ? header.authorityCount : header.additionalCount)
                for _ in 0..<count {
                    let ownerStart = reader.position
                    guard let name = reader.ownerText(), let type = reader.uint16(), let rrClass = reader.uint16(),
                        let ttl = reader.uint32(), let length = reader.uint16(),
                        reader.position + Int(length) <= buffer.count
                    else { return nil }
                    let end = reader.position + Int(length)
                    if type == RRType.opt.rawValue {
                        // Moved into `edns` as ldns does, and only in the simple case: one OPT, in the additional
                        // section, owned by the root, with a payload size (ldns's "has EDNS" test looks at it).
                        guard section == 2, edns == nil, buffer[ownerStart] == 0, rrClass > 0 else { return nil }
                        edns = EDNSInfo(
                            udpPayloadSize: rrClass, version: UInt8(truncatingIfNeeded: ttl >> 16),
                            dnssecOK: ttl & 0x8000 != 0,
                            options: UnsafeBufferPointer(rebasing: buffer[reader.position..<end]))
                        extendedRCode = UInt8(truncatingIfNeeded: ttl >> 24)
                        reader.position = end
                        continue
                    }
                    guard let rdata = reader.rdata(type: type, end: end) else { return nil }
                    // Room for the section at its first record (an additional section of only the OPT needs none).
                    if sections[section].isEmpty { sections[section].reserveCapacity(count) }
                    sections[section].append(
                        ResourceRecord(
                            normalizedName: name, type: RRType(type), class: RRClass(rrClass), ttl: ttl, rdata: rdata))
                }
            }
            guard reader.position == buffer.count else { return nil }
            var rcode = UInt16(header.rcode)
            rcode |= UInt16(extendedRCode) << 4
            return DNSMessage(
                header: header, rcode: RCode(rcode),
                questions: [
                    DNSQuestion(
                        normalizedName: questionName, type: RRType(questionType), class: RRClass(questionClass))
                ],
                answer: sections[0], authority: sections[1], additional: sections[2], edns: edns)
        }
    }

    /// A cursor over one message.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var position: Int
        /// The last owner name read (or the one the caller knows, ``take(_:wireLength:)``): where it starts, its
        /// text and wire length. An owner that is only a pointer to it (an answer's owner pointing at the question,
        /// nearly always) is that very string, not decoded and allocated again.
        private var lastName: (start: Int, text: String, wireLength: Int)?

        init(bytes: UnsafeBufferPointer<UInt8>, position: Int) {
            self.bytes = bytes
            self.position = position
        }

        mutating func uint16() -> UInt16? {
            guard position + 2 <= bytes.count else { return nil }
            defer { position += 2 }
            return UInt16(bytes[position]) << 8 | UInt16(bytes[position + 1])
        }

        mutating func uint32() -> UInt32? {
            guard let high = uint16(), let low = uint16() else { return nil }
            return UInt32(high) << 16 | UInt32(low)
        }

        /// Follows a name at `position` (compression pointers only backwards, RFC 1035 §4.1.4), calling `label`
        /// with each label's offset and length in `bytes`; moves `position` past the name. False for anything
        /// else (extended label types, a pointer forward or to itself, a name over 255 octets, a name cut short).
        private mutating func walkName(_ label: (Int, Int) -> Void) -> Bool {
            var cursor = position
            var resume: Int?
            var wireLength = 1
            // Every pointer goes strictly backwards, so the walk ends; the bound is for the reader's peace of mind.
            var limit = position
            while true {
                guard cursor < bytes.count else { return false }
                let length = Int(bytes[cursor])
                if length == 0 {
                    position = resume ?? cursor + 1
                    return true
                }
                if length & 0xC0 == 0xC0 {
                    guard cursor + 1 < bytes.count else { return false }
                    let target = (length & 0x3F) << 8 | Int(bytes[cursor + 1])
                    guard target < limit, target >= 12 else { return false }
                    if resume == nil { resume = cursor + 2 }
                    limit = target
                    cursor = target
                    continue
                }
                guard length <= DNSName.maximumLabelLength, cursor + 1 + length <= bytes.count else { return false }
                wireLength += length + 1
                guard wireLength <= DNSName.maximumWireLength else { return false }
                label(cursor + 1, length)
                cursor += 1 + length
            }
        }

        /// The name at `position`, known to be `text` (``parse(_:header:knownQuestionName:)``): the next
        /// ``ownerText()`` returns it without decoding, and so does every owner that points at it.
        mutating func take(_ text: String, wireLength: Int) {
            lastName = (position, text, wireLength)
        }

        /// An owner name as ``DNSName/text`` writes it: lowercased, escaped, absolute.
        mutating func ownerText() -> String? {
            // Measured in one walk, written in a second straight into the string's storage: one allocation for
            // the name (none up to 15 bytes) instead of a byte array grown and then copied.
            let bytes = self.bytes
            let start = position
            // The known name itself (names are read in order, so only a taken one can start here).
            if let lastName, lastName.start == start {
                position = start + lastName.wireLength
                return lastName.text
            }
            // A pointer to the last name read (backwards, so as walkName would follow it): the same text.
            if let lastName, start + 1 < bytes.count, bytes[start] & 0xC0 == 0xC0,
                (Int(bytes[start] & 0x3F) << 8 | Int(bytes[start + 1])) == lastName.start
            {
                position = start + 2
                return lastName.text
            }
            var count = 0
            let ok = walkName { labelStart, length in
                for offset in labelStart..<(labelStart + length) { count += DNSName.canonicalLength(bytes[offset]) }
                count += 1
            }
            guard ok else { return nil }
            if count == 0 { return "." }
            let end = position
            position = start
            let text = String(unsafeUninitializedCapacity: count) { out in
                var index = 0
                _ = walkName { labelStart, length in
                    for offset in labelStart..<(labelStart + length) {
                        index = DNSName.writeCanonical(bytes[offset], to: out, at: index)
                    }
                    out[index] = UInt8(ascii: ".")
                    index += 1
                }
                return index
            }
            position = end
            lastName = (start, text, end - start)
            return text
        }

        /// A name inside RDATA, expanded, its case kept, appended to `out`.
        private mutating func expandedName(into out: inout [UInt8]) -> Bool {
            let bytes = self.bytes
            let ok = walkName { start, length in
                out.append(UInt8(length))
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<(start + length)]))
            }
            if ok { out.append(0) }
            return ok
        }

        /// The RDATA of a record of `type` ending at `end`, uncompressed; nil for a type this parser leaves to
        /// ldns or RDATA that does not fill its length exactly.
        mutating func rdata(type: UInt16, end: Int) -> [UInt8]? {
            let start = position
            var out: [UInt8] = []
            switch type {
            case 1, 28:  // A, AAAA
                guard end - start == (type == 1 ? 4 : 16) else { return nil }
                out = Array(UnsafeBufferPointer(rebasing: bytes[start..<end]))
                position = end
            case 2, 5, 12, 39:  // NS, CNAME, PTR, DNAME
                out.reserveCapacity(end - start + 16)
                guard expandedName(into: &out) else { return nil }
            case 15:  // MX: preference, exchange
                guard end - start >= 3 else { return nil }
                out.reserveCapacity(end - start + 16)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<(start + 2)]))
                position += 2
                guard expandedName(into: &out) else { return nil }
            case 6:  // SOA: mname, rname, five 32-bit numbers
                out.reserveCapacity(end - start + 32)
                guard expandedName(into: &out), expandedName(into: &out), position + 20 == end else { return nil }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[position..<end]))
                position = end
            case 16:  // TXT: one or more character-strings
                guard end > start else { return nil }
                var cursor = start
                while cursor < end { cursor += 1 + Int(bytes[cursor]) }
                guard cursor == end else { return nil }
                out = Array(UnsafeBufferPointer(rebasing: bytes[start..<end]))
                position = end
            default:
                return nil
            }
            return position == end ? out : nil
        }
    }
}
