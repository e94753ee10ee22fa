#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A JSON scalar as the call scanner sees it: the only values the hot methods' parameters take.
public enum ScannedValue: Equatable, Sendable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case null
}

/// The parameters object of a scanned call: its keys in order of appearance, each with a scalar value.
public struct ScannedParameters: Sendable, Equatable {
    /// Key-value pairs; keys are unique (a repeated key makes the scanner give up).
    public private(set) var fields: [(key: String, value: ScannedValue)] = []

    public init(_ fields: [(key: String, value: ScannedValue)] = []) { self.fields = fields }

    mutating func append(_ key: String, _ value: ScannedValue) -> Bool {
        if fields.contains(where: { $0.key == key }) { return false }
        fields.append((key, value))
        return true
    }

    public static func == (lhs: ScannedParameters, rhs: ScannedParameters) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.key == $1.key && $0.value == $1.value }
    }
}

/// Parameters that can be built from a scanned parameters object without Foundation.
///
/// `init?(scanned:)` returns nil for anything it does not accept as is (an unknown key, a repeated key, a wrong
/// type, a missing required field): the caller then decodes the message with `JSONDecoder`, which produces the
/// error, so a call gets the same reply whichever path reads it.
public protocol ScannableParameters: VarlinkParameters {
    init?(scanned: ScannedObject)
}

/// A parameters object the scanner has checked (flat, scalar values only), read field by field from the message's
/// bytes: keys are compared in place, only string values become `String`s.
///
/// It points into the message: use it only inside the call that lends it.
public struct ScannedObject {
    /// The message.
    let bytes: UnsafeBufferPointer<UInt8>
    /// The object, braces included; nil when the message had no parameters or `null`.
    let range: Range<Int>?

    /// Calls `body` with each field in order, as long as it returns true; false when `body` returned false.
    public func forEach(_ body: (ScannedKey, ScannedValue) -> Bool) -> Bool {
        guard let range else { return true }
        var scanner = VarlinkCallScanner.Scanner(bytes: bytes, index: range.lowerBound)
        _ = scanner.consume(UInt8(ascii: "{"))
        if scanner.consume(UInt8(ascii: "}")) { return true }
        repeat {
            // Checked by the scanner already: these cannot fail.
            guard let key = scanner.string(), scanner.consume(UInt8(ascii: ":")), let value = scanner.scalar()
            else { return false }
            let field = ScannedKey(bytes: UnsafeBufferPointer(rebasing: bytes[key]))
            let scanned: ScannedValue
            switch value {
            case .string(let text):
                scanned = .string(String(decoding: UnsafeBufferPointer(rebasing: bytes[text]), as: UTF8.self))
            case .int(let number): scanned = .int(number)
            case .bool(let flag): scanned = .bool(flag)
            case .null: scanned = .null
            }
            guard body(field, scanned) else { return false }
        } while scanner.consume(UInt8(ascii: ","))
        return true
    }

    /// The fields as a list (tests, and the generic form of a scan).
    public var parameters: ScannedParameters? {
        guard range != nil else { return nil }
        var fields = ScannedParameters()
        guard forEach({ key, value in fields.append(key.string, value) }) else { return nil }
        return fields
    }
}

/// A key of a ``ScannedObject``: plain ASCII, compared in place with the names a parameter type knows.
public struct ScannedKey {
    let bytes: UnsafeBufferPointer<UInt8>

    /// The key as text.
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    public static func == (key: ScannedKey, name: StaticString) -> Bool {
        key.bytes.count == name.utf8CodeUnitCount
            && (key.bytes.isEmpty || memcmpBytes(key.bytes.baseAddress!, name.utf8Start, key.bytes.count))
    }
}

/// Whether `count` bytes at `a` and `b` are equal: a byte loop for keys, libc's `memcmp` for method names (a
/// method name is compared with each hot route's, and the byte loop was a tenth of a hot call's parsing).
@inline(__always)
func memcmpBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    if count > 16 { return memcmp(a, b, count) == 0 }
    var offset = 0
    while offset < count {
        if a[offset] != b[offset] { return false }
        offset += 1
    }
    return true
}

