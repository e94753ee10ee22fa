/// A minimal JSON writer for the hot replies (cache hits are most of the daemon's traffic).
///
/// Foundation's `JSONEncoder` goes through generic containers and metadata lookups for every field, which
/// profiles as about a third of the CPU of a cached lookup (BENCHMARKS.md). Types that conform to
/// ``JSONWritable`` are written straight into bytes; everything else still uses `JSONEncoder`. Tests check
/// that both produce the same values.
public struct JSONWriter {
    /// The JSON text written so far, UTF-8.
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init(capacity: Int = 512) {
        bytes.reserveCapacity(capacity)
    }

    /// Continues after `bytes`, which end inside an object after a value (the next field gets a comma).
    public init(continuing bytes: [UInt8], reserving extra: Int = 128) {
        self.bytes = bytes
        self.bytes.reserveCapacity(bytes.count + extra)
        needsComma = true
    }

    /// Appends bytes already written by a writer (the end of a template).
    public mutating func raw(_ written: [UInt8]) {
        bytes.append(contentsOf: written)
    }

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Writes `"key":`; the value follows.
    public mutating func key(_ key: String) {
        separate()
        writeString(key)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes `"key":` for a key spelt in the source (no escape needed), without examining it: the per-call fields
    /// of the hot replies.
    public mutating func staticKey(_ key: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func string(_ value: String) {
        separate()
        writeString(value)
        needsComma = true
    }

    public mutating func int(_ value: Int) {
        separate()
        JSONNumbers.int(value, to: &bytes)
        needsComma = true
    }

    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }

    public mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
        needsComma = true
    }

    /// A finite number; NaN and infinities (not JSON) are written as 0.
    public mutating func double(_ value: Double) {
        separate()
        JSONNumbers.double(value, to: &bytes)
        needsComma = true
    }

    public mutating func field(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    public mutating func field(_ name: String, _ value: Int) {
        key(name)
        int(value)
    }

    public mutating func field(_ name: String, _ value: Bool) {
        key(name)
        bool(value)
    }

    public mutating func field(_ name: String, _ value: Double) {
        key(name)
        double(value)
    }

    /// Writes the field only when the value is present (optional fields are omitted, as JSONEncoder does).
    public mutating func field(_ name: String, _ value: String?) {
        if let value { field(name, value) }
    }

    public mutating func field(_ name: String, _ value: Int?) {
        if let value { field(name, value) }
    }

    public mutating func field(_ name: String, strings: [String]) {
        key(name)
        beginArray()
        for value in strings { string(value) }
        endArray()
    }

    /// A string-to-optional-string object (TXT attributes: `null` for a boolean key), keys sorted.
    public mutating func field(_ name: String, object: [String: String?]) {
        key(name)
        beginObject()
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            if let value {
                field(key, value)
            } else {
                self.key(key)
                self.null()
            }
        }
        endObject()
    }

    public mutating func field<T: JSONWritable>(_ name: String, _ value: T) {
        key(name)
        value.write(to: &self)
    }

    public mutating func field<T: JSONWritable>(_ name: String, array: [T]) {
        key(name)
        beginArray()
        for value in array { value.write(to: &self) }
        endArray()
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    /// RFC 8259 §7: quote, backslash and control characters are escaped; NUL in particular, which would
    /// otherwise end a varlink message.
    private mutating func writeString(_ value: String) {
        // Nearly every string (keys, names, addresses) needs no escape: copied in one piece.
        let copied = value.utf8.withContiguousStorageIfAvailable { text -> Bool in
            for byte in text where byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                return false
            }
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: text)
            bytes.append(UInt8(ascii: "\""))
            return true
        }
        if copied == true { return }
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: Array("\\u00".utf8))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// Where numbers are written: ``JSONWriter``'s array, or the raw buffer of a patched reply (``EncodedResolverReply``).
protocol JSONOutput {
    mutating func append(_ byte: UInt8)
    mutating func append(raw bytes: UnsafeRawBufferPointer)
}

extension Array: JSONOutput where Element == UInt8 {
    mutating func append(raw bytes: UnsafeRawBufferPointer) { append(contentsOf: bytes) }
}

/// Numbers as ``JSONWriter`` writes them, for any ``JSONOutput``.
enum JSONNumbers {
    static func int<Output: JSONOutput>(_ value: Int, to output: inout Output) {
        if value < 0 {
            // `Int.min` has no positive counterpart: the standard library writes it.
            guard value != .min else {
                var text = String(value)
                text.withUTF8 { output.append(raw: UnsafeRawBufferPointer($0)) }
                return
            }
            output.append(UInt8(ascii: "-"))
        }
        digits(UInt64(value.magnitude), to: &output)
    }

    /// A finite number; NaN and infinities (not JSON) are written as 0.
    static func double<Output: JSONOutput>(_ value: Double, to output: inout Output) {
        if !thousandths(value, to: &output) {
            var text = value.isFinite ? String(value) : "0"
            text.withUTF8 { output.append(raw: UnsafeRawBufferPointer($0)) }
        }
    }

    /// The decimal digits of `value`, without building a String (a number per field of every hot reply).
    static func digits<Output: JSONOutput>(_ value: UInt64, to output: inout Output) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes, enough for 20 digits
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                count += 1
                buffer[24 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            output.append(raw: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    /// Writes a positive number with at most three decimals, below 10^9 (every `totalMs` and `ms` of a reply, which
    /// are rounded to microseconds), as `String(value)` would: the shortest text that reads back as the same
    /// Double. Here that is the decimal itself, trailing zeros dropped, at least one digit after the point; no other
    /// decimal that short is within half a unit of the last place of the value. False for any other value.
    static func thousandths<Output: JSONOutput>(_ value: Double, to output: inout Output) -> Bool {
        guard value.sign == .plus, value < 1e9 else { return false }
        let scaled = (value * 1000).rounded()
        guard scaled / 1000 == value else { return false }
        let thousandths = UInt64(scaled)
        digits(thousandths / 1000, to: &output)
        output.append(UInt8(ascii: "."))
        var fraction = thousandths % 1000
        if fraction == 0 {
            output.append(UInt8(ascii: "0"))
            return true
        }
        var divisor: UInt64 = 100
        while fraction > 0 {
            output.append(UInt8(ascii: "0") + UInt8(fraction / divisor))
            fraction %= divisor
            divisor /= 10
        }
        return true
    }
}

/// A type that writes itself as a JSON object with ``JSONWriter`` (same JSON as its `Encodable` form).
public protocol JSONWritable {
    func write(to writer: inout JSONWriter)
}
