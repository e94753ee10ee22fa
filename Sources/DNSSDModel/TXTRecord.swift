/// A DNS-SD TXT record: an ordered list of character strings (RFC 6763 §6).
///
/// Each string is `key=value`, `key=` (empty value) or `key` (a boolean attribute, RFC 6763 §6.4). The record is kept
/// as raw bytes so nothing is lost; `dictionary` gives the UTF-8 view.
public struct TXTRecord: Hashable, Sendable {
    /// Longest single TXT string (one length byte).
    public static let maximumStringLength = 255
    /// Largest TXT record this module will publish, in wire bytes (RFC 6763 §6.2 recommends staying below 1300,
    /// §6.1 allows up to 8900 in practice with mDNS).
    public static let maximumTotalLength = 8900

    /// The strings in wire order, without length bytes.
    public var strings: [[UInt8]]

    /// Creates a record from raw strings without checking them (for data received from the network).
    public init(strings: [[UInt8]]) {
        self.strings = strings
    }

    /// An empty record.
    public init() {
        self.strings = []
    }

    /// Builds a record from key/value pairs, validating every key and length.
    ///
    /// A `nil` value is a boolean attribute, written as `key` without `=` (RFC 6763 §6.4); an empty value is written as
    /// `key=`. Keys are written in ascending order so the encoding is deterministic.
    /// - Throws: `DNSSDError.invalidParameter` for a bad key, two keys differing only in case, or a record too
    ///   long.
    public init(validating dictionary: [String: String?]) throws(DNSSDError) {
        var strings: [[UInt8]] = []
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            // Checked here too: a key containing '=' would otherwise pass as a shorter key.
            try TXTRecord.validateKey(Array(key.utf8))
            strings.append(Array(key.utf8) + (value.map { [UInt8(ascii: "=")] + Array($0.utf8) } ?? []))
        }
        try self.init(validating: strings)
    }

    /// Builds a record from raw strings in wire order, validating keys and lengths (values may be any bytes).
    /// - Throws: `DNSSDError.invalidParameter` for a bad key, a key given twice (keys compare case-insensitively,
    ///   RFC 6763 §6.4: a receiver would ignore all but the first) or a record too long.
    public init(validating strings: [[UInt8]]) throws(DNSSDError) {
        var total = 0
        var seen = Set<[UInt8]>()
        for string in strings {
            guard !string.isEmpty else {
                throw DNSSDError(.invalidParameter, "TXT strings must not be empty")
            }
            guard string.count <= TXTRecord.maximumStringLength else {
                throw DNSSDError(
                    .invalidParameter,
                    "TXT string of \(string.count) bytes exceeds \(TXTRecord.maximumStringLength)"
                )
            }
            let key = string.firstIndex(of: UInt8(ascii: "=")).map { Array(string[..<$0]) } ?? string
            try TXTRecord.validateKey(key)
            guard seen.insert(key.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 32 : $0 }).inserted else {
                throw DNSSDError(
                    .invalidParameter,
                    "TXT key \"\(String(decoding: key, as: UTF8.self))\" is given twice (keys are case-insensitive)"
                )
            }
            total += 1 + string.count
        }
        guard total <= TXTRecord.maximumTotalLength else {
            throw DNSSDError(
                .invalidParameter,
                "TXT record of \(total) bytes exceeds \(TXTRecord.maximumTotalLength)"
            )
        }
        self.strings = strings
    }

    /// RFC 6763 §6.4: a key is at least one printable US-ASCII character (0x20-0x7E) other than '='.
    static func validateKey(_ key: [UInt8]) throws(DNSSDError) {
        guard !key.isEmpty else {
            throw DNSSDError(.invalidParameter, "TXT key must not be empty")
        }
        for byte in key where byte < 0x20 || byte > 0x7E || byte == UInt8(ascii: "=") {
            let shown = String(decoding: key, as: UTF8.self)
            throw DNSSDError(
                .invalidParameter,
                "TXT key \"\(shown)\" must be printable ASCII (0x20-0x7E) without '='"
            )
        }
    }

    /// One decoded attribute.
    public enum Value: Hashable, Sendable {
        /// `key` without '=': a boolean attribute that is present.
        case present
        /// `key=value`; the value may be empty or any bytes.
        case bytes([UInt8])
    }

    /// The attributes in wire order, duplicates removed (RFC 6763 §6.4: the first occurrence of a key wins, keys
    /// compare case-insensitively; strings without a key, such as `=x` or the empty string, are ignored).
    public var attributes: [(key: String, value: Value)] {
        var result: [(key: String, value: Value)] = []
        var seen = Set<String>()
        for string in self.strings where !string.isEmpty {
            let keyBytes: ArraySlice<UInt8>
            let value: Value
            if let equals = string.firstIndex(of: UInt8(ascii: "=")) {
                keyBytes = string[..<equals]
                value = .bytes(Array(string[string.index(after: equals)...]))
            } else {
                keyBytes = string[...]
                value = .present
            }
            guard !keyBytes.isEmpty, let key = String(validating: keyBytes, as: UTF8.self) else { continue }
            guard seen.insert(key.lowercased()).inserted else { continue }
            result.append((key: key, value: value))
        }
        return result
    }

    /// The attributes whose key and value are valid UTF-8, first occurrence of a key winning; a boolean attribute
    /// (`key` without `=`) maps to `nil`, `key=` to "".
    public var dictionary: [String: String?] {
        var result: [String: String?] = [:]
        for (key, value) in self.attributes {
            switch value {
            case .present:
                result.updateValue(nil, forKey: key)
            case .bytes(let bytes):
                if let text = String(validating: bytes, as: UTF8.self) {
                    result.updateValue(text, forKey: key)
                }
            }
        }
        return result
    }

    /// True when some string cannot be represented in `dictionary` without loss: a value or key that is not UTF-8.
    public var hasNonUTF8Content: Bool {
        for string in self.strings where String(validating: string, as: UTF8.self) == nil {
            return true
        }
        return false
    }

    /// True when `dictionary` does not show every string: one is not UTF-8, repeats a key (only the first counts), or
    /// has no key (`=x`, the empty string). Then the raw strings must be passed on too.
    public var dictionaryIsLossy: Bool {
        self.hasNonUTF8Content || self.attributes.count != self.strings.count
    }

    /// The record in DNS wire format: each string preceded by its length byte. An empty record is one empty string
    /// (RFC 6763 §6.1). Strings longer than 255 bytes are truncated (only possible with unvalidated input).
    public var wireFormat: [UInt8] {
        if self.strings.isEmpty { return [0] }
        var bytes: [UInt8] = []
        for string in self.strings {
            let count = min(string.count, TXTRecord.maximumStringLength)
            bytes.append(UInt8(count))
            bytes.append(contentsOf: string[..<count])
        }
        return bytes
    }

    /// Parses DNS wire format. A length running past the end keeps what is there; nothing here traps.
    public init(wireFormat bytes: [UInt8]) {
        var strings: [[UInt8]] = []
        var index = 0
        while index < bytes.count {
            let length = Int(bytes[index])
            index += 1
            let end = min(index + length, bytes.count)
            if end > index { strings.append(Array(bytes[index..<end])) }
            index = end
        }
        self.strings = strings
    }
}
