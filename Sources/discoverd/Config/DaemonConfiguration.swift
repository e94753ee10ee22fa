import DNSCore
import DNSStub
import Resolver
import DiscoverAPI
import DiscoverServer
import Foundation
import Logging
import WideAreaDiscovery

/// Everything the daemon can be told, with the defaults of docs/API.md and docs/DESIGN.md.
///
/// The file format is INI-like (`[section]`, `key = value`, `#` comments, a key repeated for lists), the
/// format of avahi-daemon.conf and resolved.conf that Linux operators already know. Command-line flags
/// override the file.
struct DaemonConfiguration: Sendable, Equatable {
    // [daemon]
    /// `$RUNTIME_DIRECTORY/io.discoverd` under systemd, else the default of docs/API.md.
    var socketPath: String = ServiceDirectories.runtime().map { $0 + "/io.discoverd" } ?? SocketPath.daemonDefault()
    var stateDirectory: String = DaemonConfiguration.defaultStateDirectory()
    var logLevel: Logger.Level = .info
    /// Members of this group may call Flush and Reload (root always may).
    var adminGroup: String?
    /// When set, only members of this group (and root) may advertise.
    var advertiseGroup: String?
    /// Directory of static service files.
    var servicesDirectory: String?

    // [limits]
    var maxMessageSize = 64 * 1024
    /// 10,000 idle clients fit with room to spare (each costs a descriptor; the open-files limit is raised).
    var maxConnections = 16384
    var maxQueuedCalls = 256
    /// Bytes a connection may have waiting to be sent before it is dropped as too slow.
    var maxSendBuffer = 1024 * 1024
    /// Per-uid fairness: connections and calls in flight one uid may hold, and the reserve for root and the admin
    /// group above `max-connections`.
    var perUID = PerUIDLimits()
    /// Bytes of unanswered input one connection may hold.
    var maxInputBuffer = 128 * 1024
    /// Seconds a connection with no call and no stream stays open (0: forever).
    var idleTimeoutSeconds = 120
    /// Distinct upstream queries in flight at once, for everyone (``QueryLimits``).
    var upstreamQueries = QueryLimits().maxQueries
    /// Distinct upstream queries in flight for one uid (API) or one address (stub).
    var upstreamQueriesPerClient = QueryLimits().maxQueriesPerClient
    /// UDP and TCP sockets to upstreams open at once.
    var upstreamSockets = UpstreamClient.Configuration().maxSockets
    /// `.local` look-ups through mDNS running at once (stub).
    var localLookups = StubSettings().maxLocalLookups

    // [resolver]
    var upstreams: [UpstreamServer] = []
    var queryTimeoutMs = 1500
    var attempts = 2
    var optimistic = true
    var staleTTL = 30
    var maxStaleSeconds = 86_400
    var refreshRetrySeconds = 30
    var noOptimisticDomains: [String] = []
    var cacheSize = 100_000
    var persistIntervalSeconds = 300
    /// `encryption`: strict, opportunistic (default) or no.
    var encryption = EncryptionMode.opportunistic
    /// `dnssec`: yes, allow-downgrade (default: validation that cannot break resolution behind an upstream that
    /// strips DNSSEC data, README "DNSSEC") or no.
    var dnssec = DNSSECMode.allowDowngrade
    /// `trust-anchor-dir`: resolved's `*.positive` / `*.negative` files.
    var trustAnchorDirectory = "/etc/dnssec-trust-anchors.d"
    /// `trust-anchor` lines (DS or DNSKEY records) and `negative-trust-anchor` lines (domains).
    var trustAnchorLines: [ResourceRecord] = []
    var negativeTrustAnchors: [String] = []
    /// `ca-file`: trusted roots for DoT and DoH (PEM); nil: the system trust store.
    var caFile: String?
    /// `ddr`: discover encrypted resolvers of plain upstreams (RFC 9462).
    var ddr = true
    /// `bootstrap`: addresses of DoH host names (`HOST ADDR`), so no name is resolved to reach an upstream.
    var bootstrap: [String: String] = [:]
    /// `idle-timeout`: seconds a DoT or DoH connection stays open without queries.
    var encryptedIdleSeconds = 30

