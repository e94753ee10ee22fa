import DNSCore
import DNSSDModel
import Foundation

/// The records one wide-area registration puts in its zone (RFC 6763 §4-§7): the type's PTR (and subtype PTRs)
/// to the instance, the instance's SRV and TXT, and the target host's A/AAAA when we publish the host too.
struct RegistrationPlan: Hashable, Sendable, Codable {
    var instance: String
    var type: String
    var domain: String
    /// The zone apex the UPDATEs go to.
    var zone: String
    var port: UInt16
    var txt: [[UInt8]]
    /// Subtype labels, e.g. `_printer`.
    var subtypes: [String]
    /// The SRV target, lowercased without trailing dot.
    var host: String
    /// Addresses published for `host` (empty when the host was given by the caller).
    var addresses: [String]
    var ttl: UInt32

    var name: ServiceInstanceName { ServiceInstanceName(instance: instance, type: type, domain: domain) }
    var zoneLabels: [[UInt8]] { WideAreaDomain.labels(of: zone) }
    var hostLabels: [[UInt8]] { WideAreaDomain.labels(of: host) }

    /// The SRV record: priority 0, weight 0, `port`, `host` (RFC 6763 §5).
    var srv: UpdateRecord {
        let rdata = [0, 0, 0, 0, UInt8(port >> 8), UInt8(port & 0xFF)] + DNSName.wire(hostLabels)
        return UpdateRecord(owner: name.labels, type: 33, ttl: ttl, rdata: rdata)
    }

    /// The TXT record; an empty one is a single empty string (RFC 6763 §6.1).
    var txtRecord: UpdateRecord {
        let strings = txt.isEmpty ? [[]] : txt
        let rdata = strings.flatMap { [UInt8(min($0.count, 255))] + $0.prefix(255) }
        return UpdateRecord(owner: name.labels, type: 16, ttl: ttl, rdata: rdata)
    }

    /// PTR `_type._proto.DOMAIN` and one per subtype `_sub._type._proto.DOMAIN` (RFC 6763 §7.1).
    var pointers: [UpdateRecord] {
        let typeLabels = WideAreaDomain.labels(of: type) + WideAreaDomain.labels(of: domain)
        let owners = [typeLabels] + subtypes.map { [Array($0.utf8), Array("_sub".utf8)] + typeLabels }
        return owners.map { UpdateRecord(owner: $0, type: 12, ttl: ttl, rdata: name.wire) }
    }

    /// A and AAAA of the host we publish.
    var hostRecords: [UpdateRecord] {
        addresses.compactMap { text in
            var v4 = in_addr()
            var v6 = in6_addr()
            if inet_pton(AF_INET, text, &v4) == 1 {
                return UpdateRecord(owner: hostLabels, type: 1, ttl: ttl, rdata: withUnsafeBytes(of: &v4, Array.init))
            }
            if inet_pton(AF_INET6, text, &v6) == 1 {
                return UpdateRecord(owner: hostLabels, type: 28, ttl: ttl, rdata: withUnsafeBytes(of: &v6, Array.init))
            }
            return nil
        }
    }

    /// Every record, in the order they are added.
    var records: [UpdateRecord] { pointers + [srv, txtRecord] + hostRecords }

    /// The first registration: the instance name must be free (RFC 2136 §2.4.5), so a name someone else holds is
    /// answered YXDOMAIN and nothing is written.
    var registration: (prerequisites: [UpdateRecord], updates: [UpdateRecord]) {
        ([.nameNotInUse(name.labels)], records)
    }

    /// A refresh: only while our SRV is still there (RFC 2136 §2.4.2), the same records again (TTLs renewed).
    var refresh: (prerequisites: [UpdateRecord], updates: [UpdateRecord]) {
        ([srv.mustExist], records)
    }

    /// The removal of our records (only while our SRV is still there, so another owner's records stay). Host
    /// addresses only when `includingHost` (no other registration of ours uses the host).
    func removal(includingHost: Bool) -> (prerequisites: [UpdateRecord], updates: [UpdateRecord]) {
        let removed = pointers + [srv, txtRecord] + (includingHost ? hostRecords : [])
        return ([srv.mustExist], removed.map(\.deletion))
    }

    /// The removal of records a crash left behind: unconditional (nobody else registers our exact records).
    var leftoverRemoval: [UpdateRecord] { records.map(\.deletion) }

    /// The name to try after `attempt` conflicts: `Name (2)`, `Name (3)`, ... (like mDNS renames).
    static func alternative(to name: String, attempt: Int) -> String {
        let suffix = " (\(attempt + 1))"
        var base = name
        while base.utf8.count + suffix.utf8.count > ServiceValidation.maximumInstanceNameLength { base.removeLast() }
        return base + suffix
    }
}


