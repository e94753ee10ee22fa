import DiscoverClient
import Foundation

/// Text rendering of HTTPS/SVCB answers: every SvcParam in presentation format (RFC 9460 §2.1), like kdig.
enum BindingText {
    static func print(_ reply: ResolveHTTPSReply, recordType: String) {
        var source = reply.source.rawValue
        if let stale = reply.staleSeconds { source += " (expired \(stale)s ago, refreshing)" }
        let h3 = recordType == "HTTPS" ? "  h3=\(reply.h3 ? "yes" : "no")" : ""
        Output.line(
            "\(displayName(reply.queryName))  \(recordType)\(h3)  source=\(source)  ttl=\(reply.ttl)"
                + "  dnssec=\(reply.dnssec.rawValue)  \(String(format: "%.1f", reply.timing.totalMs)) ms")
        if !reply.aliasChain.isEmpty {
            Output.line("  via: \(reply.aliasChain.map(displayName).joined(separator: " -> "))")
        }
        for record in reply.records { Output.line("  " + line(record)) }
        if reply.records.isEmpty {
            Output.line(reply.note == nil ? "  (no \(recordType) records)" : "  (no usable \(recordType) records)")
        }
        if let note = reply.note { Output.line("  why: \(note)") }
    }

    /// `PRIORITY TARGET key=value...`, keys in numeric order as in zone files.
    static func line(_ record: ServiceBinding) -> String {
        var fields = ["\(record.priority)", displayName(record.target)]
        if !record.mandatory.isEmpty { fields.append("mandatory=\(record.mandatory.joined(separator: ","))") }
        if !record.alpn.isEmpty { fields.append("alpn=\(record.alpn.map(escapeListItem).joined(separator: ","))") }
        if record.noDefaultAlpn { fields.append("no-default-alpn") }
        if let port = record.port { fields.append("port=\(port)") }
        if !record.ipv4hint.isEmpty { fields.append("ipv4hint=\(record.ipv4hint.joined(separator: ","))") }
        if let ech = record.ech { fields.append("ech=\(ech)") }
        if !record.ipv6hint.isEmpty { fields.append("ipv6hint=\(record.ipv6hint.joined(separator: ","))") }
        if let path = record.dohpath { fields.append("dohpath=\(path)") }
        for unknown in record.unknown.sorted(by: { $0.key < $1.key }) {
            let bytes = Data(base64Encoded: unknown.value).map(Array.init) ?? Array(unknown.value.utf8)
            fields.append("key\(unknown.key)=\(quoted(bytes))")
        }
        return fields.joined(separator: " ")
    }

    /// A `<character-string>` in quotes: printable ASCII as is (`"` and `\` escaped), anything else as `\DDD`.
    static func quoted(_ bytes: [UInt8]) -> String {
        var text = "\""
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): text += "\\" + String(UnicodeScalar(byte))
            case 0x20...0x7E: text += String(UnicodeScalar(byte))
            default: text += "\\" + String(repeating: "0", count: byte < 10 ? 2 : byte < 100 ? 1 : 0) + String(byte)
            }
        }
        return text + "\""
    }

    /// An ALPN id inside a comma-separated list: `,` and `\` are escaped (RFC 9460 Appendix A.1).
    private static func escapeListItem(_ id: String) -> String {
        id.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ",", with: "\\,")
    }
}