    // [stub]
    /// Where the DNS stub listens (UDP and TCP); empty: off (`listen = none`).
    var stubListen: [HostAndPort] = [StubSettings.defaultListen]
    /// Clients allowed besides loopback and the machine's own addresses.
    var stubAllow: [AddressRange] = []
    /// Answer `.local` names through Avahi.
    var stubLocal = true
    /// TCP connections one allowed address (not loopback) may hold.
    var stubMaxTCPPerAddress = 32
    /// TCP connections of allowed clients open at once, in all.
    var stubMaxTCP = 1024
    /// Seconds a TCP connection stays open without a query (RFC 7766 §6.2.3).
    var stubTCPIdleSeconds = 10
    /// Bare REFUSED replies a second to one /24 or /56 outside `allow`.
    var stubRefusalsPerSecond = 5
    /// DNS Cookies: nil (`auto`) when the stub listens beyond loopback.
    var stubCookies: Bool?

    // [discovery-proxy]
    /// Unicast domains answered from the link's mDNS services (RFC 8766).
    var proxyDomains: [DNSName] = []
    /// Only services on this interface.
    var proxyInterface: String?

    // [wide-area]
    /// `browse-domain`: unicast domains to browse and enumerate besides the resolv.conf search domains.
    var wideAreaBrowseDomains: [String] = []
    /// `update-server`: where DNS UPDATEs go; nil: the `_dns-update._udp` SRV, else the SOA primary.
    var wideAreaUpdateServer: UpdateServerAddress?
    /// `key` (`[DOMAIN] [ALG:]NAME:SECRET`) and `key-file` (`[DOMAIN] PATH`): TSIG keys. One without a domain
    /// signs for the browse domains only (``WideAreaSettings/keys``).
    var wideAreaKeys = TSIGKeyTable()
    /// `publish-group`: members (and root) may Advertise in unicast domains; nil: root and the admin group.
    var publishGroup: String?
    /// Where the first inline `key =` is (`FILE:LINE`): such a file must be as private as a key file.
    var inlineKeyLocation: String?
    /// `ttl`: TTL of registered records (refreshed at 80 % of it, or of the lease the server grants).
    var wideAreaTTL = 120

    /// The wide-area settings as the WideAreaDiscovery library takes them.
    var wideAreaSettings: WideAreaSettings {
        WideAreaSettings(
            browseDomains: wideAreaBrowseDomains, updateServer: wideAreaUpdateServer, keys: wideAreaKeys,
            searchDomains: ResolvConf.searchDomains(), registrationTTL: UInt32(wideAreaTTL),
            updateAttempts: attempts + 1, updateTimeout: .milliseconds(max(queryTimeoutMs, 1000)))
    }

    /// The stub's settings as the DNSStub library takes them.
    var stubSettings: StubSettings {
        StubSettings(
            listen: stubListen, allow: stubAllow, answerLocal: stubLocal, optimistic: optimistic,
            tcpIdleTimeout: .seconds(stubTCPIdleSeconds), maxTCPConnections: stubMaxTCP,
            proxy: DiscoveryProxySettings(
                domains: proxyDomains, interfaceIndex: proxyInterface.map { Int32(bitPattern: if_nametoindex($0)) },
                interfaceName: proxyInterface),
            maxLocalLookups: localLookups, maxTCPConnectionsPerAddress: stubMaxTCPPerAddress,
            refusalsPerSecond: stubRefusalsPerSecond, cookies: stubCookies)
    }

    /// The bounds on upstream work as the resolver takes them.
    var queryLimits: QueryLimits {
        QueryLimits(maxQueries: upstreamQueries, maxQueriesPerClient: upstreamQueriesPerClient)
    }

    static func defaultStateDirectory(uid: UInt32 = getuid()) -> String {
        if let state = ServiceDirectories.state() { return state }
        if uid == 0 { return "/var/lib/discoverd" }
        let env = ProcessInfo.processInfo.environment
        if let state = env["XDG_STATE_HOME"], !state.isEmpty { return state + "/discoverd" }
        return (env["HOME"] ?? "/tmp") + "/.local/state/discoverd"
    }
}

