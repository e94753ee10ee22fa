import DNSCore
import Resolver

/// The `[wide-area]` settings of the daemon.
public struct WideAreaSettings: Hashable, Sendable {
    /// `browse-domain`: domains to browse and enumerate besides the resolv.conf search domains.
    public var browseDomains: [String]
    /// `update-server`: where UPDATEs go, for every domain; nil to find the server from DNS.
    public var updateServer: UpdateServerAddress?
    /// `key`/`key-file`: TSIG keys by domain. A key configured without a domain signs for the `browse-domain`s only
    /// (folded into ``TSIGKeyTable/byDomain`` by `init`): a key never signs for a domain a caller names at will,
    /// whose update server (found through DNS) the caller might control.
    public var keys: TSIGKeyTable
    /// The search domains (from resolv.conf) whose `_dns-sd._udp` records name browse domains.
    public var searchDomains: [String]
    /// When unicast browses look again.
    public var schedule: PollSchedule
    /// TTL of the records we register (also the refresh period when the server grants no lease).
    public var registrationTTL: UInt32
    /// Tries per UPDATE before giving up (each with a fresh connection).
    public var updateAttempts: Int
    /// Time limit of one UPDATE try.
    public var updateTimeout: Duration

    public init(
        browseDomains: [String] = [], updateServer: UpdateServerAddress? = nil, keys: TSIGKeyTable = TSIGKeyTable(),
        searchDomains: [String] = [], schedule: PollSchedule = PollSchedule(), registrationTTL: UInt32 = 120,
        updateAttempts: Int = 3, updateTimeout: Duration = .seconds(2)
    ) {
        self.browseDomains = browseDomains.map(WideAreaDomain.normalized)
        self.updateServer = updateServer
        self.keys = keys.scoped(to: self.browseDomains)
        self.searchDomains = searchDomains.map(WideAreaDomain.normalized)
        self.schedule = schedule
        self.registrationTTL = registrationTTL
        self.updateAttempts = max(1, updateAttempts)
        self.updateTimeout = updateTimeout
    }
}

/// `ADDR[:PORT]` of an update server.
public struct UpdateServerAddress: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int = 53) {
        self.host = host
        self.port = port
    }

    /// Parses `ADDR`, `ADDR:PORT`, `[V6]:PORT` or a bare IPv6 address.
    /// - Throws: `invalidParameter` naming what is wrong.
    public init(parsing text: String) throws(WideAreaError) {
        do {
            let parsed = try HostAndPort(parsing: text)
            (host, port) = (parsed.host, parsed.port)
        } catch {
            throw WideAreaError(.invalidParameter, "update server '\(text)': \(error.reason)")
        }
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
