import DNSCore

/// The transport of a connection-plan endpoint.
public enum PlanTransport: String, Sendable, Codable, Hashable {
    /// QUIC, for HTTP/3.
    case quic
    /// TLS over TCP, for HTTP/2 and HTTP/1.1.
    case tcp
}

/// Where the knowledge that the host speaks HTTP/3 came from.
public enum H3Source: String, Sendable, Codable, Hashable {
    /// A usable HTTPS record lists `h3`.
    case https
    /// An Alt-Svc header reported for the origin advertises `h3`.
    case altsvc
    /// The caller asked to assume HTTP/3 (`assumeH3`).
    case assumed
}

/// One address to try, with everything needed to connect to it (the API's plan endpoint).
public struct ConnectionEndpoint: Sendable, Codable, Hashable {
    /// The IP address in text form.
    public var address: String
    /// The port to connect to.
    public var port: Int
    /// QUIC or TCP.
    public var transport: PlanTransport
    /// The ALPN ids to offer on this connection.
    public var alpn: [String]
    /// The name the address belongs to (the TLS server name stays the origin's host).
    public var target: String
    /// SvcPriority of the binding it came from; 0 when it did not come from an HTTPS record.
    public var priority: Int
    /// Base64 ECHConfigList to use for this endpoint.
    public var ech: String?

    /// Creates an endpoint.
    public init(
        address: String, port: Int, transport: PlanTransport, alpn: [String], target: String, priority: Int,
        ech: String? = nil
    ) {
        self.address = address
        self.port = port
        self.transport = transport
        self.alpn = alpn
        self.target = target
        self.priority = priority
        self.ech = ech
    }
}

/// The addresses known for one name. `nil` for a family means its lookup has not answered yet; an empty list
/// means it answered with no addresses.
public struct TargetAddresses: Sendable, Hashable {
    /// AAAA results; `nil` while unknown.
    public var ipv6: [String]?
    /// A results; `nil` while unknown.
    public var ipv4: [String]?

    /// Creates the known addresses of a name.
    public init(ipv6: [String]? = nil, ipv4: [String]? = nil) {
        self.ipv6 = ipv6
        self.ipv4 = ipv4
    }
}

/// An ordered list of endpoints for one origin, in the order a Happy Eyeballs v3 client should try them.
public struct ConnectionPlan: Sendable, Hashable {
    /// The origin host, lowercased and absolute.
    public var host: String
    /// The port to connect to.
    public var port: Int
    /// Whether HTTP/3 is known (or assumed) to be available.
    public var h3: Bool
    /// Where the HTTP/3 knowledge came from; `nil` when `h3` is false.
    public var h3Source: H3Source?
    /// The endpoints, in the order to try them.
    public var endpoints: [ConnectionEndpoint]

    /// Creates a plan.
    public init(host: String, port: Int, h3: Bool, h3Source: H3Source?, endpoints: [ConnectionEndpoint]) {
        self.host = host
        self.port = port
        self.h3 = h3
        self.h3Source = h3Source
        self.endpoints = endpoints
    }
}

/// Builds connection plans: pure, deterministic ordering of endpoints, no I/O.
public enum ConnectionPlanner {
    /// An alternative service known from an Alt-Svc header (RFC 7838 §3) for the origin.
    public struct Alternative: Sendable, Hashable {
        /// The ALPN protocol id, e.g. `h3`.
        public var alpn: String
        /// The alternative host; `nil` (or empty) means the origin's host.
        public var host: String?
        /// The port to connect to.
        public var port: Int

        /// Creates an alternative.
        public init(alpn: String, host: String? = nil, port: Int) {
            self.alpn = alpn
            self.host = host
            self.port = port
        }
    }

    /// ALPN offered on TCP when there is no HTTPS record to say more.
    public static let defaultTCPALPN = ["h2", HTTPSProcessing.defaultALPN]

