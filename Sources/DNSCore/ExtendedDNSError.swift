/// An Extended DNS Error (RFC 8914): one the stub sends, or one an upstream's reply carried.
public struct ExtendedDNSError: Sendable, Hashable, CustomStringConvertible {
    public var code: UInt16
    public var text: String

    public init(code: UInt16, text: String) {
        self.code = code
        self.text = text
    }

    /// 0 Other.
    public static func other(_ text: String) -> ExtendedDNSError { .init(code: 0, text: text) }
    /// 3 Stale Answer (RFC 8767 answers).
    public static func staleAnswer(_ text: String) -> ExtendedDNSError { .init(code: 3, text: text) }
    /// 18 Prohibited (the client is not allowed).
    public static func prohibited(_ text: String) -> ExtendedDNSError { .init(code: 18, text: text) }
    /// 22 No Reachable Authority (every upstream timed out).
    public static func noReachableAuthority(_ text: String) -> ExtendedDNSError { .init(code: 22, text: text) }
    /// 23 Network Error (an upstream or avahi-daemon failed).
    public static func networkError(_ text: String) -> ExtendedDNSError { .init(code: 23, text: text) }
    /// 21 Not Supported.
    public static func notSupported(_ text: String) -> ExtendedDNSError { .init(code: 21, text: text) }
    /// A DNSSEC failure (RFC 8914 §4.7–4.13: 6 Bogus, 7 Signature Expired, 8 Not Yet Valid, 9 DNSKEY Missing,
    /// 10 RRSIGs Missing, 12 NSEC Missing).
    public static func dnssec(_ code: UInt16, _ text: String) -> ExtendedDNSError { .init(code: code, text: text) }

    /// The code's name in the IANA registry ("Extended DNS Error Codes"), as dig and kdig print it; nil for a code
    /// the registry did not have when this was written.
    public var name: String? { Int(code) < Self.names.count ? Self.names[Int(code)] : nil }

    /// `6 (DNSSEC Bogus): text`, dig's form after its `EDE: `.
    public var description: String {
        let name = self.name.map { " (\($0))" } ?? ""
        return text.isEmpty ? "\(code)\(name)" : "\(code)\(name): \(text)"
    }

    private static let names = [
        "Other", "Unsupported DNSKEY Algorithm", "Unsupported DS Digest Type", "Stale Answer", "Forged Answer",
        "DNSSEC Indeterminate", "DNSSEC Bogus", "Signature Expired", "Signature Not Yet Valid", "DNSKEY Missing",
        "RRSIGs Missing", "No Zone Key Bit Set", "NSEC Missing", "Cached Error", "Not Ready", "Blocked", "Censored",
        "Filtered", "Prohibited", "Stale NXDOMAIN Answer", "Not Authoritative", "Not Supported",
        "No Reachable Authority", "Network Error", "Invalid Data", "Signature Expired before Valid", "Too Early",
        "Unsupported NSEC3 Iterations Value", "Unable to conform to policy", "Synthesized", "Invalid Query Type",
    ]

    /// The most of an EXTRA-TEXT kept, in bytes; a longer one is cut before a character to end in "…" within them.
    /// RFC 8914 sets no limit, and a text travels on into the stub's replies (400 bytes at most there), the API's
    /// errors and log lines.
    public static let maximumTextBytes = 512

    /// The EDE options (code 15) among an OPT record's options (`options`: its RDATA), in order. Never traps: an
    /// option cut short ends the scan, keeping what came before it (ldns accepts such an OPT, so a reply is not
    /// refused for it). The EXTRA-TEXT is an upstream's words, read as UTF-8 with invalid bytes replaced, NULs at
    /// its end dropped (some servers end it with one), at most ``maximumTextBytes`` of it (a longer one cut before
    /// a character, never inside one, and ended in "…"), and control characters written as dig writes them
    /// (`\010`), so it never reaches a terminal or a log line raw.
    public static func scan(options: UnsafeBufferPointer<UInt8>) -> [ExtendedDNSError] {
        scanOptions(options).errors
    }

    /// ``scan(options:)``'s errors, and the length of the first PADDING option (RFC 7830; code 12), in one walk
    /// of the options: what `discover query` shows of a reply's EDNS, as kdig does.
    public static func scanOptions(
        _ options: UnsafeBufferPointer<UInt8>
    ) -> (errors: [ExtendedDNSError], padding: Int?) {
        var found: [ExtendedDNSError] = []
        var padding: Int?
        var at = 0
        while at + 4 <= options.count {
            let code = Int(options[at]) << 8 | Int(options[at + 1])
            let size = Int(options[at + 2]) << 8 | Int(options[at + 3])
            let value = at + 4
            guard value + size <= options.count else { break }
            if code == 12, padding == nil { padding = size }
            if code == 15, size >= 2 {
                var textEnd = value + size
                while textEnd > value + 2, options[textEnd - 1] == 0 { textEnd -= 1 }
                let whole = options[(value + 2)..<textEnd]
                let kept = UTF8Cut.end(of: whole, limit: maximumTextBytes)
                let bytes = UnsafeBufferPointer(rebasing: options[(value + 2)..<(kept ?? textEnd)])
                let text = String(decoding: bytes, as: UTF8.self) + (kept == nil ? "" : "…")
                let info = UInt16(options[value]) << 8 | UInt16(options[value + 1])
                found.append(ExtendedDNSError(code: info, text: escapingControls(text)))
            }
            at = value + size
        }
        return (found, padding)
    }

    /// `text` with each control character (C0, DEL) as `\DDD`, as dig presents non-printable octets.
    private static func escapingControls(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                let digits = String(scalar.value)
                out += "\\" + String(repeating: "0", count: 3 - digits.count) + digits
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
