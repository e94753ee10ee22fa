import DNSCore
import Resolver

/// Where to send an UPDATE for a domain, and its zone (RFC 2136 §4: the Zone section names the zone's apex).
struct UpdateTarget: Hashable, Sendable {
    /// The zone apex, lowercased without trailing dot.
    var zone: String
    var server: UpdateServerAddress
}

/// Finds a domain's zone (the closest enclosing name with an SOA) and its update server: the configured
/// `update-server`, else the `_dns-update._udp` SRV of the domain or zone (RFC 2136 §4, as DNS-SD clients
/// do), else the SOA's MNAME (the primary).
struct UpdateServerLocator: Sendable {
    let source: any RecordSource
    let configured: UpdateServerAddress?

    func locate(domain: String) async throws(WideAreaError) -> UpdateTarget {
        let (zone, soa) = try await zoneApex(of: domain)
        if let configured { return UpdateTarget(zone: zone, server: configured) }
        for owner in Set([domain, zone]).sorted() {
            let srvSet = try await source.records("_dns-update._udp.\(owner).", type: .srv, fresh: false)
            let srvs = srvSet.records.compactMap { try? SRVData(rdata: $0.rdata) }
            if let srv = SRVData.preferred(srvs), !srv.target.isEmpty,
                let address = try await address(of: srv.target)
            {
                return UpdateTarget(zone: zone, server: UpdateServerAddress(host: address, port: Int(srv.port)))
            }
        }
        if let address = try await address(of: soa.mname) {
            return UpdateTarget(zone: zone, server: UpdateServerAddress(host: address))
        }
        throw WideAreaError(
            .noUpdateServer,
            "no update server for \(domain): no update-server setting, no _dns-update._udp SRV, and the primary "
                + "\(soa.mname) has no address")
    }

    /// The closest enclosing zone apex of `domain` and its SOA.
    private func zoneApex(of domain: String) async throws(WideAreaError) -> (String, SOAData) {
        var name = WideAreaDomain.normalized(domain)
        while !name.isEmpty {
            let set = try await source.records(name + ".", type: .soa, fresh: false)
            if let record = set.records.first, let soa = try? record.soa() {
                return (name, soa)
            }
            guard let dot = name.firstIndex(of: ".") else { break }
            name = String(name[name.index(after: dot)...])
        }
        throw WideAreaError(.noUpdateServer, "no zone (SOA) found for \(domain)")
    }

    /// The first IPv4, else IPv6, address of `host`.
    private func address(of host: String) async throws(WideAreaError) -> String? {
        let name = WideAreaDomain.normalized(host) + "."
        for type in [RRType.a, .aaaa] {
            let set = try await source.records(name, type: type, fresh: false)
            for record in set.records {
                if let text = type == .a ? try? record.ipv4Address() : try? record.ipv6Address() { return text }
            }
        }
        return nil
    }
}