extension UpstreamServer {
    /// Parses an upstream as written (`--upstream`, `[resolver] upstream`): the forms of
    /// ``UpstreamServer/init(parsing:)``, with the reason as a configuration error.
    static func configured(_ text: String) throws(ConfigurationError) -> UpstreamServer {
        do { return try UpstreamServer(parsing: text) } catch { throw ConfigurationError(error.description) }
    }

    /// The nameservers of a resolv.conf file (plain DNS).
    static func fromResolvConf(_ path: String = "/etc/resolv.conf") -> [UpstreamServer] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, fields[0] == "nameserver", isIPAddress(String(fields[1])) else { return nil }
            return try? UpstreamServer(parsing: String(fields[1]))
        }
    }
}

extension DaemonConfiguration {
    /// The upstreams as the resolver takes them: DoH hosts get their `bootstrap` address.
    var upstreamServers: [UpstreamServer] {
        upstreams.map { upstream in
            var server = upstream
            if server.transport == .https, server.host.isEmpty, let name = server.tlsName, let address = bootstrap[name] {
                server.host = address
            }
            return server
        }
    }

    /// Checks what only the whole configuration can tell: every DoH host has an address. `places[i]` names where
    /// upstream `i` was written ("FILE:LINE: [resolver] upstream"); `source` stands for the ones it does not name.
    func checkUpstreams(source: String, places: [String] = []) throws(ConfigurationError) {
        for (index, server) in upstreamServers.enumerated() where server.host.isEmpty {
            throw ConfigurationError(
                "\(index < places.count ? places[index] : source) '\(server)': the DoH host needs an address: add "
                    + "#ADDR to it or a 'bootstrap = \(server.tlsName ?? "HOST") ADDR' line to [resolver]")
        }
    }
}

/// A configuration problem, reported at start-up with the file, line and key it concerns.
///
/// The text is redacted (``Redaction``): a malformed line holding a TSIG secret is echoed without it.
struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    var description: String
    init(_ description: String) { self.description = Redaction.redact(description) }
}

extension DaemonConfiguration {
    /// Reads a configuration file on top of the defaults.
    /// - Throws: ``ConfigurationError`` also when the file holds an inline `key =` secret and others may read it
    ///   (``SecretFile/problem(configuration:daemonUID:daemonGID:)``), or a `key-file` may not be trusted.
    static func load(path: String) throws(ConfigurationError) -> DaemonConfiguration {
        let (text, status) = try SecretFile.open(path, context: path)
        var config = DaemonConfiguration()
        try config.apply(text: text, source: path)
        if let location = config.inlineKeyLocation, let problem = SecretFile.problem(configuration: status) {
            throw ConfigurationError(
                "\(location): [wide-area] key holds a secret, but \(path) \(problem); fix: chown root:discoverd "
                    + "\(path) && chmod 0640 \(path) (the daemon's group, or root's), or move the key to a key-file")
        }
        return config
    }

