/// Names with the case of their labels kept: the one presentation parser, wire reader and writer, and canonical
/// text of the code base. ``DNSName`` (lowercased, for the resolver and the cache) is built on them; DNS-SD, whose
/// instance names are case-preserving (RFC 6763 §4.1.1), uses them directly: Avahi's record look-ups and the
/// wide-area registration and browse code read and write the same labels.
extension DNSName {
    /// How strict the presentation parser is about bytes that RFC 1035 §5.1 writes escaped.
    public enum Syntax: Sendable {
        /// Spaces, control characters and non-ASCII bytes must be escaped (`\032`, `\195\169`): names typed for
        /// the resolver, where IDNA is not applied and a raw space is a mistake.
        case strict
        /// Any such byte stands for itself: DNS-SD instance names arrive as UTF-8 with spaces ("My Printer").
        case liberal
    }

    /// The labels of a name in presentation format (RFC 1035 §5.1), case kept: `.` separates labels, `\X` is the
    /// byte X and `\DDD` the byte of that decimal value; a trailing dot is optional; `.` alone is the root (no labels).
    /// - Throws: `InvalidNameError` for an empty name or label, a bad escape, a label over 63 octets, a name over 255
    ///   octets in wire format, or (strict syntax) a byte that must be escaped.
    public static func parseLabels(_ text: String, syntax: Syntax = .strict) throws(InvalidNameError) -> [[UInt8]] {
        func fail(_ reason: String) -> InvalidNameError { InvalidNameError(name: text, reason: reason) }
        let bytes = Array(text.utf8)
        if bytes.isEmpty { throw fail("empty name") }
        if bytes == [UInt8(ascii: ".")] { return [] }
        var labels: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        var endedWithDot = false
        while index < bytes.count {
            let byte = bytes[index]
            endedWithDot = false
            if byte == UInt8(ascii: ".") {
                if current.isEmpty { throw fail("empty label") }
                labels.append(current)
                current = []
                endedWithDot = true
                index += 1
                continue
            }
            var octet = byte
            if byte == UInt8(ascii: "\\") {
                guard index + 1 < bytes.count else { throw fail("escape at end of name") }
                let next = bytes[index + 1]
                if isDecimalDigit(next) {
                    guard index + 3 < bytes.count, isDecimalDigit(bytes[index + 2]), isDecimalDigit(bytes[index + 3])
                    else { throw fail("\\DDD escape needs three digits") }
                    let value = Int(next - 48) * 100 + Int(bytes[index + 2] - 48) * 10 + Int(bytes[index + 3] - 48)
                    guard value <= 255 else { throw fail("\\DDD escape above 255") }
                    octet = UInt8(value)
                    index += 4
                } else {
                    if syntax == .strict, !(next >= 0x21 && next <= 0x7E) {
                        throw fail("escaped character must be printable")
                    }
                    octet = next
                    index += 2
                }
            } else {
                if syntax == .strict {
                    if byte >= 0x80 { throw fail("non-ASCII character; IDNA is not supported, use the xn-- form") }
                    if byte <= 0x20 || byte == 0x7F { throw fail("space or control character") }
                }
                index += 1
            }
            current.append(octet)
            if current.count > maximumLabelLength { throw fail("label longer than \(maximumLabelLength) octets") }
        }
        // The loop only leaves `current` empty after a dot, so a name without trailing dot has a label here.
        if !endedWithDot { labels.append(current) }
        let length = labels.reduce(1) { $0 + 1 + $1.count }
        if length > maximumWireLength { throw fail("name longer than \(maximumWireLength) octets in wire format") }
        return labels
    }

    /// `labels` in uncompressed wire format, ending with the root label.
    public static func wire(_ labels: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(labels.reduce(1) { $0 + 1 + $1.count })
        for label in labels {
            out.append(UInt8(truncatingIfNeeded: label.count))
            out.append(contentsOf: label)
        }
        out.append(0)
        return out
    }

    /// Reads an uncompressed wire-format name (RFC 1035 §3.1) at `offset`, case kept.
    /// - Parameter end: where the data the name must lie in ends (default: the end of `bytes`).
    /// - Returns: the labels and the offset just past the root label.
    /// - Throws: `DNSWireError` (`.truncated` or `.malformedMessage`) for a name that runs past `end`, uses
    ///   compression or extended label types, or exceeds 255 octets.
    public static func readLabels(_ bytes: [UInt8], at offset: Int, end: Int? = nil) throws(DNSWireError)
        -> (labels: [[UInt8]], next: Int)
    {
        var labels: [[UInt8]] = []
        let next = try walkUncompressed(bytes, at: offset, end: min(end ?? bytes.count, bytes.count)) { start, length in
            labels.append(Array(bytes[start..<start + length]))
        }
        return (labels, next)
    }

