/// One DNS-SD service instance, merged over every interface and protocol it was seen on.
public struct DNSSDService: Hashable, Sendable {
    /// The instance name, e.g. `Living Room Printer`.
    public var name: String
    /// The service type, e.g. `_ipp._tcp`.
    public var type: String
    /// The domain, e.g. `local`.
    public var domain: String
    /// Names of the interfaces the instance was seen on (from `if_indextoname`, `if<N>` if the index is unknown).
    public var interfaces: [String]
    /// The target host name (SRV), once resolved.
    public var host: String?
    /// The port (SRV), once resolved.
    public var port: Int?
    /// Addresses of the host; IPv6 link-local ones carry their zone, e.g. `fe80::1%eth0`.
    public var addresses: [String]
    /// TXT attributes with UTF-8 keys and values (see `TXTRecord.dictionary`): `nil` for a boolean attribute (`key`
    /// without `=`), "" for `key=`; of a key given twice the first occurrence (RFC 6763 §6.4).
    public var txt: [String: String?]
    /// The raw TXT strings in wire order, present only when `txt` cannot show them all: a string that is not UTF-8,
    /// a duplicate key, a string without a key (`TXTRecord.dictionaryIsLossy`; the daemon sends them base64-encoded).
    public var txtRaw: [[UInt8]]?

    /// Creates a service value.
    public init(
        name: String,
        type: String,
        domain: String,
        interfaces: [String] = [],
        host: String? = nil,
        port: Int? = nil,
        addresses: [String] = [],
        txt: [String: String?] = [:],
        txtRaw: [[UInt8]]? = nil
    ) {
        self.name = name
        self.type = type
        self.domain = domain
        self.interfaces = interfaces
        self.host = host
        self.port = port
        self.addresses = addresses
        self.txt = txt
        self.txtRaw = txtRaw
    }
}
