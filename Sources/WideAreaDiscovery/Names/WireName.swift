import DNSCore
import Resolver

/// Wire-format names with labels as raw bytes, case kept.
enum WireName {
    static func encode(_ labels: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for label in labels {
            out.append(UInt8(truncatingIfNeeded: label.count))
            out.append(contentsOf: label)
        }
        out.append(0)
        return out
    }

    /// The labels of one uncompressed name filling `bytes` from `offset`; returns them and the offset after it.
    static func read(_ bytes: [UInt8], at offset: Int) throws(WideAreaError) -> (labels: [[UInt8]], next: Int) {
        var labels: [[UInt8]] = []
        var index = offset
        var total = 1
        while true {
            guard index < bytes.count else { throw malformed("name runs past the record") }
            let length = Int(bytes[index])
            if length == 0 { return (labels, index + 1) }
            guard length <= 63 else { throw malformed("compressed or extended label in record data") }
            guard index + 1 + length <= bytes.count else { throw malformed("label runs past the record") }
            total += 1 + length
            guard total <= 255 else { throw malformed("name longer than 255 octets") }
            labels.append(Array(bytes[(index + 1)..<(index + 1 + length)]))
            index += 1 + length
        }
    }

    /// The labels of rdata that is exactly one name (PTR).
    static func decode(_ bytes: [UInt8]) throws(WideAreaError) -> [[UInt8]] {
        let (labels, next) = try read(bytes, at: 0)
        guard next == bytes.count else { throw malformed("bytes after the name") }
        return labels
    }

    /// The lowercased absolute presentation text of `labels`, via ``DNSName`` so it matches the cache's keys.
    static func queryText(_ labels: [[UInt8]]) throws(WideAreaError) -> String {
        do {
            return try DNSName(wire: encode(labels)).text
        } catch {
            throw WideAreaError(.invalidParameter, "name is not a valid DNS name: \(error.message)")
        }
    }

    static func lowercased(_ label: [UInt8]) -> [UInt8] {
        label.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
    }

    private static func malformed(_ what: String) -> WideAreaError {
        WideAreaError(.lookupFailed, "malformed record data: \(what)")
    }
}
