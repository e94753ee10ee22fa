import DNSSDModel

/// Domain names as text: parsing presentation format into labels, and writing labels back either in the canonical
/// form `MDNSRecord.name` uses or in the escaped form Avahi's API takes.
enum DNSNameText {
    /// Longest name in wire format (RFC 1035 §2.3.4), length bytes and root label included.
    static let maximumWireLength = 255
    /// Longest label (RFC 1035 §2.3.4).
    static let maximumLabelLength = 63

    /// The labels of a name in presentation format (RFC 1035 §5.1): `.` separates labels, `\X` is the byte X and
    /// `\DDD` the byte with decimal value DDD. A trailing dot is optional; the root name alone is refused.
    /// - Throws: `invalidName` saying what is wrong.
    static func labels(_ text: String) throws(DNSSDError) -> [[UInt8]] {
        func fail(_ reason: String) -> DNSSDError {
            DNSSDError(.invalidName, "invalid name \"\(text)\": \(reason)")
        }
        let bytes = Array(text.utf8)
        var labels: [[UInt8]] = []
        var label: [UInt8] = []
        var index = 0
        var labelStarted = false
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "."):
                guard labelStarted else { throw fail("empty label") }
                labels.append(label)
                label = []
                labelStarted = false
                continue
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw fail("ends with a lone backslash") }
                if let value = decimalEscape(bytes, at: index) {
                    guard value <= 255 else { throw fail("\\DDD escape above 255") }
                    label.append(UInt8(value))
                    index += 3
                } else if isDigit(bytes[index]) {
                    throw fail("\\DDD escape needs three digits")
                } else {
                    label.append(bytes[index])
                    index += 1
                }
            default:
                label.append(byte)
            }
            labelStarted = true
            guard label.count <= maximumLabelLength else {
                throw fail("a label is longer than \(maximumLabelLength) bytes")
            }
        }
        if labelStarted { labels.append(label) }
        guard !labels.isEmpty else { throw fail("the name is empty") }
        let wireLength = labels.reduce(1) { $0 + 1 + $1.count }
        guard wireLength <= maximumWireLength else {
            throw fail("\(wireLength) bytes in wire format; at most \(maximumWireLength) allowed")
        }
        return labels
    }

    /// The canonical text of a name: absolute (trailing dot), ASCII letters lowercased, printable ASCII kept except
    /// `"().;@$\` (escaped with a backslash, as BIND and ldns print them), every other byte as `\DDD`.
    static func canonical(_ labels: [[UInt8]]) -> String {
        var text: [UInt8] = []
        for label in labels {
            for byte in label {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                    text.append(byte + 32)
                case UInt8(ascii: "\""), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "."), UInt8(ascii: ";"),
                    UInt8(ascii: "@"), UInt8(ascii: "$"), UInt8(ascii: "\\"):
                    text += [UInt8(ascii: "\\"), byte]
                case 0x21...0x7E:
                    text.append(byte)
                default:
                    text += decimal(byte)
                }
            }
            text.append(UInt8(ascii: "."))
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The text Avahi's API takes for a name (`avahi_escape_label` per label, no trailing dot): letters, digits,
    /// `-` and `_` kept, `.` and `\` escaped with a backslash, every other byte as `\DDD`.
    /// - Throws: `invalidName` for a NUL byte, which Avahi's unescaping refuses.
    static func avahi(_ labels: [[UInt8]]) throws(DNSSDError) -> String {
        var text: [UInt8] = []
        for (position, label) in labels.enumerated() {
            if position > 0 { text.append(UInt8(ascii: ".")) }
            for byte in label {
                switch byte {
                case 0:
                    throw DNSSDError(.invalidName, "Avahi cannot look up a name with a NUL byte in a label")
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    text.append(byte)
                case UInt8(ascii: "."), UInt8(ascii: "\\"):
                    text += [UInt8(ascii: "\\"), byte]
                default:
                    text += decimal(byte)
                }
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// The value of `DDD` at `index`, if three digits follow.
    private static func decimalEscape(_ bytes: [UInt8], at index: Int) -> Int? {
        guard index + 2 < bytes.count else { return nil }
        let digits = bytes[index...(index + 2)]
        guard digits.allSatisfy(isDigit) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    /// `\DDD` for a byte.
    private static func decimal(_ byte: UInt8) -> [UInt8] {
        [
            UInt8(ascii: "\\"), UInt8(ascii: "0") + byte / 100, UInt8(ascii: "0") + byte / 10 % 10,
            UInt8(ascii: "0") + byte % 10,
        ]
    }
}
