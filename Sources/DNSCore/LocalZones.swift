/// Which names are answered by mDNS instead of unicast DNS (RFC 6762 §3, §4, §22): `local.` and the reverse
/// zones of IPv4 (169.254/16) and IPv6 (fe80::/10) link-local addresses.
public enum LocalZones {
    /// `local.` and the reverse zones of IPv4 and IPv6 link-local addresses.
    static let suffixes: [[[UInt8]]] = [
        ["local"], ["254", "169", "in-addr", "arpa"], ["8", "e", "f", "ip6", "arpa"], ["9", "e", "f", "ip6", "arpa"],
        ["a", "e", "f", "ip6", "arpa"], ["b", "e", "f", "ip6", "arpa"],
    ].map { $0.map { Array($0.utf8) } }

    /// Whether the presentation name `text` belongs to mDNS; false for text that is not a valid name.
    public static func isLocal(_ text: String) -> Bool {
        guard let name = try? DNSName(text) else { return false }
        return isLocal(name)
    }

    /// A cheap test on the presentation text before ``isLocal(_:)``: false means certainly not local.
    public static func mayBeLocal(_ text: String) -> Bool {
        func check(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            // The byte before the final dot rules out nearly every name before a suffix is compared.
            guard bytes.count >= 6 else { return false }
            switch bytes[bytes.count - 2] {
            case UInt8(ascii: "l"): return endsWith(bytes, "local.")
            case UInt8(ascii: "a"): return endsWith(bytes, ".arpa.")
            default: return false
            }
        }
        if let result = text.utf8.withContiguousStorageIfAvailable(check) { return result }
        return Array(text.utf8).withUnsafeBufferPointer(check)
    }

    /// Whether `text` (absolute) ends in `.arpa.`: a reverse name, maybe of a host on our link.
    public static func isReverseZone(_ text: String) -> Bool {
        if let result = text.utf8.withContiguousStorageIfAvailable({ endsWith($0, ".arpa.") }) { return result }
        return Array(text.utf8).withUnsafeBufferPointer { endsWith($0, ".arpa.") }
    }

    /// `hasSuffix` for an ASCII suffix, byte by byte (it runs for every stub query; `String.hasSuffix` compares
    /// by Unicode rules, ~100 instructions a call).
    static func endsWith(_ bytes: UnsafeBufferPointer<UInt8>, _ suffix: StaticString) -> Bool {
        let count = suffix.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        let start = bytes.count - count
        let tail = suffix.utf8Start
        for offset in 0..<count where bytes[start + offset] != tail[offset] { return false }
        return true
    }

    /// Whether `name` belongs to mDNS and must never go to a unicast upstream. This is the one definition: the
    /// DNS stub, the discovery proxy and wide-area DNS-SD (`WideAreaDomain.isUnicast`) all ask it.
    public static func isLocal(_ name: DNSName) -> Bool {
        let labels = name.labels
        for suffix in suffixes where labels.count >= suffix.count {
            if Array(labels.suffix(suffix.count)) == suffix { return true }
        }
        return false
    }

    /// The address a reverse name stands for: `4.3.2.1.in-addr.arpa.` -> 1.2.3.4, the 32 nibbles of an
    /// `ip6.arpa.` name -> 16 bytes (RFC 1035 §3.5, RFC 3596 §2.5); nil for anything else.
    public static func reverseAddress(_ name: DNSName) -> [UInt8]? {
        let labels = name.labels.map { String(decoding: $0, as: UTF8.self) }
        if labels.count == 6, labels[4] == "in-addr", labels[5] == "arpa" {
            var bytes: [UInt8] = []
            for label in labels[0..<4].reversed() {
                guard let value = UInt8(label), String(value) == label else { return nil }
                bytes.append(value)
            }
            return bytes
        }
        if labels.count == 34, labels[32] == "ip6", labels[33] == "arpa" {
            var nibbles: [UInt8] = []
            for label in labels[0..<32].reversed() {
                guard label.count == 1, let value = UInt8(label, radix: 16) else { return nil }
                nibbles.append(value)
            }
            return stride(from: 0, to: 32, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
        }
        return nil
    }
}