/// One pass over a call message: the envelope and a flat parameters object, for the hot methods.
///
/// Strict and small on purpose: it understands objects whose keys are plain ASCII strings and whose values are
/// ASCII strings without escapes, integers, booleans or null. Anything else (escapes, non-ASCII text, numbers with
/// a fraction or exponent, nested parameter values, unknown envelope keys, a repeated key, trailing bytes) makes
/// ``scan(_:)`` return nil, and the message goes to the `Codable` path, which decides what it means.
///
/// Nothing is copied: ``envelope(_:)`` returns where the method name and the parameters are in the message, and a
/// parameter type reads its fields from there (``ScannableParameters``).
public enum VarlinkCallScanner {
    /// A call as scanned; `parameters` is nil when the message had none or `null`.
    public struct Call: Sendable, Equatable {
        public var method: String
        public var more: Bool
        public var oneway: Bool
        public var parameters: ScannedParameters?
    }

    /// The envelope of a call, by position in the message; its parameters object is checked but not read.
    public struct Envelope {
        /// The method name's bytes, without quotes.
        public var method: Range<Int>
        public var more: Bool
        public var oneway: Bool
        /// The parameters object, braces included; nil when absent or `null`.
        public var parameters: Range<Int>?

        /// The method name as text.
        public func method(in bytes: UnsafeBufferPointer<UInt8>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes[method]), as: UTF8.self)
        }

        /// Whether the method name is `name`, compared in place.
        public func isMethod(_ name: UnsafeBufferPointer<UInt8>, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            method.count == name.count
                && (name.isEmpty || memcmpBytes(bytes.baseAddress! + method.lowerBound, name.baseAddress!, name.count))
        }

        /// The parameters object, to read with ``ScannableParameters/init(scanned:)``.
        public func parameters(in bytes: UnsafeBufferPointer<UInt8>) -> ScannedObject {
            ScannedObject(bytes: bytes, range: parameters)
        }
    }

    /// Scans a call message's envelope (without its NUL); nil when the message is outside what the scanner
    /// understands.
    public static func envelope(_ bytes: UnsafeBufferPointer<UInt8>) -> Envelope? {
        var scanner = Scanner(bytes: bytes)
        return scanner.envelope()
    }

    /// Scans a call message (without its NUL); nil when the message is outside what the scanner understands.
    public static func scan(_ bytes: ArraySlice<UInt8>) -> Call? {
        bytes.withUnsafeBufferPointer { buffer in
            guard let envelope = envelope(buffer) else { return nil }
            let object = envelope.parameters(in: buffer)
            var parameters: ScannedParameters?
            if object.range != nil {
                // A repeated key: the scanner gives up.
                guard let fields = object.parameters else { return nil }
                parameters = fields
            }
            return Call(
                method: envelope.method(in: buffer), more: envelope.more, oneway: envelope.oneway,
                parameters: parameters)
        }
    }

    /// Scans a call message given as text (tests).
    public static func scan(_ text: String) -> Call? {
        scan(ArraySlice(Array(text.utf8)))
    }

    /// A scalar as found in the message: strings by position.
    enum RawValue: Equatable {
        case string(Range<Int>)
        case int(Int)
        case bool(Bool)
        case null
    }

    struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>, index: Int = 0) {
            self.bytes = bytes
            self.index = index
        }

        func key(_ range: Range<Int>, is name: StaticString) -> Bool {
            range.count == name.utf8CodeUnitCount
                && memcmpBytes(bytes.baseAddress! + range.lowerBound, name.utf8Start, range.count)
        }

        mutating func envelope() -> Envelope? {
            var method: Range<Int>?
            var more: Bool?
            var oneway: Bool?
            var parameters: Range<Int>?
            var sawParameters = false
            guard consume(UInt8(ascii: "{")) else { return nil }
            if !consume(UInt8(ascii: "}")) {
                repeat {
                    guard let key = string() else { return nil }
                    guard consume(UInt8(ascii: ":")) else { return nil }
                    if self.key(key, is: "method") {
                        guard method == nil, case .string(let value)? = scalar() else { return nil }
                        method = value
                    } else if self.key(key, is: "more") || self.key(key, is: "oneway") {
                        let flag: Bool?
                        switch scalar() {
                        case .bool(let value)?: flag = value
                        case .null?: flag = false
                        default: return nil
                        }
                        if key.count == 4 {
                            guard more == nil else { return nil }
                            more = flag
                        } else {
                            guard oneway == nil else { return nil }
                            oneway = flag
                        }
                    } else if self.key(key, is: "parameters") {
                        guard !sawParameters else { return nil }
                        sawParameters = true
                        skipWhitespace()
                        if peek() == UInt8(ascii: "{") {
                            let start = index
                            guard object() else { return nil }
                            parameters = start..<index
                        } else {
                            guard scalar() == .null else { return nil }
                        }
                    } else {
                        return nil
                    }
                } while consume(UInt8(ascii: ","))
                guard consume(UInt8(ascii: "}")) else { return nil }
            }
            skipWhitespace()
            guard index == bytes.count, let method else { return nil }
            return Envelope(method: method, more: more ?? false, oneway: oneway ?? false, parameters: parameters)
        }

        /// Checks a flat object of scalars (repeated keys are left to the parameter types, which reject them).
        mutating func object() -> Bool {
            guard consume(UInt8(ascii: "{")) else { return false }
            if consume(UInt8(ascii: "}")) { return true }
            repeat {
                guard string() != nil, consume(UInt8(ascii: ":")), scalar() != nil else { return false }
            } while consume(UInt8(ascii: ","))
            return consume(UInt8(ascii: "}"))
        }

        mutating func scalar() -> RawValue? {
            skipWhitespace()
            guard let first = peek() else { return nil }
            switch first {
            case UInt8(ascii: "\""): return string().map(RawValue.string)
            case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
            case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
            case UInt8(ascii: "n"): return literal("null") ? .null : nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return integer().map(RawValue.int)
            default: return nil
            }
        }

        /// An ASCII string without escapes or control characters: where its text is, without the quotes.
        mutating func string() -> Range<Int>? {
            skipWhitespace()
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            // Eight bytes at a time while none of them ends the string or needs a closer look (SWAR: the scan of
            // the method name and the parameters' strings is most of a hot call's parsing).
            if let base = bytes.baseAddress {
                while bytes.count - index >= 8 {
                    let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                    if Self.needsAttention(word) { break }
                    index += 8
                }
            }
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return start..<(index - 1)
                }
                // Escapes, control characters and non-ASCII text are left to JSONDecoder.
                if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { return nil }
                index += 1
            }
            return nil
        }

        /// Whether any of the eight bytes is a quote, a backslash, a control character or non-ASCII.
        @inline(__always)
        static func needsAttention(_ word: UInt64) -> Bool {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            // Non-zero iff some byte of `x` is zero (exact for the word as a whole; a borrow may also flag the byte
            // above a zero byte, which does not matter here). The same with 0x20 for "some byte below 0x20".
            func hasZero(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
            let quote = hasZero(word ^ (ones &* 0x22))
            let backslash = hasZero(word ^ (ones &* 0x5C))
            let control = (word &- ones &* 0x20) & ~word & highs
            return (word & highs) | quote | backslash | control != 0
        }

        /// `-?(0|[1-9][0-9]*)` with at most 18 digits, followed by a delimiter (no fraction or exponent).
        mutating func integer() -> Int? {
            var negative = false
            if bytes[index] == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            let start = index
            var value = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                // Past 18 digits the number may not fit: give up before it could overflow.
                guard index - start < 18 else { return nil }
                value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                index += 1
            }
            let digits = index - start
            guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")) else { return nil }
            if let next = peek(), next == UInt8(ascii: ".") || next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
                return nil
            }
            if negative && value == 0 { return nil }
            return negative ? -value : value
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            // `truex` is not a literal.
            if let next = peek(), (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(next) { return false }
            return true
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }
    }
}
