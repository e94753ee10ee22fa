import DNSCore
import Resolver

/// A DNS-SD service instance name `<Instance>.<_type._proto>.<domain>` (RFC 6763 §4.1), kept as raw labels.
///
/// The instance label is arbitrary UTF-8 (spaces, dots, capitals), so it never goes through presentation text
/// that would need escaping, and its case is kept (``DNSName`` lowercases): the name is shown to users as found in
/// the PTR record. Queries use ``queryName``, the lowercased presentation form the resolver's cache keys on.
public struct ServiceInstanceName: Hashable, Sendable {
    /// The instance label as UTF-8 text, e.g. `Web One`.
    public var instance: String
    /// The service type, e.g. `_http._tcp`.
    public var type: String
    /// The domain without trailing dot, lowercased, e.g. `sd.lab.test`.
    public var domain: String

    /// Creates a name from its parts (already validated).
    public init(instance: String, type: String, domain: String) {
        self.instance = instance
        self.type = type
        self.domain = WideAreaDomain.normalized(domain)
    }

    /// The labels in wire order, the instance label with its case.
    public var labels: [[UInt8]] {
        [Array(instance.utf8)] + WideAreaDomain.labels(of: type) + WideAreaDomain.labels(of: domain)
    }

    /// The uncompressed wire form.
    public var wire: [UInt8] { WireName.encode(labels) }

    /// The lowercased, absolute presentation name the resolver is asked for.
    /// - Throws: `invalidParameter` when the name exceeds 255 octets.
    public func queryName() throws(WideAreaError) -> String {
        try WireName.queryText(labels)
    }

    /// The instance named by PTR rdata, when that rdata is `<one label>.<type>.<domain>`; nil for anything else (a
    /// PTR into another type or domain, or bytes that are not a name).
    public static func fromPTR(_ rdata: [UInt8], type: String, domain: String) -> ServiceInstanceName? {
        guard let labels = try? WireName.decode(rdata), labels.count >= 2 else { return nil }
        let expected = WideAreaDomain.labels(of: type) + WideAreaDomain.labels(of: domain)
        let rest = Array(labels.dropFirst())
        guard rest.map(WireName.lowercased) == expected.map(WireName.lowercased), !labels[0].isEmpty else { return nil }
        return ServiceInstanceName(instance: String(decoding: labels[0], as: UTF8.self), type: type, domain: domain)
    }
}

/// Domain names as text: normalising, splitting into labels, telling unicast domains from mDNS ones.
public enum WideAreaDomain {
    /// Lowercased, without trailing dot: `Sd.Lab.Test.` → `sd.lab.test`.
    public static func normalized(_ domain: String) -> String {
        var result = domain.lowercased()
        while result.hasSuffix(".") { result.removeLast() }
        return result
    }

    /// Whether `domain` is DNS-SD over unicast DNS: anything but `local` and its subdomains (RFC 6762 §3), and
    /// the link-local reverse zones mDNS also owns.
    public static func isUnicast(_ domain: String?) -> Bool {
        guard let domain else { return false }
        let name = normalized(domain)
        if name.isEmpty { return false }
        // The one definition of what mDNS owns (DNSCore's LocalZones), shared with the DNS stub.
        return !LocalZones.isLocal(name)
    }

    /// The labels of a dotted name (no escapes: types and domains we build are plain).
    static func labels(of text: String) -> [[UInt8]] {
        normalized(text).split(separator: ".").map { Array($0.utf8) }
    }
}

/// Wire-format names with labels as raw bytes, case kept.
enum WireName {
    static func encode(_ labels: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for label in labels {
            out.append(UInt8(truncatingIfNeeded: label.count))
            out.append(contentsOf: label)
        }
        out.append(0)
        return out
    }

    /// The labels of one uncompressed name filling `bytes` from `offset`; returns them and the offset after it.
    static func read(_ bytes: [UInt8], at offset: Int) throws(WideAreaError) -> (labels: [[UInt8]], next: Int) {
        var labels: [[UInt8]] = []
        var index = offset
        var total = 1
        while true {
            guard index < bytes.count else { throw malformed("name runs past the record") }
            let length = Int(bytes[index])
            if length == 0 { return (labels, index + 1) }
            guard length <= 63 else { throw malformed("compressed or extended label in record data") }
            guard index + 1 + length <= bytes.count else { throw malformed("label runs past the record") }
            total += 1 + length
            guard total <= 255 else { throw malformed("name longer than 255 octets") }
            labels.append(Array(bytes[(index + 1)..<(index + 1 + length)]))
            index += 1 + length
        }
    }

    /// The labels of rdata that is exactly one name (PTR).
    static func decode(_ bytes: [UInt8]) throws(WideAreaError) -> [[UInt8]] {
        let (labels, next) = try read(bytes, at: 0)
        guard next == bytes.count else { throw malformed("bytes after the name") }
        return labels
    }

    /// The lowercased absolute presentation text of `labels`, via ``DNSName`` so it matches the cache's keys.
    static func queryText(_ labels: [[UInt8]]) throws(WideAreaError) -> String {
        do {
            return try DNSName(wire: encode(labels)).text
        } catch {
            throw WideAreaError(.invalidParameter, "name is not a valid DNS name: \(error.message)")
        }
    }

    static func lowercased(_ label: [UInt8]) -> [UInt8] {
        label.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
    }

    private static func malformed(_ what: String) -> WideAreaError {
        WideAreaError(.lookupFailed, "malformed record data: \(what)")
    }
}

extension WideAreaDomain {
    /// Checks that `domain` is a DNS name usable as a unicast DNS-SD domain (for settings).
    /// - Throws: `invalidParameter` saying why not.
    public static func validate(_ domain: String) throws(WideAreaError) {
        guard isUnicast(domain) else {
            throw WideAreaError(.invalidParameter, "'\(domain)' is not a unicast domain (local is mDNS)")
        }
        do {
            _ = try DNSName(domain)
        } catch {
            throw WideAreaError(.invalidParameter, "'\(domain)': \(error.reason)")
        }
    }
}
