import DNSCore
import Foundation

/// A TSIG key (RFC 8945): algorithm, key name and base64 secret, as `nsupdate -y [ALG:]NAME:SECRET` takes it.
public struct TSIGKey: Hashable, Sendable, CustomStringConvertible {
    /// Algorithms ldns signs with, by their `-y` names.
    public static let algorithms: [String: String] = [
        "hmac-md5": "hmac-md5.sig-alg.reg.int.", "hmac-sha1": "hmac-sha1.", "hmac-sha224": "hmac-sha224.",
        "hmac-sha256": "hmac-sha256.", "hmac-sha384": "hmac-sha384.", "hmac-sha512": "hmac-sha512.",
    ]

    /// The algorithm's domain name, e.g. `hmac-sha256.`.
    public var algorithm: String
    /// The key name, absolute and lowercased, e.g. `discoverd-lab-key.`.
    public var name: String
    /// The secret, base64 as configured.
    public var secret: String

    /// Parses `[ALG:]NAME:SECRET`; the algorithm defaults to hmac-sha256.
    /// - Throws: `invalidParameter` naming the part that is wrong (never echoing the secret).
    public init(parsing text: String) throws(WideAreaError) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3 else {
            throw WideAreaError(.invalidParameter, "TSIG key: expected [ALG:]NAME:SECRET")
        }
        let algorithmName = parts.count == 3 ? parts[0].lowercased() : "hmac-sha256"
        guard let algorithm = Self.algorithms[algorithmName] else {
            let known = Self.algorithms.keys.sorted().joined(separator: ", ")
            throw WideAreaError(.invalidParameter, "TSIG key: unknown algorithm '\(algorithmName)' (known: \(known))")
        }
        let name = parts[parts.count - 2]
        let secret = parts[parts.count - 1]
        guard !name.isEmpty else { throw WideAreaError(.invalidParameter, "TSIG key: empty key name") }
        guard let decoded = Data(base64Encoded: secret), !decoded.isEmpty else {
            throw WideAreaError(.invalidParameter, "TSIG key '\(name)': the secret is not base64")
        }
        self.algorithm = algorithm
        self.name = WideAreaDomain.normalized(name) + "."
        self.secret = secret
    }

    /// The key without its secret, for logs and errors.
    public var description: String { "\(name) (\(algorithm.dropLast()))" }
}

/// TSIG keys by domain: `key = [ALG:]NAME:SECRET` for every domain, `key = DOMAIN [ALG:]NAME:SECRET` for DOMAIN
/// and its subdomains. The most specific domain wins.
public struct TSIGKeyTable: Hashable, Sendable {
    /// The key for domains without their own.
    public var defaultKey: TSIGKey?
    /// Keys by normalised domain.
    public var byDomain: [String: TSIGKey] = [:]

    public init(defaultKey: TSIGKey? = nil, byDomain: [String: TSIGKey] = [:]) {
        self.defaultKey = defaultKey
        self.byDomain = byDomain
    }

    /// Adds one `key` setting: `[ALG:]NAME:SECRET` or `DOMAIN [ALG:]NAME:SECRET`.
    /// - Throws: `invalidParameter`.
    public mutating func add(parsing value: String) throws(WideAreaError) {
        let fields = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        switch fields.count {
        case 1: defaultKey = try TSIGKey(parsing: fields[0])
        case 2: byDomain[WideAreaDomain.normalized(fields[0])] = try TSIGKey(parsing: fields[1])
        default: throw WideAreaError(.invalidParameter, "TSIG key: expected [DOMAIN] [ALG:]NAME:SECRET")
        }
    }

    /// Adds a key read from a key file, for `domain` (and its subdomains) or, when nil, as the default key.
    public mutating func add(_ key: TSIGKey, domain: String?) {
        if let domain { byDomain[WideAreaDomain.normalized(domain)] = key } else { defaultKey = key }
    }

    /// This table with the default key given to each of `domains` that has no key of its own, and no default key
    /// left: a key then signs only for domains named in the configuration.
    public func scoped(to domains: [String]) -> TSIGKeyTable {
        guard let defaultKey else { return self }
        var scoped = TSIGKeyTable(byDomain: byDomain)
        for domain in domains.map(WideAreaDomain.normalized) where scoped.byDomain[domain] == nil {
            scoped.byDomain[domain] = defaultKey
        }
        return scoped
    }

    /// The key for `domain`: its own, its closest parent's, else the default.
    public func key(for domain: String) -> TSIGKey? {
        var name = WideAreaDomain.normalized(domain)
        while true {
            if let key = byDomain[name] { return key }
            guard let dot = name.firstIndex(of: ".") else { return defaultKey }
            name = String(name[name.index(after: dot)...])
        }
    }
}
