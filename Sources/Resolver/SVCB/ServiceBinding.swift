import DNSCore

/// A usable ServiceMode HTTPS/SVCB binding after RFC 9460 processing, with exactly the fields of the API's
/// `ServiceBinding`.
public struct ServiceBinding: Sendable, Codable, Equatable, Hashable {
    /// A SvcParam that is not interpreted, with its value in base64.
    public struct UnknownParam: Sendable, Codable, Equatable, Hashable {
        /// The SvcParamKey number.
        public var key: Int
        /// Base64 of the value bytes.
        public var value: String

        /// Creates an unknown parameter.
        public init(key: Int, value: String) {
            self.key = key
            self.value = value
        }
    }

    /// SvcPriority, 1...65535; lower is preferred (RFC 9460 §2.4.1).
    public var priority: Int
    /// The effective TargetName: the owner name when the record said `.` (RFC 9460 §2.5.2).
    public var target: String
    /// The `port` parameter; `nil` means the origin's port.
    public var port: Int?
    /// The `alpn` parameter as given; see `effectiveALPN` for the set to offer.
    public var alpn: [String]
    /// Whether `no-default-alpn` is present.
    public var noDefaultAlpn: Bool
    /// IPv4 address hints, used only until A records are known.
    public var ipv4hint: [String]
    /// IPv6 address hints, used only until AAAA records are known.
    public var ipv6hint: [String]
    /// Base64 ECHConfigList.
    public var ech: String?
    /// The keys of the `mandatory` parameter by name, e.g. `alpn`, `port`, `key667`.
    public var mandatory: [String]
    /// The `dohpath` URI template (RFC 9461).
    public var dohpath: String?
    /// Parameters with keys this client does not interpret.
    public var unknown: [UnknownParam]

    /// Creates a binding from its fields.
    public init(
        priority: Int, target: String, port: Int? = nil, alpn: [String] = [], noDefaultAlpn: Bool = false,
        ipv4hint: [String] = [], ipv6hint: [String] = [], ech: String? = nil, mandatory: [String] = [],
        dohpath: String? = nil, unknown: [UnknownParam] = []
    ) {
        self.priority = priority
        self.target = target
        self.port = port
        self.alpn = alpn
        self.noDefaultAlpn = noDefaultAlpn
        self.ipv4hint = ipv4hint
        self.ipv6hint = ipv6hint
        self.ech = ech
        self.mandatory = mandatory
        self.dohpath = dohpath
        self.unknown = unknown
    }

    /// Creates the binding of a ServiceMode record owned by `ownerName`.
    ///
    /// - Parameters:
    ///   - record: a ServiceMode record (priority > 0).
    ///   - ownerName: the record's owner name, used when TargetName is `.` (RFC 9460 §2.5.2).
    public init(record: SVCBRecord, ownerName: String) {
        let params = record.params
        self.init(
            priority: Int(record.priority),
            target: record.target.isRoot ? DNSName.normalized(ownerName) : record.target.text,
            port: params.port.map(Int.init),
            alpn: params.alpn,
            noDefaultAlpn: params.noDefaultAlpn,
            ipv4hint: params.ipv4hint,
            ipv6hint: params.ipv6hint,
            ech: params.ech.map { Base64.encode($0) },
            mandatory: params.mandatory.map(\.description),
            dohpath: params.dohpath,
            unknown: params.unknown.map { UnknownParam(key: Int($0.key.rawValue), value: Base64.encode($0.value)) })
    }

    /// The ALPN ids a client may offer to this endpoint (RFC 9460 §7.1.2): the `alpn` ids followed by the
    /// default `http/1.1` for HTTPS (§9.1), unless `no-default-alpn` is present.
    public var effectiveALPN: [String] {
        if noDefaultAlpn || alpn.contains(HTTPSProcessing.defaultALPN) { return alpn }
        return alpn + [HTTPSProcessing.defaultALPN]
    }

    /// Whether the endpoint speaks HTTP/3: `h3` is in its ALPN set.
    public var supportsH3: Bool { effectiveALPN.contains("h3") }

    /// The ALPN ids usable over QUIC (`h3` and draft `h3-NN` versions), in order.
    public var quicALPN: [String] { effectiveALPN.filter(HTTPSProcessing.isQUICALPN) }

    /// The ALPN ids usable over TLS on TCP (everything but HTTP/3), in order.
    public var tcpALPN: [String] { effectiveALPN.filter { !HTTPSProcessing.isQUICALPN($0) } }
}