    /// Orders the endpoints for connecting to `host:port`.
    ///
    /// Order, following draft-ietf-happy-happyeyeballs-v3 ("Grouping and Sorting"): endpoints are grouped by
    /// SVCB priority (lower first, RFC 9460 §2.4.1); within one priority, bindings with ECH come before
    /// those without (the draft's grouping by security requirements); within those, QUIC endpoints before TCP
    /// ones (grouping by application protocol, preferring HTTP/3 where it is offered); within each such group
    /// IPv6 and IPv4 addresses alternate starting with IPv6 (the draft's address-family interleaving, "First
    /// Address Family Count" of 1, as RFC 8305 §4). Alt-Svc HTTP/3 endpoints are placed before the first TCP
    /// endpoint. Duplicate (address, port, transport) triples keep their first position.
    ///
    /// - Parameters:
    ///   - host: the origin's host.
    ///   - port: the origin's port; used by bindings without a `port` parameter.
    ///   - bindings: usable bindings from `HTTPSProcessing`, in priority order; empty when there are no
    ///     (usable) HTTPS records.
    ///   - addresses: A/AAAA results per name (targets and the host). A family not yet known falls back to the
    ///     binding's hints; once known, hints are no longer used (RFC 9460 §7.3).
    ///   - assumeH3: add QUIC endpoints on the host's addresses when there are no usable HTTPS records.
    ///   - altSvc: Alt-Svc alternatives reported for this origin.
    ///   - fallbackTarget: the name whose addresses to use when there are no usable bindings: the last
    ///     TargetName of an AliasMode chain that ended without ServiceMode records (RFC 9460 §2.4.2, §3);
    ///     `nil` means `host`.
    /// - Returns: the plan.
    public static func plan(
        host: String, port: Int, bindings: [ServiceBinding], addresses: [String: TargetAddresses],
        assumeH3: Bool = false, altSvc: [Alternative] = [], fallbackTarget: String? = nil
    ) -> ConnectionPlan {
        let hostName = DNSName.normalized(host)
        let fallbackName = fallbackTarget.map(DNSName.normalized) ?? hostName
        var known: [String: TargetAddresses] = [:]
        for (name, value) in addresses { known[DNSName.normalized(name)] = value }

        var ordered: [ConnectionEndpoint] = []
        var h3Source: H3Source?

        if !bindings.isEmpty {
            if bindings.contains(where: \.supportsH3) { h3Source = .https }
            ordered = bindingEndpoints(bindings, port: port, known: known)
        } else {
            let hostAddresses = known[fallbackName] ?? TargetAddresses()
            let v6 = hostAddresses.ipv6 ?? []
            let v4 = hostAddresses.ipv4 ?? []
            if assumeH3 {
                ordered += interleave(v6, v4).map {
                    ConnectionEndpoint(
                        address: $0, port: port, transport: .quic, alpn: ["h3"], target: fallbackName, priority: 0)
                }
            }
            ordered += interleave(v6, v4).map {
                ConnectionEndpoint(
                    address: $0, port: port, transport: .tcp, alpn: defaultTCPALPN, target: fallbackName, priority: 0)
            }
            if assumeH3 { h3Source = .assumed }
        }

        let altSvcEndpoints = altSvcQUICEndpoints(altSvc, hostName: hostName, known: known)
        if !altSvcEndpoints.isEmpty {
            let insertAt = ordered.firstIndex { $0.transport == .tcp } ?? ordered.count
            ordered.insert(contentsOf: altSvcEndpoints, at: insertAt)
            // HTTPS records take precedence as the source; Alt-Svc beats a mere assumption.
            if h3Source != .https { h3Source = .altsvc }
        }

        var seen: Set<String> = []
        let endpoints = ordered.filter { seen.insert("\($0.transport.rawValue)|\($0.address)|\($0.port)").inserted }
        return ConnectionPlan(host: hostName, port: port, h3: h3Source != nil, h3Source: h3Source, endpoints: endpoints)
    }

