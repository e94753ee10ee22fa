import DNSCore
import Foundation
import Logging
import Resolver

/// The domains a network recommends, found under `_dns-sd._udp` of each search domain (RFC 6763 §11).
public struct EnumeratedDomains: Hashable, Sendable {
    /// `b`: domains to offer for browsing.
    public var browse: [String] = []
    /// `db`: the default browse domain.
    public var defaultBrowse: [String] = []
    /// `lb`: domains to browse when no domain is given ("legacy browsing").
    public var legacyBrowse: [String] = []
    /// `r`: domains to offer for registration.
    public var registration: [String] = []
    /// `dr`: the default registration domain.
    public var defaultRegistration: [String] = []

    public init() {}

    /// Every browse domain (`b`, `db`, `lb`), sorted, without duplicates.
    public var allBrowse: [String] { Array(Set(browse + defaultBrowse + legacyBrowse)).sorted() }
}

/// Asks `b`, `db`, `lb`, `r` and `dr` `._dns-sd._udp.BASE` for PTRs naming domains.
enum DomainEnumeration {
    /// The enumeration records under every base domain (search domains and configured browse domains).
    static func enumerate(bases: [String], source: any RecordSource, logger: Logger) async -> EnumeratedDomains {
        var result = EnumeratedDomains()
        let kinds: [(String, WritableKeyPath<EnumeratedDomains, [String]>)] = [
            ("b", \.browse), ("db", \.defaultBrowse), ("lb", \.legacyBrowse), ("r", \.registration),
            ("dr", \.defaultRegistration),
        ]
        for base in Set(bases.map(WideAreaDomain.normalized)).sorted() where WideAreaDomain.isUnicast(base) {
            for (label, path) in kinds {
                let name = "\(label)._dns-sd._udp.\(base)."
                do {
                    let set = try await source.records(name, type: .ptr, fresh: false)
                    for record in set.records {
                        guard let labels = try? DNSName.labels(wire: record.rdata), !labels.isEmpty else { continue }
                        let domain = labels.map { String(decoding: DNSName.lowercased(label: $0), as: UTF8.self) }
                            .joined(separator: ".")
                        if !result[keyPath: path].contains(domain) { result[keyPath: path].append(domain) }
                    }
                } catch {
                    logger.debug("domain enumeration failed", metadata: ["dns.name": "\(name)", "error": "\(error)"])
                }
            }
        }
        return result
    }
}

/// The search domains of a resolv.conf (`search` and `domain` lines; the last one of them wins, as in glibc).
public enum ResolvConf {
    /// The search domains in `text`, normalised.
    public static func searchDomains(_ text: String) -> [String] {
        var domains: [String] = []
        for line in text.split(whereSeparator: \.isNewline) {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let keyword = fields.first, keyword == "search" || keyword == "domain" else { continue }
            domains = fields.dropFirst().prefix { !$0.hasPrefix("#") && !$0.hasPrefix(";") }
                .map { WideAreaDomain.normalized(String($0)) }.filter { !$0.isEmpty }
        }
        return domains
    }

    /// The search domains of the file at `path` (none when it cannot be read).
    public static func searchDomains(path: String = "/etc/resolv.conf") -> [String] {
        (try? String(contentsOfFile: path, encoding: .utf8)).map { searchDomains($0) } ?? []
    }
}