    /// Applies `key = value` lines to this configuration.
    mutating func apply(text: String, source: String) throws(ConfigurationError) {
        var fileUpstreams: [UpstreamServer] = []
        var upstreamLines: [String] = []  // where each of fileUpstreams was written
        var bootstrapLines: [String: String] = [:]
        var noOptimistic: [String] = []
        var listen: [HostAndPort]?
        var allow: [AddressRange] = []
        var browseDomains: [String] = []
        var keys = TSIGKeyTable()
        for entry in try INIFile.entries(text, source: source, sections: Self.sections) {
            let (section, key, value, location) = (entry.section, entry.key, entry.value, entry.location)
            let context = "\(location): [\(section)] \(key)"
            switch (section, key) {
            case ("daemon", "socket"): socketPath = try Self.path(value, context)
            case ("daemon", "state-dir"): stateDirectory = try Self.path(value, context)
            case ("daemon", "log-level"): logLevel = try Self.logLevel(value, context)
            case ("daemon", "admin-group"): adminGroup = value.isEmpty ? nil : value
            case ("daemon", "advertise-group"): advertiseGroup = value.isEmpty ? nil : value
            case ("daemon", "services-dir"): servicesDirectory = try Self.path(value, context)
            case ("limits", "max-message-size"): maxMessageSize = try Self.int(value, context, 1024...16 * 1024 * 1024)
            case ("limits", "max-connections"): maxConnections = try Self.int(value, context, 1...1_000_000)
            case ("limits", "max-queued-calls"): maxQueuedCalls = try Self.int(value, context, 1...65536)
            case ("limits", "max-send-buffer"): maxSendBuffer = try Self.int(value, context, 4096...1 << 30)
            case ("limits", "max-connections-per-uid"): perUID.maxConnections = try Self.int(value, context, 1...1_000_000)
            case ("limits", "max-calls-per-uid"): perUID.maxCalls = try Self.int(value, context, 1...10_000_000)
            case ("limits", "reserved-connections"): perUID.reserve = try Self.int(value, context, 0...10_000)
            case ("limits", "max-input-buffer"): maxInputBuffer = try Self.int(value, context, 4096...1 << 30)
            case ("limits", "idle-timeout"): idleTimeoutSeconds = try Self.int(value, context, 0...86_400)
            case ("limits", "upstream-queries"): upstreamQueries = try Self.int(value, context, 1...65_536)
            case ("limits", "upstream-queries-per-client"):
                upstreamQueriesPerClient = try Self.int(value, context, 1...65_536)
            case ("limits", "upstream-sockets"): upstreamSockets = try Self.int(value, context, 16...65_536)
            case ("limits", "local-lookups"): localLookups = try Self.int(value, context, 1...4096)
            case ("resolver", "upstream"):
                do { fileUpstreams.append(try UpstreamServer.configured(value)) } catch {
                    throw ConfigurationError("\(context): \(error.description)")
                }
                upstreamLines.append(context)
            case ("resolver", "timeout-ms"): queryTimeoutMs = try Self.int(value, context, 10...60_000)
            case ("resolver", "attempts"): attempts = try Self.int(value, context, 1...10)
            case ("resolver", "optimistic"): optimistic = try Self.bool(value, context)
            case ("resolver", "stale-ttl"): staleTTL = try Self.int(value, context, 1...3600)
            case ("resolver", "max-stale"): maxStaleSeconds = try Self.int(value, context, 0...Int(CachePolicy.maximumMaxStale))
            case ("resolver", "refresh-retry"): refreshRetrySeconds = try Self.int(value, context, 1...3600)
            case ("resolver", "no-optimistic-domain"): noOptimistic.append(value.lowercased())
            case ("resolver", "cache-size"): cacheSize = try Self.int(value, context, 0...10_000_000)
            case ("resolver", "persist-interval"): persistIntervalSeconds = try Self.int(value, context, 0...86_400)
            case ("resolver", "encryption"):
                guard let mode = EncryptionMode(rawValue: value.lowercased()) else {
                    throw ConfigurationError("\(context): '\(value)' is not strict, opportunistic or no")
                }
                encryption = mode
            case ("resolver", "ca-file"):
                let path = try Self.path(value, context)
                guard FileManager.default.isReadableFile(atPath: path) else {
                    throw ConfigurationError("\(context): cannot read '\(path)'")
                }
                caFile = path
            case ("resolver", "ddr"): ddr = try Self.bool(value, context)
            case ("resolver", "dnssec"):
                guard let mode = DNSSECMode(rawValue: value.lowercased()) else {
                    throw ConfigurationError("\(context): '\(value)' is not yes, allow-downgrade or no")
                }
                dnssec = mode
            case ("resolver", "trust-anchor-dir"): trustAnchorDirectory = try Self.path(value, context)
            case ("resolver", "trust-anchor"):
                do { trustAnchorLines.append(try TrustAnchors.parse(value, source: source, line: 0)) } catch {
                    throw ConfigurationError("\(context): \(error.reason)")
                }
            case ("resolver", "negative-trust-anchor"):
                guard let name = try? DNSName(value) else {
                    throw ConfigurationError("\(context): '\(value)' is not a domain name")
                }
                negativeTrustAnchors.append(name.text)
            case ("resolver", "idle-timeout"): encryptedIdleSeconds = try Self.int(value, context, 1...3600)
            case ("resolver", "bootstrap"):
                let fields = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
                guard fields.count == 2, !UpstreamServer.isIPAddress(fields[0]), UpstreamServer.isIPAddress(fields[1]) else {
                    throw ConfigurationError("\(context): '\(value)' is not 'HOST ADDR' (a DoH host name and its address)")
                }
                bootstrapLines[fields[0].lowercased()] = fields[1]
            case ("stub", "listen"):
                do { listen = try Self.listenAddresses(value, adding: listen ?? []) } catch {
                    throw ConfigurationError("\(context): \(error.description)")
                }
            case ("stub", "allow"):
                do { allow.append(try AddressRange(parsing: value)) } catch {
                    throw ConfigurationError("\(context): \(error.description)")
                }
            case ("stub", "local"): stubLocal = try Self.bool(value, context)
            case ("stub", "max-tcp-per-address"): stubMaxTCPPerAddress = try Self.int(value, context, 1...65536)
            case ("stub", "max-tcp"): stubMaxTCP = try Self.int(value, context, 1...65536)
            case ("stub", "tcp-idle-timeout"): stubTCPIdleSeconds = try Self.int(value, context, 1...3600)
            case ("stub", "refusals-per-second"): stubRefusalsPerSecond = try Self.int(value, context, 0...100_000)
            case ("stub", "cookies"):
                stubCookies = value.lowercased() == "auto" ? nil : try Self.bool(value, context)
            case ("discovery-proxy", "domain"):
                do throws(InvalidNameError) {
                    let domain = try DNSName(value)
                    guard !domain.isRoot, !LocalZones.isLocal(domain) else {
                        throw InvalidNameError(name: value, reason: "a unicast domain is needed, not the root or .local")
                    }
                    proxyDomains.append(domain)
                } catch {
                    throw ConfigurationError("\(context): \(error.description)")
                }
            case ("discovery-proxy", "interface"):
                guard if_nametoindex(value) != 0 else {
                    throw ConfigurationError("\(context): no interface named '\(value)' on this machine")
                }
                proxyInterface = value
            case ("wide-area", "browse-domain"):
                do { try WideAreaDomain.validate(value) } catch { throw ConfigurationError("\(context): \(error.message)") }
                browseDomains.append(value)
            case ("wide-area", "update-server"):
                do { wideAreaUpdateServer = try UpdateServerAddress(parsing: value) } catch {
                    throw ConfigurationError("\(context): \(error.message)")
                }
            case ("wide-area", "key"):
                do { try keys.add(parsing: value) } catch { throw ConfigurationError("\(context): \(error.message)") }
                inlineKeyLocation = inlineKeyLocation ?? location
            case ("wide-area", "key-file"):
                try Self.addKeyFile(value, to: &keys, context: context)
            case ("wide-area", "publish-group"): publishGroup = value.isEmpty ? nil : value
            case ("wide-area", "ttl"): wideAreaTTL = try Self.int(value, context, 10...86_400)
            default:
                let known = Self.keys[section, default: []].sorted().joined(separator: ", ")
                throw ConfigurationError("\(location): unknown key '\(key)' in [\(section)] (known: \(known))")
            }
        }
        if !fileUpstreams.isEmpty { upstreams = fileUpstreams }
        if !bootstrapLines.isEmpty { bootstrap = bootstrapLines }
        try checkUpstreams(source: "\(source): [resolver] upstream", places: upstreamLines)
        if !noOptimistic.isEmpty { noOptimisticDomains = noOptimistic }
        if let listen { stubListen = listen }
        if !allow.isEmpty { stubAllow = allow }
        if !browseDomains.isEmpty { wideAreaBrowseDomains = browseDomains }
        if keys != TSIGKeyTable() { wideAreaKeys = keys }
        _ = try trustAnchors()
    }

