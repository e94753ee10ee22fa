#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Text forms of IP addresses taken from wire bytes.
package enum IPAddressText {
    /// The canonical text of an IPv4 or IPv6 address literal, or nil when `text` is not one. Accepted: dotted
    /// quads, RFC 4291 IPv6 text, optionally in brackets and with a `%zone` (kept as given).
    package static func literal(_ text: String) -> String? {
        var text = Substring(text)
        if text.hasPrefix("["), text.hasSuffix("]") { text = text.dropFirst().dropLast() }
        guard !text.isEmpty, text.utf8.count < 64 else { return nil }
        var v4 = in_addr()
        if !text.contains(":") {
            guard inet_pton(AF_INET, String(text), &v4) == 1 else { return nil }
            return withUnsafeBytes(of: &v4) { ipv4($0) }
        }
        var zone = ""
        if let percent = text.firstIndex(of: "%") {
            zone = String(text[percent...])
            guard zone.count > 1 else { return nil }
            text = text[..<percent]
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, String(text), &v6) == 1 else { return nil }
        return withUnsafeBytes(of: &v6) { ipv6($0) } + zone
    }

    /// Dotted-quad text of 4 bytes, e.g. `192.0.2.1`.
    package static func ipv4<C: Collection<UInt8>>(_ bytes: C) -> String {
        bytes.map { String($0) }.joined(separator: ".")
    }

    /// RFC 5952 text of 16 bytes: lowercase hex, no leading zeros, the longest run (≥ 2) of zero groups
    /// compressed to `::` (first one on a tie), and IPv4-mapped addresses as `::ffff:a.b.c.d` (RFC 5952 §5).
    package static func ipv6<C: Collection<UInt8>>(_ collection: C) -> String {
        let bytes = Array(collection)
        guard bytes.count == 16 else { return "" }
        var groups: [UInt16] = []
        for index in stride(from: 0, to: 16, by: 2) {
            groups.append(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]))
        }
        if groups[0..<5].allSatisfy({ $0 == 0 }) && groups[5] == 0xFFFF {
            return "::ffff:" + ipv4(bytes[12..<16])
        }
        var bestStart = -1
        var bestLength = 0
        var runStart = -1
        for index in 0...8 {
            if index < 8 && groups[index] == 0 {
                if runStart < 0 { runStart = index }
            } else if runStart >= 0 {
                let length = index - runStart
                if length > bestLength {
                    bestStart = runStart
                    bestLength = length
                }
                runStart = -1
            }
        }
        if bestLength < 2 { bestStart = -1 }
        var out = ""
        var index = 0
        while index < 8 {
            if index == bestStart {
                out += "::"
                index += bestLength
                continue
            }
            if !out.isEmpty && !out.hasSuffix(":") { out += ":" }
            out += String(groups[index], radix: 16)
            index += 1
        }
        return out
    }

    /// Whether `text` looks like an IPv6 address (contains a colon); used only to split families.
    package static func isIPv6(_ text: String) -> Bool { text.contains(":") }
}

/// Standard base64 (RFC 4648 §4) with padding, without Foundation.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Encodes bytes as padded base64.
    package static func encode<C: Collection<UInt8>>(_ collection: C) -> String {
        let bytes = Array(collection)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(alphabet[Int(value >> 6 & 63)])
            out.append(alphabet[Int(value & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let value = UInt32(bytes[index]) << 16
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(contentsOf: "==".utf8)
        } else if rest == 2 {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(alphabet[Int(value >> 6 & 63)])
            out.append(UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded base64 (RFC 4648 §4); nil for anything else: another alphabet, missing or stray padding,
    /// blanks, or bits left over in the last character.
    package static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard !characters.isEmpty, characters.count % 4 == 0 else { return nil }
        let padding = characters.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(characters.count / 4 * 3)
        var value: UInt32 = 0
        for (index, character) in characters.dropLast(padding).enumerated() {
            guard let digit = alphabet.firstIndex(of: character) else { return nil }
            value = value << 6 | UInt32(digit)
            if index % 4 == 3 {
                out += [UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
                value = 0
            }
        }
        switch padding {
        case 1:
            guard value & 0x3 == 0 else { return nil }
            out += [UInt8(value >> 10 & 0xff), UInt8(value >> 2 & 0xff)]
        case 2:
            guard value & 0xf == 0 else { return nil }
            out.append(UInt8(value >> 4 & 0xff))
        default: break
        }
        return out
    }
}