    private static func bindingEndpoints(
        _ bindings: [ServiceBinding], port: Int, known: [String: TargetAddresses]
    ) -> [ConnectionEndpoint] {
        // Group by priority, keeping the first-seen order of priorities after sorting ascending.
        let sorted = bindings.enumerated().sorted {
            $0.element.priority != $1.element.priority
                ? $0.element.priority < $1.element.priority : $0.offset < $1.offset
        }.map(\.element)
        var out: [ConnectionEndpoint] = []
        var index = 0
        while index < sorted.count {
            let priority = sorted[index].priority
            var group: [ServiceBinding] = []
            while index < sorted.count && sorted[index].priority == priority {
                group.append(sorted[index])
                index += 1
            }
            // Security grouping: ECH-capable bindings first, stable.
            let withECH = group.filter { $0.ech != nil }
            let withoutECH = group.filter { $0.ech == nil }
            for subgroup in [withECH, withoutECH] where !subgroup.isEmpty {
                out += transportGroup(subgroup, transport: .quic, port: port, known: known)
                out += transportGroup(subgroup, transport: .tcp, port: port, known: known)
            }
        }
        return out
    }

    private static func transportGroup(
        _ bindings: [ServiceBinding], transport: PlanTransport, port: Int, known: [String: TargetAddresses]
    ) -> [ConnectionEndpoint] {
        var v6: [ConnectionEndpoint] = []
        var v4: [ConnectionEndpoint] = []
        for binding in bindings {
            let alpn = transport == .quic ? binding.quicALPN : binding.tcpALPN
            guard !alpn.isEmpty else { continue }
            let target = DNSName.normalized(binding.target)
            let addresses = known[target]
            // RFC 9460 §7.3: hints are only used while the family's A/AAAA answer is not known.
            let ipv6 = addresses?.ipv6 ?? binding.ipv6hint
            let ipv4 = addresses?.ipv4 ?? binding.ipv4hint
            let endpointPort = binding.port ?? port
            func endpoint(_ address: String) -> ConnectionEndpoint {
                ConnectionEndpoint(
                    address: address, port: endpointPort, transport: transport, alpn: alpn, target: target,
                    priority: binding.priority, ech: binding.ech)
            }
            v6 += ipv6.map(endpoint)
            v4 += ipv4.map(endpoint)
        }
        return interleave(v6, v4)
    }

    private static func altSvcQUICEndpoints(
        _ alternatives: [Alternative], hostName: String, known: [String: TargetAddresses]
    ) -> [ConnectionEndpoint] {
        var v6: [ConnectionEndpoint] = []
        var v4: [ConnectionEndpoint] = []
        for alternative in alternatives where HTTPSProcessing.isQUICALPN(alternative.alpn) {
            guard (1...65535).contains(alternative.port) else { continue }
            let name = alternative.host.flatMap { $0.isEmpty ? nil : DNSName.normalized($0) } ?? hostName
            guard let addresses = known[name] else { continue }
            func endpoint(_ address: String) -> ConnectionEndpoint {
                ConnectionEndpoint(
                    address: address, port: alternative.port, transport: .quic, alpn: [alternative.alpn], target: name,
                    priority: 0)
            }
            v6 += (addresses.ipv6 ?? []).map(endpoint)
            v4 += (addresses.ipv4 ?? []).map(endpoint)
        }
        return interleave(v6, v4)
    }

    /// Alternates the two lists starting with the first (IPv6); the longer list's tail follows.
    static func interleave<T>(_ first: [T], _ second: [T]) -> [T] {
        var out: [T] = []
        out.reserveCapacity(first.count + second.count)
        for index in 0..<max(first.count, second.count) {
            if index < first.count { out.append(first[index]) }
            if index < second.count { out.append(second[index]) }
        }
        return out
    }
}
