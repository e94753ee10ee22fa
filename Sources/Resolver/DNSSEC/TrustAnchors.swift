import CLDNS
import DNSCore
import Foundation

/// A trust anchor file or config line that cannot be used: which file and line, and why.
public struct TrustAnchorError: Error, Sendable, CustomStringConvertible {
    public var source: String
    public var line: Int
    public var reason: String

    public var description: String { "\(source):\(line): \(reason)" }
}

/// Where validation starts and where it must not happen (RFC 7646 negative anchors).
///
/// The closest anchor above a name decides: positive (a DS or DNSKEY set) means the name must be proven from it;
/// negative means it is insecure without looking. A positive anchor below a negative one wins, so a lab can anchor
/// `dnssec.test.` under the default negative `test.`.
public struct TrustAnchors: Sendable, Equatable {
    /// Zone (lowercased, trailing dot) → DS or DNSKEY records.
    public var positive: [String: [ResourceRecord]]
    /// Zones below which nothing is validated.
    public var negative: Set<String>

    public init(positive: [String: [ResourceRecord]] = [:], negative: Set<String> = []) {
        self.positive = positive
        self.negative = negative
    }

    /// The root zone's KSK-2017 (20326) and KSK-2024 (38696) as DS records (https://data.iana.org/root-anchors/).
    public static let rootDS: [ResourceRecord] = [
        "20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D",
        "38696 8 2 683D2D0ACB8C9B712A1948B27F741219298D0A450D612C483AF444A4C0FB2B16",
    ].map { try! parse(". IN DS \($0)", source: "built-in", line: 1) }

    /// systemd-resolved's default negative anchors (RFC 6761 and RFC 6762 names, private-use TLDs, the private
    /// address reverse zones), so names that only exist on a LAN are never SERVFAILed for lacking a DS.
    public static let defaultNegative: Set<String> = {
        var names = [
            "home.arpa", "local", "test", "corp", "home", "internal", "intranet", "lan", "private",
            "10.in-addr.arpa", "168.192.in-addr.arpa", "254.169.in-addr.arpa", "d.f.ip6.arpa", "8.e.f.ip6.arpa",
            "9.e.f.ip6.arpa", "a.e.f.ip6.arpa", "b.e.f.ip6.arpa",
        ]
        names += (16...31).map { "\($0).172.in-addr.arpa" }
        names += (64...127).map { "\($0).100.in-addr.arpa" }
        return Set(names.map { $0 + "." })
    }()

    /// The built-in anchors: the root's KSKs and the default negative anchors.
    public static let builtIn = TrustAnchors(positive: [".": rootDS], negative: defaultNegative)

    /// What the closest anchor at or above `name` says.
    public enum Verdict: Sendable, Equatable {
        case positive(zone: String, records: [ResourceRecord])
        case negative(zone: String)
        case none
    }

    public func closest(_ name: String) -> Verdict {
        // By labels, escapes read: `a\.example.` is one label under the root, not a name below `example.` (a split
        // of the text at its dots would find the anchor of a zone the name is not in). A name that does not parse
        // (none from the wire) meets only the root's anchor.
        let labels = NSECDenial.labels(name) ?? []
        for start in 0...labels.count {
            let zone = DNSName(validatedLabels: Array(labels[start...])).text
            if let records = positive[zone] { return .positive(zone: zone, records: records) }
            if negative.contains(zone) { return .negative(zone: zone) }
        }
        return .none
    }

    /// Adds one DS or DNSKEY record; an anchor given in a file replaces nothing, it joins the zone's set.
    public mutating func add(_ record: ResourceRecord) {
        positive[record.name, default: []].append(record)
    }

    /// Parses one positive anchor line in zone-file syntax (`name [ttl] [IN] DS|DNSKEY …`, resolved's format).
    public static func parse(_ text: String, source: String, line: Int) throws(TrustAnchorError) -> ResourceRecord {
        var rr: UnsafeMutablePointer<ldns_rr>? = nil
        let status = ldns_rr_new_frm_str(&rr, text, 0, nil, nil)
        guard status == LDNS_STATUS_OK, let rr else {
            throw TrustAnchorError(
                source: source, line: line, reason: "not a DS or DNSKEY record: \(String(cString: ldns_get_errorstr_by_id(status)))")
        }
        defer { ldns_rr_free(rr) }
        let type = ldns_rr_get_type(rr).rawValue
        guard type == 43 || type == 48 else {
            throw TrustAnchorError(source: source, line: line, reason: "a trust anchor is a DS or DNSKEY record")
        }
        let buffer = ldns_buffer_new(512)!
        defer { ldns_buffer_free(buffer) }
        guard ldns_rr_rdata2buffer_wire(buffer, rr) == LDNS_STATUS_OK,
            let ownerText = ldns_rdf2str(ldns_rr_owner(rr))
        else { throw TrustAnchorError(source: source, line: line, reason: "cannot encode the record") }
        defer { free(ownerText) }
        let rdata = Array(UnsafeBufferPointer(start: ldns_buffer_begin(buffer), count: ldns_buffer_position(buffer)))
        // Owner names elsewhere are lowercased (`DNSName.text`); ldns keeps the file's case.
        return ResourceRecord(
            name: DNSName.normalized(String(cString: ownerText)), type: RRType(UInt16(type)), ttl: 0, rdata: rdata)
    }

    /// Reads `*.positive` and `*.negative` in `directory` (resolved's dnssec-trust-anchors.d format: `;` comments,
    /// one record or one domain per line); a missing directory is no anchors. Files are read in name order.
    public mutating func load(directory: String) throws(TrustAnchorError) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names.sorted() where name.hasSuffix(".positive") || name.hasSuffix(".negative") {
            let path = (directory as NSString).appendingPathComponent(name)
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw TrustAnchorError(source: path, line: 0, reason: "cannot be read as UTF-8 text")
            }
            for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = raw.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first
                    .map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
                if line.isEmpty { continue }
                if name.hasSuffix(".positive") {
                    add(try Self.parse(line, source: path, line: index + 1))
                } else {
                    try addNegative(line, source: path, line: index + 1)
                }
            }
        }
    }

    /// Adds a negative anchor (a domain name).
    public mutating func addNegative(_ text: String, source: String, line: Int) throws(TrustAnchorError) {
        guard let name = try? DNSName(text) else {
            throw TrustAnchorError(source: source, line: line, reason: "\"\(text)\" is not a domain name")
        }
        negative.insert(name.text)
    }
}
