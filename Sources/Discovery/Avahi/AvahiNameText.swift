import DNSCore
import DNSSDModel

// Names of mDNS records as Avahi takes and gives them. The parsing, the canonical text and the wire form are
// DNSCore's (`DNSName.parseLabels`, `DNSName.canonicalText`), shared with the resolver and wide-area DNS-SD; only
// Avahi's own escaped form is here.
extension DNSName {
    /// The labels of a record name as Avahi and DNS-SD write it: presentation format with escapes, where UTF-8 and
    /// spaces stand for themselves (instance names, RFC 6763 §4.1.1); case kept; the root alone is refused.
    /// - Throws: `invalidName` saying what is wrong.
    static func recordLabels(_ text: String) throws(DNSSDError) -> [[UInt8]] {
        let labels: [[UInt8]]
        do {
            labels = try parseLabels(text, syntax: .liberal)
        } catch {
            throw DNSSDError(.invalidName, "invalid name \"\(text)\": \(error.reason)")
        }
        guard !labels.isEmpty else { throw DNSSDError(.invalidName, "invalid name \"\(text)\": the name is empty") }
        return labels
    }

    /// The text Avahi's API takes for a name (`avahi_escape_label` per label, no trailing dot): letters, digits,
    /// `-` and `_` kept, `.` and `\` escaped with a backslash, every other byte as `\DDD`.
    /// - Throws: `invalidName` for a NUL byte, which Avahi's unescaping refuses.
    static func avahiText(_ labels: [[UInt8]]) throws(DNSSDError) -> String {
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

    /// `\DDD` for a byte.
    private static func decimal(_ byte: UInt8) -> [UInt8] {
        [
            UInt8(ascii: "\\"), UInt8(ascii: "0") + byte / 100, UInt8(ascii: "0") + byte / 10 % 10,
            UInt8(ascii: "0") + byte % 10,
        ]
    }
}