    /// The offset just past the uncompressed name at `offset`, or nil where ``readLabels(_:at:end:)`` would throw:
    /// the same walk, without copying a label.
    package static func skipUncompressed(_ bytes: [UInt8], at offset: Int, end: Int) -> Int? {
        try? walkUncompressed(bytes, at: offset, end: min(end, bytes.count)) { _, _ in }
    }

    /// The one walk over an uncompressed name behind ``readLabels(_:at:end:)`` and ``skipUncompressed(_:at:end:)``:
    /// `label` gets each label's offset and length; returns the offset past the root label.
    @inline(__always)
    private static func walkUncompressed(
        _ bytes: [UInt8], at offset: Int, end: Int, _ label: (Int, Int) -> Void
    ) throws(DNSWireError) -> Int {
        var position = offset
        var wireLength = 1
        while true {
            guard position < end else { throw DNSWireError(.truncated, "name runs past the end of its data") }
            let length = Int(bytes[position])
            position += 1
            if length == 0 { return position }
            guard length & 0xC0 == 0 else {
                // RFC 1035 §4.1.4 pointers (0xC0) and RFC 6891 extended label types (0x40, 0x80).
                throw DNSWireError(
                    .malformedMessage, "compressed or extended label where an uncompressed name is required")
            }
            wireLength += 1 + length
            guard wireLength <= maximumWireLength else {
                throw DNSWireError(.malformedMessage, "name longer than \(maximumWireLength) octets")
            }
            guard position + length <= end else { throw DNSWireError(.truncated, "label runs past the end of its data") }
            label(position, length)
            position += length
        }
    }

    /// The labels of `bytes` holding exactly one uncompressed name (a PTR's RDATA), case kept.
    /// - Throws: `DNSWireError` as ``readLabels(_:at:end:)``, or for bytes after the root label.
    public static func labels(wire bytes: [UInt8]) throws(DNSWireError) -> [[UInt8]] {
        let (labels, next) = try readLabels(bytes, at: 0)
        guard next == bytes.count else { throw DNSWireError(.malformedMessage, "bytes after the root label") }
        return labels
    }

    /// The canonical presentation text of `labels`: absolute, ASCII letters lowercased, `.\"();@$` escaped with a
    /// backslash (as BIND and ldns print them), other printable ASCII kept, every other byte as `\DDD`.
    public static func canonicalText(_ labels: [[UInt8]]) -> String {
        if labels.isEmpty { return "." }
        // Measured first, then written into the string's own storage: one allocation (none up to 15 bytes).
        var count = 0
        for label in labels {
            for octet in label { count += canonicalLength(octet) }
            count += 1
        }
        return String(unsafeUninitializedCapacity: count) { out in
            var index = 0
            for label in labels {
                for octet in label { index = writeCanonical(octet, to: out, at: index) }
                out[index] = UInt8(ascii: ".")
                index += 1
            }
            return index
        }
    }

    /// How many bytes one octet of a label takes in ``canonicalText(_:)`` (the reply parser writes owner names
    /// the same way): 2 for an escaped special, 1 for other printable ASCII, 4 for `\DDD`.
    @inline(__always)
    package static func canonicalLength(_ octet: UInt8) -> Int {
        if isEscapedSpecial(octet) { return 2 }
        return (0x21...0x7E).contains(octet) ? 1 : 4
    }

    /// The printable octets that presentation format escapes with a backslash (as BIND and ldns print them).
    @inline(__always)
    private static func isEscapedSpecial(_ octet: UInt8) -> Bool {
        switch octet {
        case UInt8(ascii: "."), UInt8(ascii: "\\"), UInt8(ascii: "\""), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: ";"), UInt8(ascii: "@"), UInt8(ascii: "$"):
            true
        default: false
        }
    }

    /// Writes one octet of a label as ``canonicalText(_:)`` does into storage with room for
    /// ``canonicalLength(_:)`` bytes at `index`; returns the index after them.
    @inline(__always)
    package static func writeCanonical(_ octet: UInt8, to out: UnsafeMutableBufferPointer<UInt8>, at index: Int) -> Int {
        if isEscapedSpecial(octet) {
            out[index] = UInt8(ascii: "\\")
            out[index + 1] = octet
            return index + 2
        }
        switch octet {
        case 0x21...0x7E:
            out[index] = lowercased(octet)
            return index + 1
        default:
            out[index] = UInt8(ascii: "\\")
            out[index + 1] = 48 + octet / 100
            out[index + 2] = 48 + (octet / 10) % 10
            out[index + 3] = 48 + octet % 10
            return index + 4
        }
    }

    /// A label with its ASCII letters lowercased (RFC 4343: names compare case-insensitively).
    public static func lowercased(label: [UInt8]) -> [UInt8] { label.map(lowercased) }

    private static func isDecimalDigit(_ octet: UInt8) -> Bool { octet >= 48 && octet <= 57 }
}
