/// A name that cannot be used as a DNS name; maps onto the API error `InvalidName {name, reason}`.
public struct InvalidNameError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The name as the caller gave it.
    public var name: String
    /// Why it was rejected, for people.
    public var reason: String

    /// Creates an error.
    public init(name: String, reason: String) {
        self.name = name
        self.reason = reason
    }

    public var description: String { "invalid name \"\(name)\": \(reason)" }
}

/// A validated, absolute domain name, compared case-insensitively (RFC 4343).
///
/// Labels are stored with ASCII letters lowercased, so `==` and hashing ignore case. IDNA is not applied:
/// internationalised names must be given in their `xn--` form.
public struct DNSName: Hashable, Sendable, CustomStringConvertible {
    /// Longest label in octets (RFC 1035 §2.3.4).
    public static let maximumLabelLength = 63
    /// Longest name in wire octets, counting length bytes and the root (RFC 1035 §2.3.4).
    public static let maximumWireLength = 255

    /// The labels, lowercased, without the empty root label.
    public let labels: [[UInt8]]

    /// The root name `.`.
    public static let root = DNSName(validatedLabels: [])

    package init(validatedLabels: [[UInt8]]) {
        self.labels = validatedLabels
    }

    /// Creates a name from its labels (most specific first), lowercasing them.
    ///
    /// - Throws: `InvalidNameError` for an empty label, a label over 63 octets or a name over 255 octets.
    public init(labels: [[UInt8]]) throws(InvalidNameError) {
        let candidate = DNSName(validatedLabels: labels.map { $0.map(Self.lowercased) })
        for label in labels where label.isEmpty || label.count > Self.maximumLabelLength {
            throw InvalidNameError(name: candidate.text, reason: "empty label or label longer than 63 octets")
        }
        guard candidate.wire.count <= Self.maximumWireLength else {
            throw InvalidNameError(name: candidate.text, reason: "name longer than 255 octets in wire format")
        }
        self = candidate
    }

    /// Whether this name is `zone` or below it.
    public func isSubdomain(of zone: DNSName) -> Bool {
        labels.count >= zone.labels.count && Array(labels.suffix(zone.labels.count)) == zone.labels
    }

    /// Parses a name in presentation format (RFC 1035 §5.1): `\X` and `\DDD` escapes, optional trailing dot.
    ///
    /// - Parameter text: e.g. `www.Example.com` or `www.example.com.`; `.` is the root.
    /// - Throws: `InvalidNameError` for an empty name, an empty label, a label over 63 octets, a name over
    ///   255 octets, a bad escape, or a character that needs escaping (space, control, non-ASCII).
    public init(_ text: String) throws(InvalidNameError) {
        if let labels = Self.plainLabels(text) {
            self.labels = labels
            return
        }
        self.labels = try Self.parseLabels(text, syntax: .strict).map { $0.map(Self.lowercased) }
    }

    /// What a plain name is, for the fast paths below: only letters, digits, `-` and `_`, in labels of 1 to 63
    /// octets, no leading dot, at most 255 octets in wire form. Nil for anything else (escapes, empty labels, the
    /// root), which the full parser handles; else whether it ends with a dot and whether it has capitals.
    @inline(__always)
    private static func plainShape(_ bytes: UnsafeBufferPointer<UInt8>) -> (absolute: Bool, upper: Bool)? {
        guard !bytes.isEmpty, bytes[0] != UInt8(ascii: ".") else { return nil }
        var label = 0
        var upper = false
        for byte in bytes {
            if byte == UInt8(ascii: ".") {
                guard label > 0 else { return nil }
                label = 0
                continue
            }
            let lower = byte >= 0x61 && byte <= 0x7A
            let capital = byte >= 0x41 && byte <= 0x5A
            guard lower || capital || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F else {
                return nil
            }
            upper = upper || capital
            label += 1
            guard label <= maximumLabelLength else { return nil }
        }
        let absolute = bytes.last == UInt8(ascii: ".")
        // Wire length: the text's octets, one more leading length octet, one more root if not absolute.
        guard bytes.count + (absolute ? 1 : 2) <= maximumWireLength else { return nil }
        return (absolute, upper)
    }

