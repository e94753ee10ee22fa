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
    public var wire: [UInt8] { DNSName.wire(labels) }

    /// The lowercased, absolute presentation name the resolver is asked for.
    /// - Throws: `invalidParameter` when the name exceeds 255 octets.
    public func queryName() throws(WideAreaError) -> String {
        do {
            // Through DNSName, so the text matches the cache's keys.
            return try DNSName(wire: DNSName.wire(labels)).text
        } catch {
            throw WideAreaError(.invalidParameter, "name is not a valid DNS name: \(error.message)")
        }
    }

    /// The instance named by PTR rdata, when that rdata is `<one label>.<type>.<domain>`; nil for anything else (a
    /// PTR into another type or domain, or bytes that are not a name).
    public static func fromPTR(_ rdata: [UInt8], type: String, domain: String) -> ServiceInstanceName? {
        guard let labels = try? DNSName.labels(wire: rdata), labels.count >= 2 else { return nil }
        let expected = WideAreaDomain.labels(of: type) + WideAreaDomain.labels(of: domain)
        let rest = Array(labels.dropFirst())
        guard rest.map { DNSName.lowercased(label: $0) } == expected.map { DNSName.lowercased(label: $0) }, !labels[0].isEmpty else { return nil }
        return ServiceInstanceName(instance: String(decoding: labels[0], as: UTF8.self), type: type, domain: domain)
    }
}
