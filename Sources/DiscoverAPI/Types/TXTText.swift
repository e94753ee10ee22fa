import DNSSDModel

/// TXT attributes as people type and read them (`key=value`, `key` for a boolean attribute, RFC 6763 §6.4).
public enum TXTText {
    /// Why a list of TXT arguments was refused.
    public struct InvalidArgument: Error, Hashable, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Parses `key=value` (value may be empty: `key=`) and `key` (a boolean attribute, `nil` in the map) arguments.
    /// - Throws: `InvalidArgument` for an empty key or a key given twice (keys compare case-insensitively).
    public static func attributes(_ arguments: [String]) throws(InvalidArgument) -> [String: String?] {
        var result: [String: String?] = [:]
        var seen: Set<String> = []
        for argument in arguments {
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0])
            guard !key.isEmpty else { throw InvalidArgument(description: "TXT entry \"\(argument)\" has no key") }
            guard seen.insert(key.lowercased()).inserted else {
                throw InvalidArgument(
                    description: "TXT key \"\(key)\" is given twice (keys are case-insensitive, RFC 6763 §6.4)")
            }
            result.updateValue(parts.count > 1 ? String(parts[1]) : nil, forKey: key)
        }
        return result
    }

    /// The TXT strings of a service for text output: every raw string in wire order when `txtRaw` is present (bytes
    /// that are not printable UTF-8 as `\xHH`, a backslash as `\\`), else `key=value` or `key` sorted by key.
    public static func display(_ service: DNSSDService) -> [String] {
        if let raw = service.txtRaw {
            return raw.map(escaped)
        }
        return service.txt.sorted { $0.key < $1.key }.map { key, value in
            value.map { escaped(Array("\(key)=\($0)".utf8)) } ?? escaped(Array(key.utf8))
        }
    }

    /// A string's bytes with control characters, a backslash and anything that is not UTF-8 escaped.
    static func escaped(_ bytes: [UInt8]) -> String {
        var text = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 0
            if length > 1, index + length <= bytes.count,
                let scalar = String(validating: bytes[index..<(index + length)], as: UTF8.self)
            {
                text += scalar
                index += length
                continue
            }
            switch byte {
            case UInt8(ascii: "\\"): text += "\\\\"
            case 0x20...0x7E: text.unicodeScalars.append(Unicode.Scalar(byte))
            default: text += "\\x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
            }
            index += 1
        }
        return text
    }
}