    /// The lowercased labels of a name made only of letters, digits, `-` and `_` in valid labels (what
    /// ``plainNormalized(_:)`` accepts), checked and then cut, one array per label; nil for anything else, which
    /// the full parser handles. Equal to `DNSName(text).labels` whenever it is not nil.
    private static func plainLabels(_ text: String) -> [[UInt8]]? {
        text.utf8.withContiguousStorageIfAvailable { bytes -> [[UInt8]]? in
            guard plainShape(bytes) != nil else { return nil }
            var labels: [[UInt8]] = []
            var start = 0
            for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: ".") {
                let length = index - start
                // Only the root after a trailing dot is empty.
                if length > 0 {
                    labels.append(
                        [UInt8](unsafeUninitializedCapacity: length) { label, count in
                            for offset in 0..<length { label[offset] = lowercased(bytes[start + offset]) }
                            count = length
                        })
                }
                start = index + 1
            }
            return labels
        } ?? nil
    }

    /// Reads an uncompressed wire-format name (RFC 1035 §3.1) starting at `offset`.
    ///
    /// - Returns: the name and the offset just past its root label.
    /// - Throws: `DNSWireError` (`.truncated` or `.malformedMessage`) for a name that runs past `end`, uses
    ///   compression or extended label types, or exceeds 255 octets.
    package static func readUncompressed(
        _ bytes: [UInt8], at offset: Int, end: Int
    ) throws(DNSWireError) -> (name: DNSName, next: Int) {
        let (labels, next) = try readLabels(bytes, at: offset, end: end)
        return (DNSName(validatedLabels: labels.map { $0.map(lowercased) }), next)
    }

    /// Reads an uncompressed wire-format name at `offset` of a message (a question name, RFC 1035 §4.1.2).
    ///
    /// - Returns: the name (lowercased) and the offset just past its root label.
    /// - Throws: `DNSWireError` for a truncated name, compression, extended labels or over 255 octets.
    public static func read(wire bytes: [UInt8], at offset: Int) throws(DNSWireError) -> (name: DNSName, next: Int) {
        try readUncompressed(bytes, at: offset, end: bytes.count)
    }

    /// Parses a complete uncompressed wire-format name; trailing bytes are an error.
    ///
    /// - Throws: `DNSWireError` when the bytes are not exactly one valid name.
    public init(wire bytes: [UInt8]) throws(DNSWireError) {
        let (name, next) = try Self.readUncompressed(bytes, at: 0, end: bytes.count)
        guard next == bytes.count else { throw DNSWireError(.malformedMessage, "bytes after the root label") }
        self = name
    }

    /// The name in uncompressed wire format, ending with the root label.
    public var wire: [UInt8] { Self.wire(labels) }

    /// Presentation format, lowercased and absolute (with trailing dot); special octets are escaped.
    public var text: String { Self.canonicalText(labels) }

    public var description: String { text }

    /// Whether this is the root name `.`.
    public var isRoot: Bool { labels.isEmpty }

    /// This name with `label` prepended, e.g. `_https` in front of `example.com.`.
    ///
    /// - Throws: `InvalidNameError` when the label is invalid or the result would exceed 255 octets.
    public func prepending(_ label: String) throws(InvalidNameError) -> DNSName {
        let parsed = try DNSName(label)
        let combined = DNSName(validatedLabels: parsed.labels + labels)
        guard combined.wire.count <= Self.maximumWireLength else {
            throw InvalidNameError(name: label + "." + text, reason: "name longer than 255 octets in wire format")
        }
        return combined
    }

    /// The normalised text (lowercase, trailing dot) of a name made only of letters, digits, `-` and `_` in valid
    /// labels; nil for anything else (escapes, empty labels, over-long labels or names, the root), which the full
    /// parser handles. Equal to `DNSName(text).text` whenever it is not nil.
    public static func plainNormalized(_ text: String) -> String? {
        let result: (needsCopy: Bool, absolute: Bool)? = text.utf8.withContiguousStorageIfAvailable { bytes in
            plainShape(bytes).map { shape in (shape.upper || !shape.absolute, shape.absolute) }
        } ?? nil
        // nil: not plain, or not contiguous (a bridged string): the full parser decides.
        guard let result else { return nil }
        if !result.needsCopy { return text }
        var bytes = Array(text.utf8)
        for index in bytes.indices where bytes[index] >= 0x41 && bytes[index] <= 0x5A { bytes[index] += 32 }
        if !result.absolute { bytes.append(UInt8(ascii: ".")) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the wire form (lowercased) of a name made only of letters, digits, `-` and `_` in valid labels (what
    /// ``plainNormalized(_:)`` accepts) to `out`, without building labels; returns false, with `out` untouched,
    /// for anything else, which the full parser handles. When true, the bytes equal `DNSName(text).wire`.
    public static func appendPlainWire(_ text: String, to out: inout [UInt8]) -> Bool {
        appendPlainWireShape(text, to: &out) != nil
    }

    /// ``appendPlainWire(_:to:)`` that also gives the normalised text (``plainNormalized(_:)``'s): `text` itself
    /// when it is lowercase and absolute already, as the miss path's names are; nil, with `out` untouched, for
    /// anything else.
    public static func appendPlainWireNormalized(_ text: String, to out: inout [UInt8]) -> String? {
        guard let shape = appendPlainWireShape(text, to: &out) else { return nil }
        return shape.upper || !shape.absolute ? plainNormalized(text) : text
    }

    /// Checks and writes in one pass over the text: each dot becomes the length octet of the label after it, a
    /// leading one is added, and the root octet unless the text ends with a dot (which then becomes it).
    private static func appendPlainWireShape(_ text: String, to out: inout [UInt8]) -> (absolute: Bool, upper: Bool)? {
        text.utf8.withContiguousStorageIfAvailable { bytes -> (absolute: Bool, upper: Bool)? in
            let count = bytes.count
            // Wire length: the text's octets, one more leading length octet, one more root if not absolute.
            guard count > 0, count + 1 <= maximumWireLength, bytes[0] != UInt8(ascii: ".") else { return nil }
            let absolute = bytes[count - 1] == UInt8(ascii: ".")
            guard count + (absolute ? 1 : 2) <= maximumWireLength else { return nil }
            let base = out.count
            out.appendZeroes(count + (absolute ? 1 : 2))
            let upper = out.withUnsafeMutableBufferPointer { wire -> Bool? in
                var lengthAt = base
                var write = base + 1
                var label = 0
                var upper = false
                for byte in bytes {
                    if byte == UInt8(ascii: ".") {
                        guard label > 0 else { return nil }
                        wire[lengthAt] = UInt8(truncatingIfNeeded: label)
                        lengthAt = write
                        label = 0
                    } else {
                        // plainShape's octet test, written out again here: through a shared helper returning
                        // the lowercased octet this loop cost ~280 more instructions a name (callgrind).
                        let lower = byte >= 0x61 && byte <= 0x7A
                        let capital = byte >= 0x41 && byte <= 0x5A
                        guard lower || capital || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
                        else { return nil }
                        upper = upper || capital
                        wire[write] = capital ? byte &+ 32 : byte
                        label += 1
                        guard label <= maximumLabelLength else { return nil }
                    }
                    write += 1
                }
                // Not absolute: the last label's length; the root after it is a zero of the template.
                if label > 0 { wire[lengthAt] = UInt8(truncatingIfNeeded: label) }
                return upper
            }
            guard let upper else {
                out.removeLast(out.count - base)
                return nil
            }
            return (absolute, upper)
        } ?? nil
    }

    /// Normalises presentation text (lowercase, trailing dot) when it is a valid name, else returns it unchanged.
    package static func normalized(_ text: String) -> String {
        plainNormalized(text) ?? (try? DNSName(text))?.text ?? text
    }

    package static func lowercased(_ octet: UInt8) -> UInt8 {
        octet >= UInt8(ascii: "A") && octet <= UInt8(ascii: "Z") ? octet + 32 : octet
    }

    private static func isDigit(_ octet: UInt8) -> Bool { octet >= 48 && octet <= 57 }
}
