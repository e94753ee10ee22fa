import DNSCore
import Resolver

/// The settings of the DNS stub (`[stub]` in discoverd.conf, `--stub-listen`).
public struct StubSettings: Sendable, Hashable {
    /// Where to listen, UDP and TCP each; empty turns the stub off (`listen = none`).
    public var listen: [HostAndPort]
    /// Clients allowed besides loopback and the machine's own addresses (`allow = CIDR`, repeatable).
    public var allow: [AddressRange]
    /// Answer `.local` and link-local reverse names through mDNS (`local = yes`).
    public var answerLocal: Bool
    /// Serve expired answers while refreshing (the daemon's `optimistic` setting; per-domain opt-outs live in
    /// the cache policy).
    public var optimistic: Bool
    /// How long a `.local` look-up collects mDNS answers.
    public var localTimeout: Duration
    /// How long an idle TCP connection stays open (RFC 7766 §6.2.3; `[stub] tcp-idle-timeout`, for connections
    /// accepted afterwards when Reload changes it).
    public var tcpIdleTimeout: Duration
    /// TCP connections of allowed clients served at once (`[stub] max-tcp`); more are closed at accept.
    public var maxTCPConnections: Int
    /// TCP connections one client address may have open (loopback is exempt: it is every local program); more
    /// are closed at accept.
    public var maxTCPConnectionsPerAddress: Int
    /// Bare REFUSED replies a second to one /24 or /56 outside `allow`; past it they get silence.
    public var refusalsPerSecond: Int
    /// DNS Cookies (RFC 7873, RFC 9018): nil turns them on when the stub listens beyond loopback.
    public var cookies: Bool?
    /// The discovery proxy (RFC 8766): domains answered from the link's mDNS services.
    public var proxy: DiscoveryProxySettings
    /// `.local` and link-reverse look-ups through mDNS running at once; more get SERVFAIL with EDE 0 at once
    /// (each holds an Avahi record browser for up to ``localTimeout``).
    public var maxLocalLookups: Int

    /// The default listen address: loopback port 53 on an address of its own, so it can run beside
    /// systemd-resolved (127.0.0.53) and a local Unbound or dnsmasq (127.0.0.1).
    public static let defaultListen = HostAndPort(host: "127.0.0.153", port: 53)

    public init(
        listen: [HostAndPort] = [StubSettings.defaultListen], allow: [AddressRange] = [], answerLocal: Bool = true,
        optimistic: Bool = true, localTimeout: Duration = .milliseconds(1000),
        tcpIdleTimeout: Duration = .seconds(10), maxTCPConnections: Int = 1024,
        proxy: DiscoveryProxySettings = DiscoveryProxySettings(), maxLocalLookups: Int = 64,
        maxTCPConnectionsPerAddress: Int = 32, refusalsPerSecond: Int = 5, cookies: Bool? = nil
    ) {
        self.maxTCPConnectionsPerAddress = maxTCPConnectionsPerAddress
        self.refusalsPerSecond = refusalsPerSecond
        self.cookies = cookies
        self.proxy = proxy
        self.maxLocalLookups = maxLocalLookups
        self.listen = listen
        self.allow = allow
        self.answerLocal = answerLocal
        self.optimistic = optimistic
        self.localTimeout = localTimeout
        self.tcpIdleTimeout = tcpIdleTimeout
        self.maxTCPConnections = maxTCPConnections
    }
}

extension HostAndPort {
    /// An address and port to listen on (`[stub] listen`): `ADDR`, `ADDR:PORT`, `[V6]:PORT` or a bare IPv6
    /// address, numeric only; the port defaults to 53.
    public static func listen(_ text: String) throws(AddressRangeError) -> HostAndPort {
        let parsed: HostAndPort
        do { parsed = try HostAndPort(parsing: text) } catch {
            throw AddressRangeError(text: text, reason: error.reason)
        }
        guard AddressRange.parseAddress(parsed.host) != nil else {
            throw AddressRangeError(text: text, reason: "not a numeric IPv4 or IPv6 address")
        }
        return parsed
    }
}
