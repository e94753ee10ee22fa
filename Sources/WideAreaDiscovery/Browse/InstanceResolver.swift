import DNSCore
import DNSSDModel
import Resolver

/// A resolved instance and how long the answer it was built from stays valid.
struct ResolvedInstance: Hashable, Sendable {
    var service: DNSSDService
    /// The smallest TTL of the SRV, TXT and address records used.
    var ttl: UInt32
}

/// Resolves a service instance over unicast DNS: its SRV and TXT, then the SRV target's A and AAAA (RFC 6763 §5).
enum InstanceResolver {
    /// The service with host, port, addresses and TXT.
    /// - Throws: `notFound` when the instance has no SRV or its target is `.` (RFC 2782: decidedly not available),
    ///   `timeout`, `lookupFailed`.
    static func resolve(
        _ instance: ServiceInstanceName, source: any RecordSource, fresh: Bool
    ) async throws(WideAreaError) -> ResolvedInstance {
        let name = try instance.queryName()
        async let srvLookup = source.records(name, type: .srv, fresh: fresh)
        async let txtLookup = source.records(name, type: .txt, fresh: fresh)
        let srvSet: RecordSet
        let txtSet: RecordSet
        do {
            srvSet = try await srvLookup
            txtSet = try await txtLookup
        } catch let error as WideAreaError {
            throw error
        } catch {
            throw WideAreaError(.lookupFailed, "\(name): \(error)")
        }
        // Malformed SRV records are skipped, so one bad record among good ones does not hide the instance.
        let srvs = srvSet.records.compactMap { try? SRVData(rdata: $0.rdata) }
        guard let srv = SRVData.preferred(srvs) else {
            throw WideAreaError(.notFound, "\(instance.instance).\(instance.type).\(instance.domain) has no usable SRV record")
        }
        guard !srv.target.isEmpty else {
            throw WideAreaError(
                .notFound, "\(instance.instance).\(instance.type).\(instance.domain): SRV target is \".\" (not available)")
        }
        // RFC 6763 §6.1: every instance has a TXT; a missing or malformed one is read as empty, not fatal.
        let txt = txtSet.records.first.flatMap { TXTRecord.fromRData($0.rdata) } ?? TXTRecord()
        var ttl = min(srvSet.ttl, txtSet.records.isEmpty ? srvSet.ttl : txtSet.ttl)
        var addresses: [String] = []
        let target = srv.target + "."
        for type in [RRType.a, .aaaa] {
            // A host without addresses of one family is normal; failing to ask is not fatal for the instance.
            guard let set = try? await source.records(target, type: type, fresh: fresh) else { continue }
            for record in set.records {
                if let address = type == .a ? try? record.ipv4Address() : try? record.ipv6Address() {
                    addresses.append(address)
                }
            }
            if !set.records.isEmpty { ttl = min(ttl, set.ttl) }
        }
        let service = DNSSDService(
            name: instance.instance, type: instance.type, domain: instance.domain, interfaces: [],
            host: srv.target, port: Int(srv.port), addresses: addresses, txt: txt.dictionary,
            txtRaw: txt.hasNonUTF8Content ? txt.strings : nil)
        return ResolvedInstance(service: service, ttl: ttl)
    }
}
