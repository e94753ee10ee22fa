/// `[resolver] encryption`: which upstreams may be asked in clear text (named like resolved's `DNSOverTLS=`).
public enum EncryptionMode: String, Sendable, Hashable, CaseIterable, Codable {
    /// Every upstream is reached encrypted (written as DoT or DoH, or upgraded by verified DDR), or not used.
    case strict
    /// DoT and DoH upstreams are always verified; plain ones are upgraded by DDR when they can be, else plain.
    case opportunistic
    /// Plain DNS only, no DDR; DoT and DoH upstreams written in the configuration are still encrypted.
    case no
}
