import DNSCore

/// The key of a cache entry: an absolute, lowercased owner name, a record type and a class.
///
/// Names are compared case-insensitively for ASCII letters only (RFC 4343 §3); other bytes are kept as given.
/// The name is stored in presentation format and always ends with a dot (absolute).
public struct CacheKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The lowercased absolute owner name, e.g. `"www.example.com."`.
    public let name: String
    /// The record type (RFC 1035 §3.2.2), e.g. 65 for HTTPS, 1 for A, 28 for AAAA.
    public let type: UInt16
    /// The record class (RFC 1035 §3.2.4); 1 is IN.
    public let dnsClass: UInt16
    /// The key's hash, computed once (Swift's seeded SipHash, as for any `Hashable`): the keys a kept reply
    /// revalidates on every call, and a key looked up several times, are not hashed again. 32 bits fit in the
    /// padding after `dnsClass`, so a key stays 24 bytes (100 000 cache entries, 262 144 dictionary buckets).
    private let fingerprint: UInt32

    /// Creates a key, normalizing `name` to lowercase and absolute form.
    ///
    /// - Parameters:
    ///   - name: A domain name in presentation format, with or without the trailing dot.
    ///   - type: The record type number.
    ///   - dnsClass: The record class number; defaults to IN (1).
    public init(name: String, type: UInt16, dnsClass: UInt16 = 1) {
        self.init(normalizedName: DomainName.normalize(name), type: type, dnsClass: dnsClass)
    }

    /// A key for `name`, normalised here unless `isNormalized` says it is lowercased and absolute already (an alias
    /// target the chain normalised, or a name decoded from the wire: ``WalkOptions/nameIsNormalized``).
    init(name: String, isNormalized: Bool, type: UInt16, dnsClass: UInt16) {
        if isNormalized {
            self.init(normalizedName: name, type: type, dnsClass: dnsClass)
        } else {
            self.init(name: name, type: type, dnsClass: dnsClass)
        }
    }

    /// Creates a key for a name that is lowercased and absolute already (an alias target the chain normalised).
    init(normalizedName name: String, type: UInt16, dnsClass: UInt16) {
        assert(DomainName.normalize(name) == name, "\(name) is not normalised")
        self.name = name
        self.type = type
        self.dnsClass = dnsClass
        var hasher = Hasher()
        hasher.combine(self.name)
        hasher.combine(type)
        hasher.combine(dnsClass)
        self.fingerprint = UInt32(truncatingIfNeeded: hasher.finalize())
    }

    public static func == (lhs: CacheKey, rhs: CacheKey) -> Bool {
        lhs.fingerprint == rhs.fingerprint && lhs.type == rhs.type && lhs.dnsClass == rhs.dnsClass
            && lhs.name == rhs.name
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(fingerprint)
    }

    public var description: String { "\(name) \(dnsClass) \(type)" }

    private enum CodingKeys: String, CodingKey {
        case name
        case type
        case dnsClass = "class"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        // Normalize again: a persisted file is input like any other.
        self.init(
            name: try container.decode(String.self, forKey: .name),
            type: try container.decode(UInt16.self, forKey: .type),
            dnsClass: try container.decode(UInt16.self, forKey: .dnsClass)
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(type, forKey: .type)
        try container.encode(dnsClass, forKey: .dnsClass)
    }
}

/// Helpers for domain names in presentation format, shared by the cache key and the opt-out list.
enum DomainName {
    /// Lowercases ASCII letters (RFC 4343 §3) and appends the root dot if missing.
    static func normalize(_ name: String) -> String {
        // Fast path (every stub query and API call): already lowercase and absolute, nothing to copy.
        if let normalized = name.utf8.withContiguousStorageIfAvailable({ isNormalized($0) }), normalized { return name }
        var bytes = Array(name.utf8)
        for index in bytes.indices where bytes[index] >= UInt8(ascii: "A") && bytes[index] <= UInt8(ascii: "Z") {
            bytes[index] += 32
        }
        if bytes.last != UInt8(ascii: ".") || endsWithEscapedDot(bytes) {
            bytes.append(UInt8(ascii: "."))
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Lowercase (ASCII) and ending in an unescaped dot.
    private static func isNormalized(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let last = bytes.last, last == UInt8(ascii: ".") else { return false }
        for byte in bytes where byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { return false }
        return bytes.count < 2 || bytes[bytes.count - 2] != UInt8(ascii: "\\")
    }

    /// The byte offsets at which each label of an absolute name starts, honouring `\.` escapes (RFC 1035 §5.1).
    ///
    /// For `"www.example.com."` this is `[0, 4, 12]`; the root name `"."` has no labels.
    static func labelStarts(_ bytes: some Collection<UInt8>) -> [Int] {
        var starts: [Int] = []
        var atLabelStart = true
        var escaped = false
        for (offset, byte) in bytes.enumerated() {
            if atLabelStart {
                if byte == UInt8(ascii: ".") && !escaped { continue }  // root or empty label
                starts.append(offset)
                atLabelStart = false
            }
            if escaped {
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: ".") {
                atLabelStart = true
            }
        }
        return starts
    }

    /// Whether the final dot is escaped (`"a\."`), which makes it part of a label rather than the root.
    private static func endsWithEscapedDot(_ bytes: [UInt8]) -> Bool {
        var backslashes = 0
        var index = bytes.count - 2
        while index >= 0 && bytes[index] == UInt8(ascii: "\\") {
            backslashes += 1
            index -= 1
        }
        return backslashes % 2 == 1
    }
}
