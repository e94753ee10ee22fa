import DNSCore

/// An alias chain could not be followed.
public struct AliasChainError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Why the chain was abandoned.
    public enum Code: String, Hashable, Sendable {
        /// A name appeared twice.
        case loop
        /// More hops than the limit.
        case tooLong
    }

    /// Why the chain was abandoned.
    public var code: Code
    /// The chain up to and including the name that broke it.
    public var chain: [String]

    /// Creates an error.
    public init(_ code: Code, chain: [String]) {
        self.code = code
        self.chain = chain
    }

    public var description: String { "alias chain \(code.rawValue): \(chain.joined(separator: " -> "))" }
}

/// The names visited while following CNAMEs and HTTPS AliasMode records, with a hop limit and loop detection.
///
/// RFC 9460 §2.4.2 and §3: AliasMode and CNAME chains are followed like CNAMEs, and clients bound them
/// (RFC 9460 §3 suggests treating a chain like a CNAME chain; we allow 8 hops by default).
public struct AliasChain: Hashable, Sendable {
    /// Default number of hops (CNAMEs plus AliasMode records) before giving up.
    public static let defaultMaximumHops = 8

    /// Every name visited, lowercased and absolute, starting with the queried name.
    public private(set) var names: [String]
    /// The largest number of `follow(to:)` calls allowed.
    public let maximumHops: Int

    /// Starts a chain at `name`.
    public init(start name: String, maximumHops: Int = defaultMaximumHops) {
        self.init(normalizedStart: DNSName.normalized(name), maximumHops: maximumHops)
    }

    /// Starts a chain at `name`, normalised here unless `isNormalized` says it is a valid name lowercased and
    /// absolute already (``WalkOptions/nameIsNormalized``).
    init(start name: String, isNormalized: Bool, maximumHops: Int) {
        if isNormalized {
            self.init(normalizedStart: name, maximumHops: maximumHops)
        } else {
            self.init(start: name, maximumHops: maximumHops)
        }
    }

    /// Starts a chain at a name that is lowercased and absolute already (another chain's `current`).
    init(normalizedStart name: String, maximumHops: Int) {
        self.names = [name]
        self.maximumHops = maximumHops
    }

    /// The name to query next.
    public var current: String { names[names.count - 1] }

    /// The aliases followed so far (every name after the first), as the API's `aliasChain`.
    public var aliases: [String] { Array(names.dropFirst()) }

    /// Follows one alias to `target`.
    ///
    /// - Throws: `AliasChainError` with `.loop` when `target` was already visited, `.tooLong` when the hop
    ///   limit is exceeded.
    public mutating func follow(to target: String) throws(AliasChainError) {
        let name = DNSName.normalized(target)
        if names.contains(name) { throw AliasChainError(.loop, chain: names + [name]) }
        if names.count > maximumHops { throw AliasChainError(.tooLong, chain: names + [name]) }
        names.append(name)
    }

    /// Follows CNAME records inside one answer section, starting at `current`, until records of `type` are
    /// found or the chain leaves the answer.
    ///
    /// - Parameters:
    ///   - type: the queried type; CNAMEs are followed unless `type` is CNAME itself.
    ///   - answers: the answer section.
    /// - Returns: the records of `type` owned by the final name; empty when the answer ends with a CNAME
    ///   whose target must be queried next (then `current` is that target) or has no data (NODATA).
    /// - Throws: `AliasChainError` for a CNAME loop or a chain over the limit; a CNAME with unreadable data
    ///   ends the chain as if absent.
    public mutating func followCNAMEs(type: RRType, in answers: [ResourceRecord]) throws(AliasChainError)
        -> [ResourceRecord]
    {
        while true {
            let owner = current
            let matching = answers.filter { $0.name == owner && $0.type == type }
            if !matching.isEmpty || type == .cname { return matching }
            guard let cname = answers.first(where: { $0.name == owner && $0.type == .cname }),
                let target = try? cname.cnameTarget()
            else { return [] }
            try follow(to: target)
        }
    }
}

/// The owner name to query for HTTPS records of an origin (RFC 9460 §9.1).
public enum HTTPSQueryName {
    /// `name` for port 443, otherwise `_PORT._https.name` (RFC 9460 §9.1 and §2.3 "Port prefix naming").
    ///
    /// - Parameters:
    ///   - host: the origin's host name.
    ///   - port: the origin's port.
    /// - Returns: the query name, lowercased and absolute.
    /// - Throws: `InvalidNameError` when `host` is not a valid name or the prefixed name would be too long.
    public static func make(host: String, port: UInt16 = 443) throws(InvalidNameError) -> String {
        let name = try DNSName(host)
        if port == 443 { return name.text }
        do {
            return try name.prepending("_\(port)._https").text
        } catch {
            throw InvalidNameError(name: host, reason: error.reason)
        }
    }
}
