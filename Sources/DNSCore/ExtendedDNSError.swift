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

    /// One EDE option's data (`value`: INFO-CODE, then EXTRA-TEXT; RFC 8914 §2); nil when it is shorter than its
    /// code. The EXTRA-TEXT is an upstream's words, read as UTF-8 with invalid bytes replaced, NULs at its end
    /// dropped (some servers end it with one), at most ``maximumTextBytes`` of it (a longer one cut before a
    /// character, never inside one, and ended in "…"), and control characters written as dig writes them
    /// (`\010`), so it never reaches a terminal or a log line raw. `EDNSInfo.init(...options:)` finds the options.
    static func read(_ value: Slice<UnsafeBufferPointer<UInt8>>) -> ExtendedDNSError? {
        guard value.count >= 2 else { return nil }
        let start = value.startIndex
        var textEnd = value.endIndex
        while textEnd > start + 2, value[textEnd - 1] == 0 { textEnd -= 1 }
        let kept = UTF8Cut.end(of: value[(start + 2)..<textEnd], limit: maximumTextBytes)
        let bytes = UnsafeBufferPointer(rebasing: value[(start + 2)..<(kept ?? textEnd)])
        let text = String(decoding: bytes, as: UTF8.self) + (kept == nil ? "" : "…")
        let info = UInt16(value[start]) << 8 | UInt16(value[start + 1])
        return ExtendedDNSError(code: info, text: escapingControls(text))
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
