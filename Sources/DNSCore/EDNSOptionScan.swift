/// Finds one EDNS(0) option (RFC 6891 §6.1.2) in a message in wire format, without parsing the rest of it.
public enum EDNSOptionScan {
    /// An option found in the OPT record.
    public struct Found: Equatable, Sendable {
        /// The option's data.
        public var value: [UInt8]
        /// The UDP payload size of the OPT record.
        public var payloadSize: Int
    }

    /// The first option `code` of the OPT record of `bytes`; nil when the message has none, or is cut short or
    /// malformed on the way to it. Never traps, whatever `bytes` holds.
    public static func find(_ code: UInt16, in bytes: [UInt8]) -> Found? {
        locate(code, in: bytes).map { Found(value: Array(bytes[$0.value]), payloadSize: $0.payloadSize) }
    }

    /// Where ``find(_:in:)``'s option data lies in `bytes`, without copying it (a DoT reply's keepalive is read
    /// this way on every reply).
    public static func locate(_ code: UInt16, in bytes: [UInt8]) -> (value: Range<Int>, payloadSize: Int)? {
        func u16(_ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
        var found: (value: Range<Int>, payloadSize: Int)?
        _ = walkRecords(bytes) { record in
            guard record.isAdditional, u16(record.fixed) == 41 else { return true }
            let rdata = record.fixed + 10
            let end = rdata + u16(record.fixed + 8)
            var option = rdata
            while option + 4 <= end {
                let size = u16(option + 2)
                guard option + 4 + size <= end else { return false }
                if u16(option) == Int(code) {
                    found = ((option + 4)..<(option + 4 + size), u16(record.fixed + 2))
                    return false
                }
                option += 4 + size
            }
            return false
        }
        return found
    }

    /// One reason `bytes` must not reach `ldns_wire2pkt` (the Resolver's `LDNSWire.refusal` checks it, and the
    /// other): a second OPT record (RFC 6891 §6.1.1) or a second TSIG record (RFC 8945 §5.1: one, the last), among
    /// the records that lie wholly inside `bytes`; nil otherwise. ldns 1.8.3
    /// keeps only the last of each and leaks the ones before it (found by the fuzzer: about 100 bytes a message), so
    /// an upstream or a server answering an UPDATE could make the daemon grow with every reply.
    public static func repeatedOPTOrTSIG(in bytes: [UInt8]) -> String? {
        var (opt, tsig) = (0, 0)
        _ = walkRecords(bytes) { record in
            guard record.isAdditional else { return true }
            switch Int(bytes[record.fixed]) << 8 | Int(bytes[record.fixed + 1]) {
            case 41: opt += 1
            case 250: tsig += 1
            default: break
            }
            return true
        }
        if opt > 1 { return "\(opt) OPT records (RFC 6891 allows one)" }
        if tsig > 1 { return "\(tsig) TSIG records (RFC 8945 allows one)" }
        return nil
    }

    /// Where one resource record of a message stands.
    public struct Record {
        /// Where its owner name starts, and where its fixed part (type, class, TTL, RDLENGTH) starts.
        public var start: Int
        public var fixed: Int
        /// Whether it is in the additional section.
        public var isAdditional: Bool
    }

    /// Calls `body` for each resource record after the question section, in order, until it returns false.
    /// Returns the offset after the last record, or nil when the message is cut short or malformed before
    /// `body` said stop (every record handed to `body` lies wholly inside `bytes`).
    public static func walkRecords(_ bytes: [UInt8], _ body: (Record) -> Bool) -> Int? {
        guard bytes.count >= 12 else { return nil }
        func u16(_ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
        let (qd, an, ns, ar) = (u16(4), u16(6), u16(8), u16(10))
        var at = 12
        for _ in 0..<qd {
            guard let afterName = skipName(bytes, at) else { return nil }
            at = afterName + 4
        }
        for index in 0..<(an + ns + ar) {
            guard let fixed = skipName(bytes, at), fixed + 10 <= bytes.count,
                fixed + 10 + u16(fixed + 8) <= bytes.count
            else { return nil }
            let record = Record(start: at, fixed: fixed, isAdditional: index >= an + ns)
            at = fixed + 10 + u16(fixed + 8)
            if !body(record) { return at }
        }
        return at
    }

    /// The offset right after the name at `start` (a compression pointer ends it), or nil when it runs off the end.
    private static func skipName(_ bytes: [UInt8], _ start: Int) -> Int? {
        var at = start
        while at < bytes.count {
            let length = Int(bytes[at])
            if length == 0 { return at + 1 }
            if length & 0xC0 == 0xC0 { return at + 2 <= bytes.count ? at + 2 : nil }
            guard length & 0xC0 == 0 else { return nil }
            at += 1 + length
        }
        return nil
    }
}
