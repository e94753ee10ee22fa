import DNSCore

/// EDNS(0) options added to queries sent over an encrypted transport: TCP keepalive (RFC 7828) and padding
/// (RFC 7830) to a multiple of 128 bytes, the block-length policy RFC 8467 §4.1 recommends for queries.
enum EDNSPadding {
    /// RFC 8467 §4.1: pad queries to the closest multiple of 128 octets.
    static let queryBlock = 128
    static let keepaliveCode: UInt16 = 11
    static let paddingCode: UInt16 = 12

    /// Returns `wire` with an empty edns-tcp-keepalive option (when `keepalive`) and a padding option appended to
    /// its OPT record, so that the whole message is a multiple of `block` bytes.
    ///
    /// The query must be as `DNSQuery.make` builds it: one question, and the OPT record as the only additional
    /// record, last in the message. Anything else is returned unchanged (nil), so a caller can refuse to send it.
    ///
    /// - Parameters:
    ///   - wire: the query without a TCP length prefix.
    ///   - id: the message ID to write into the copy; nil keeps the one `wire` has.
    ///   - questionLength: the wire length of the question (name, type, class).
    static func pad(
        _ wire: [UInt8], id: UInt16? = nil, questionLength: Int, keepalive: Bool, block: Int = queryBlock
    ) -> [UInt8]? {
        let optStart = 12 + questionLength
        // OPT: root name (1), type 41 (2), UDP size (2), extended rcode and flags (4), RDLENGTH (2), options.
        guard wire.count >= optStart + 11, wire[4] == 0, wire[5] == 1, wire[6] == 0, wire[7] == 0, wire[8] == 0,
            wire[9] == 0, wire[10] == 0, wire[11] == 1, wire[optStart] == 0, wire[optStart + 1] == 0,
            wire[optStart + 2] == 41
        else { return nil }
        let rdLengthAt = optStart + 9
        let rdLength = Int(wire[rdLengthAt]) << 8 | Int(wire[rdLengthAt + 1])
        guard wire.count == optStart + 11 + rdLength else { return nil }
        // The final size is known first: one allocation, no array for the option values.
        let keepaliveLength = keepalive ? 4 : 0
        let unpadded = wire.count + keepaliveLength + 4
        let fill = (block - unpadded % block) % block
        let newLength = rdLength + keepaliveLength + 4 + fill
        guard newLength <= Int(UInt16.max) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(unpadded + fill)
        out.append(contentsOf: wire)
        if keepalive { appendOptionHeader(&out, code: keepaliveCode, length: 0) }
        appendOptionHeader(&out, code: paddingCode, length: fill)
        out.appendZeroes(fill)
        out[rdLengthAt] = UInt8(newLength >> 8)
        out[rdLengthAt + 1] = UInt8(newLength & 0xFF)
        if let id {
            out[0] = UInt8(id >> 8)
            out[1] = UInt8(id & 0xFF)
        }
        return out
    }

    private static func appendOptionHeader(_ out: inout [UInt8], code: UInt16, length: Int) {
        out.append(UInt8(code >> 8))
        out.append(UInt8(code & 0xFF))
        out.append(UInt8(length >> 8))
        out.append(UInt8(length & 0xFF))
    }
}

extension EDNSPadding {
    /// The TIMEOUT of the edns-tcp-keepalive option of a reply (RFC 7828 §3.1: units of 100 ms), if it has one.
    static func keepaliveTimeout(in reply: [UInt8]) -> UInt16? {
        guard let found = EDNSOptionScan.locate(keepaliveCode, in: reply), found.value.count == 2 else { return nil }
        return UInt16(reply[found.value.lowerBound]) << 8 | UInt16(reply[found.value.lowerBound + 1])
    }
}
