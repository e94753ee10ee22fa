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
/// `init(scanned:)` returns nil for anything it does not accept as is (an unknown key, a wrong type, a missing
/// required field): the caller then decodes the message with `JSONDecoder`, which produces the error, so a call
/// gets the same reply whichever path reads it.
public protocol ScannableParameters: VarlinkParameters {
    init?(scanned: ScannedParameters)
}

/// One pass over a call message: the envelope and a flat parameters object, for the hot methods.
///
/// Strict and small on purpose: it understands objects whose keys are plain ASCII strings and whose values are
/// ASCII strings without escapes, integers, booleans or null. Anything else (escapes, non-ASCII text, numbers with
/// a fraction or exponent, nested parameter values, unknown envelope keys, a repeated key, trailing bytes) makes
/// ``scan(_:)`` return nil, and the message goes to the `Codable` path, which decides what it means.
public enum VarlinkCallScanner {
    /// A call as scanned; `parameters` is nil when the message had none or `null`.
    public struct Call: Sendable, Equatable {
        public var method: String
        public var more: Bool
        public var oneway: Bool
        public var parameters: ScannedParameters?
    }

    /// Scans a call message (without its NUL); nil when the message is outside what the scanner understands.
    public static func scan(_ bytes: ArraySlice<UInt8>) -> Call? {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            return scanner.call()
        }
    }

    /// Scans a call message given as text (tests).
    public static func scan(_ text: String) -> Call? {
        scan(ArraySlice(Array(text.utf8)))
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func call() -> Call? {
            var method: String?
            var more: Bool?
            var oneway: Bool?
            var parameters: ScannedParameters?
            var sawParameters = false
            guard consume(UInt8(ascii: "{")) else { return nil }
            if !consume(UInt8(ascii: "}")) {
                repeat {
                    guard let key = string() else { return nil }
                    guard consume(UInt8(ascii: ":")) else { return nil }
                    switch key {
                    case "method":
                        guard method == nil, case .string(let value)? = scalar() else { return nil }
                        method = value
                    case "more", "oneway":
                        let flag: Bool?
                        switch scalar() {
                        case .bool(let value)?: flag = value
                        case .null?: flag = false
                        default: return nil
                        }
                        if key == "more" {
                            guard more == nil else { return nil }
                            more = flag
                        } else {
                            guard oneway == nil else { return nil }
                            oneway = flag
                        }
                    case "parameters":
                        guard !sawParameters else { return nil }
                        sawParameters = true
                        skipWhitespace()
                        if peek() == UInt8(ascii: "{") {
                            guard let object = object() else { return nil }
                            parameters = object
                        } else {
                            guard scalar() == .null else { return nil }
                        }
                    default:
                        return nil
                    }
                } while consume(UInt8(ascii: ","))
                guard consume(UInt8(ascii: "}")) else { return nil }
            }
            skipWhitespace()
            guard index == bytes.count, let method else { return nil }
            return Call(method: method, more: more ?? false, oneway: oneway ?? false, parameters: parameters)
        }

        /// A flat object of scalars.
        mutating func object() -> ScannedParameters? {
            guard consume(UInt8(ascii: "{")) else { return nil }
            var fields = ScannedParameters()
            if consume(UInt8(ascii: "}")) { return fields }
            repeat {
                guard let key = string(), consume(UInt8(ascii: ":")), let value = scalar() else { return nil }
                guard fields.append(key, value) else { return nil }
            } while consume(UInt8(ascii: ","))
            guard consume(UInt8(ascii: "}")) else { return nil }
            return fields
        }

        mutating func scalar() -> ScannedValue? {
            skipWhitespace()
            guard let first = peek() else { return nil }
            switch first {
            case UInt8(ascii: "\""): return string().map(ScannedValue.string)
            case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
            case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
            case UInt8(ascii: "n"): return literal("null") ? .null : nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return integer().map(ScannedValue.int)
            default: return nil
            }
        }

        /// An ASCII string without escapes or control characters.
        mutating func string() -> String? {
            skipWhitespace()
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                // Escapes, control characters and non-ASCII text are left to JSONDecoder.
                if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { return nil }
                index += 1
            }
            return nil
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
