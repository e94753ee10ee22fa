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
        guard bytes.count >= 12 else { return nil }
        func u16(_ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
        let (qd, an, ns, ar) = (u16(4), u16(6), u16(8), u16(10))
        guard ar > 0 else { return nil }
        var at = 12
        for _ in 0..<qd {
            guard let afterName = skipName(bytes, at) else { return nil }
            at = afterName + 4
        }
        for index in 0..<(an + ns + ar) {
            guard let end = skipName(bytes, at), end + 10 <= bytes.count else { return nil }
            let type = u16(end)
            let length = u16(end + 8)
            let rdata = end + 10
            guard rdata + length <= bytes.count else { return nil }
            if index >= an + ns, type == 41 {
                var option = rdata
                while option + 4 <= rdata + length {
                    let size = u16(option + 2)
                    guard option + 4 + size <= rdata + length else { return nil }
                    if u16(option) == Int(code) {
                        return Found(value: Array(bytes[(option + 4)..<(option + 4 + size)]), payloadSize: u16(end + 2))
                    }
                    option += 4 + size
                }
                return nil
            }
            at = rdata + length
        }
        return nil
    }

    /// The offset right after the name at `start` (a compression pointer ends it), or nil when it runs off the end.
    public static func skipName(_ bytes: [UInt8], _ start: Int) -> Int? {
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