    /// The anchors in force: the built-in ones, the files of `trust-anchor-dir`, then the config's lines.
    /// - Throws: ``ConfigurationError`` naming the file and line of an anchor that cannot be used.
    func trustAnchors() throws(ConfigurationError) -> TrustAnchors {
        var anchors = TrustAnchors.builtIn
        do { try anchors.load(directory: trustAnchorDirectory) } catch {
            throw ConfigurationError("[resolver] trust-anchor-dir: \(error.description)")
        }
        for record in trustAnchorLines { anchors.add(record) }
        for name in negativeTrustAnchors { anchors.negative.insert(name) }
        return anchors
    }

    /// Reads `key-file = [DOMAIN] PATH`: an absolute path, or the name of a systemd credential.
    static func addKeyFile(_ value: String, to keys: inout TSIGKeyTable, context: String) throws(ConfigurationError) {
        let fields = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count == 1 || fields.count == 2 else {
            throw ConfigurationError("\(context): expected [DOMAIN] PATH")
        }
        let domain = fields.count == 2 ? fields[0] : nil
        if let domain {
            do { try WideAreaDomain.validate(domain) } catch { throw ConfigurationError("\(context): \(error.message)") }
        }
        let named = fields[fields.count - 1]
        let path = named.hasPrefix("/") ? named : try SecretFile.credentialPath(named, context: context)
        let text = try SecretFile.read(path, context: context)
        do {
            keys.add(try TSIGKey(keyFileText: text), domain: domain)
        } catch {
            throw ConfigurationError("\(context): \(path): \(error.message)")
        }
    }

