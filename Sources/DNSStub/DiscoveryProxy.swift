import DNSCore


/// `[discovery-proxy]`: the unicast DNS domains under which the stub serves the link's mDNS services (RFC 8766).
public struct DiscoveryProxySettings: Sendable, Hashable {
    /// The domains, e.g. `home.example.`; names below each are answered from `.local` on the link.
    public var domains: [DNSName]
    /// Only services seen on this interface (an index in the daemon's network namespace), or all.
    public var interfaceIndex: Int32?
    /// The interface's name as configured, for Status and logs.
    public var interfaceName: String?
    /// How long a one-shot query collects mDNS answers (RFC 8766 §5.6; mDNSResponder's proxy waits about as long).
    public var window: Duration
    /// Proxy look-ups running at once; more get SERVFAIL at once, so a burst of queries costs bounded work.
    public var maxConcurrent: Int

    public init(
        domains: [DNSName] = [], interfaceIndex: Int32? = nil, interfaceName: String? = nil,
        window: Duration = .milliseconds(800), maxConcurrent: Int = 128
    ) {
        self.domains = domains
        self.interfaceIndex = interfaceIndex
        self.interfaceName = interfaceName
        self.window = window
        self.maxConcurrent = maxConcurrent
    }
}

/// The name and data rewriting of a discovery proxy (RFC 8766 §5.5): `.local` on the link ↔ DOMAIN in unicast DNS.
enum DiscoveryProxy {
    static let local: [UInt8] = Array("local".utf8)
    /// TTLs handed to unicast clients: link data changes without notice (RFC 8766 §5.5.1 suggests 10 s).
    static let maximumTTL: UInt32 = 10

    /// The proxy domain `name` lies in, if any (the most specific one).
    static func zone(of name: DNSName, in domains: [DNSName]) -> DNSName? {
        domains.filter { name.isSubdomain(of: $0) }.max { $0.labels.count < $1.labels.count }
    }

    /// `x._http._tcp.DOMAIN` -> `x._http._tcp.local`.
    static func toLocal(_ name: DNSName, zone: DNSName) -> DNSName? {
        try? DNSName(labels: Array(name.labels.dropLast(zone.labels.count)) + [local])
    }

    /// `x._http._tcp.local` -> `x._http._tcp.DOMAIN`; names outside `.local` are left as they are.
    static func fromLocal(_ name: DNSName, zone: DNSName) -> DNSName {
        guard name.labels.last == local else { return name }
        return (try? DNSName(labels: Array(name.labels.dropLast()) + zone.labels)) ?? name
    }

    /// A record from the link as the proxy serves it: owner and the names inside PTR, CNAME and SRV data
    /// rewritten, TTL capped; nil for what must not leave the link (link-local and loopback addresses, RFC 8766
    /// §5.5.2) or what cannot be rewritten.
    static func rewrite(_ record: ResourceRecord, zone: DNSName) -> ResourceRecord? {
        guard let owner = try? DNSName(record.name) else { return nil }
        var rdata = record.rdata
        switch record.type {
        case .a:
            guard rdata.count == 4, rdata[0] != 127, !(rdata[0] == 169 && rdata[1] == 254) else { return nil }
        case .aaaa:
            let loopback = rdata == [UInt8](repeating: 0, count: 15) + [1]
            guard rdata.count == 16, !loopback, !(rdata[0] == 0xFE && rdata[1] & 0xC0 == 0x80) else { return nil }
        case .ptr, .cname:
            guard let target = rewriteWireName(rdata[...], zone: zone) else { return nil }
            rdata = target
        case .srv:
            guard rdata.count > 6, let target = rewriteWireName(rdata[6...], zone: zone) else { return nil }
            rdata = Array(rdata[0..<6]) + target
        default:
            break
        }
        return ResourceRecord(
            name: fromLocal(owner, zone: zone).text, type: record.type, class: record.class,
            ttl: min(record.ttl, maximumTTL), rdata: rdata)
    }

    /// An uncompressed wire name ending in `local.` with that label replaced by the zone's, the other labels
    /// byte for byte: an instance name keeps its case ("Living Room TV"), as DNS-SD asks (RFC 6763 §4.1.1).
    static func rewriteWireName(_ bytes: ArraySlice<UInt8>, zone: DNSName) -> [UInt8]? {
        var labels: [ArraySlice<UInt8>] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let length = Int(bytes[index])
            if length == 0 {
                guard index + 1 == bytes.endIndex else { return nil }
                break
            }
            guard length < 64, index + 1 + length < bytes.endIndex else { return nil }
            labels.append(bytes[(index + 1)...(index + length)])
            index += 1 + length
        }
        guard index < bytes.endIndex else { return nil }
        var out: [UInt8] = []
        let isLocal = labels.last.map { $0.map(Self.lowercase) == local } ?? false
        let kept = isLocal ? labels.dropLast() : labels[...]
        for label in kept {
            out.append(UInt8(label.count))
            out += label
        }
        if isLocal {
            out += zone.wire
        } else {
            out.append(0)
        }
        return out.count <= DNSName.maximumWireLength ? out : nil
    }

    private static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= 65 && byte <= 90 ? byte + 32 : byte
    }

    /// The synthesized SOA of a proxy domain (RFC 8766 §5.5.1): `ns.DOMAIN hostmaster.DOMAIN`, minimum 10 s.
    static func soa(_ zone: DNSName) -> ResourceRecord {
        let nameServer = (try? DNSName(labels: [Array("ns".utf8)] + zone.labels)) ?? zone
        let mailbox = (try? DNSName(labels: [Array("hostmaster".utf8)] + zone.labels)) ?? zone
        var rdata = nameServer.wire + mailbox.wire
        for value: UInt32 in [1, 3600, 600, 86400, maximumTTL] {
            rdata += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
        }
        return ResourceRecord(name: zone.text, type: .soa, ttl: maximumTTL, rdata: rdata)
    }

    /// The synthesized NS of a proxy domain: `ns.DOMAIN`, whose addresses are the machine's own.
    static func ns(_ zone: DNSName) -> ResourceRecord {
        let nameServer = (try? DNSName(labels: [Array("ns".utf8)] + zone.labels)) ?? zone
        return ResourceRecord(name: zone.text, type: .ns, ttl: maximumTTL, rdata: nameServer.wire)
    }

    /// `b`, `db` and `lb` `._dns-sd._udp.DOMAIN` (RFC 6763 §11): the domain recommends itself for browsing.
    static func isBrowseDomainQuery(_ relative: [[UInt8]]) -> Bool {
        relative.count == 3 && ["b", "db", "lb"].map { Array($0.utf8) }.contains(relative[0])
            && relative[1] == Array("_dns-sd".utf8) && relative[2] == Array("_udp".utf8)
    }
}