    /// Adds one `listen` value to a list: `ADDR[:PORT]`, or `none`, which empties it (the stub is off).
    static func listenAddresses(_ value: String, adding list: [HostAndPort]) throws(AddressRangeError) -> [HostAndPort] {
        if value.lowercased() == "none" { return [] }
        return list + [try HostAndPort.listen(value)]
    }

    static let sections: Set<String> = ["daemon", "limits", "resolver", "stub", "discovery-proxy", "wide-area"]
    static let keys: [String: Set<String>] = [
        "daemon": ["socket", "state-dir", "log-level", "admin-group", "advertise-group", "services-dir"],
        "limits": [
            "max-message-size", "max-connections", "max-queued-calls", "max-send-buffer", "max-connections-per-uid",
            "max-calls-per-uid", "reserved-connections", "max-input-buffer", "idle-timeout", "upstream-queries",
            "upstream-queries-per-client", "upstream-sockets", "local-lookups",
        ],
        "resolver": [
            "upstream", "timeout-ms", "attempts", "optimistic", "stale-ttl", "max-stale", "refresh-retry",
            "no-optimistic-domain", "cache-size", "persist-interval", "encryption", "ca-file", "ddr", "bootstrap",
            "idle-timeout", "dnssec", "trust-anchor-dir", "trust-anchor", "negative-trust-anchor",
        ],
        "stub": [
            "listen", "allow", "local", "max-tcp", "max-tcp-per-address", "tcp-idle-timeout", "refusals-per-second",
            "cookies",
        ],
        "discovery-proxy": ["domain", "interface"],
        "wide-area": ["browse-domain", "update-server", "key", "key-file", "publish-group", "ttl"],
    ]

    private static func int(_ value: String, _ context: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let number = Int(value) else { throw ConfigurationError("\(context): '\(value)' is not a whole number") }
        guard range.contains(number) else {
            throw ConfigurationError("\(context): \(number) is out of range \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    private static func bool(_ value: String, _ context: String) throws(ConfigurationError) -> Bool {
        switch value.lowercased() {
        case "yes", "true", "on", "1": return true
        case "no", "false", "off", "0": return false
        default: throw ConfigurationError("\(context): '\(value)' is not yes or no")
        }
    }

    private static func path(_ value: String, _ context: String) throws(ConfigurationError) -> String {
        guard value.hasPrefix("/") else { throw ConfigurationError("\(context): '\(value)' is not an absolute path") }
        return value
    }

    static func logLevel(_ value: String, _ context: String) throws(ConfigurationError) -> Logger.Level {
        guard let level = Logger.Level(rawValue: value.lowercased()) else {
            let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            throw ConfigurationError("\(context): '\(value)' is not a log level (\(names))")
        }
        return level
    }
}
