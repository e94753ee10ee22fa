// Wire types of io.discoverd.Daemon and org.varlink.service (docs/API.md).

/// State of the daemon's connection to avahi-daemon.
public enum AvahiState: String, Codable, Sendable {
    case running, connecting, unavailable
}

/// Cache counters.
public struct CacheStatistics: Codable, Equatable, Sendable {
    public var entries: Int
    public var hits: Int
    public var misses: Int
    public var staleServed: Int
    public var refreshes: Int
    public var refreshFailures: Int

    public init(
        entries: Int = 0, hits: Int = 0, misses: Int = 0, staleServed: Int = 0, refreshes: Int = 0,
        refreshFailures: Int = 0
    ) {
        self.entries = entries
        self.hits = hits
        self.misses = misses
        self.staleServed = staleServed
        self.refreshes = refreshes
        self.refreshFailures = refreshFailures
    }
}

/// The resolver's upstream work: its in-flight table against `[limits]`, its sockets, what scrubbing dropped.
public struct UpstreamQueryStatus: Codable, Equatable, Sendable {
    /// `[limits] upstream-queries`.
    public var limit: Int
    /// `[limits] upstream-queries-per-client`.
    public var perClientLimit: Int
    /// `[limits] upstream-sockets`.
    public var socketLimit: Int
    /// Distinct upstream queries in flight now, and the most at once since start.
    public var inflight: Int
    public var peak: Int
    /// Sockets to upstreams open now.
    public var socketsOpen: Int
    /// Questions refused at the global limit, at a client's limit; tries refused for want of a socket.
    public var refused: Int
    public var refusedPerClient: Int
    public var socketsRefused: Int
    /// Questions that joined an identical one in flight.
    public var coalesced: Int
    /// The client (uid or address) with the most queries in flight now.
    public var busiestClient: String?
    public var busiestClientInflight: Int
    /// Records dropped from upstream replies by the bailiwick rules since start.
    public var scrubbedRecords: Int

    public init(
        limit: Int, perClientLimit: Int, socketLimit: Int, inflight: Int, peak: Int, socketsOpen: Int, refused: Int,
        refusedPerClient: Int, socketsRefused: Int, coalesced: Int, busiestClient: String?, busiestClientInflight: Int,
        scrubbedRecords: Int
    ) {
        self.limit = limit
        self.perClientLimit = perClientLimit
        self.socketLimit = socketLimit
        self.inflight = inflight
        self.peak = peak
        self.socketsOpen = socketsOpen
        self.refused = refused
        self.refusedPerClient = refusedPerClient
        self.socketsRefused = socketsRefused
        self.coalesced = coalesced
        self.busiestClient = busiestClient
        self.busiestClientInflight = busiestClientInflight
        self.scrubbedRecords = scrubbedRecords
    }
}

/// One upstream: how it is reached now, how it was found, what it did (`Status.upstreamServers`).
public struct UpstreamServerStatus: Codable, Equatable, Sendable {
    /// As configured: `192.0.2.53:53`, `tls://192.0.2.53:853#dns.example`, `https://dns.example:443/dns-query#...`.
    public var server: String
    /// What queries travel on now: `udp` (TCP after truncation), `tls`, `https`, or `none` (not used).
    public var transport: String
    /// `configured`, `ddr-verified` or `ddr-opportunistic`.
    public var origin: String
    /// Why it is not used, or what it replaces.
    public var note: String?
    /// TLS version of the last handshake, and the name (or address) its certificate was verified for (nil when
    /// a pinned key authenticated it, `keyPinned`, or nothing did: DDR's opportunistic profile).
    public var tlsVersion: String?
    public var verifiedName: String?
    /// The pin of the server's key at the last handshake (base64 SHA-256 of its SubjectPublicKeyInfo, what
    /// `pin-sha256=` takes), and `true` when a configured pin is what authenticated it.
    public var keyPin: String?
    public var keyPinned: Bool?
    public var connectionsOpened: Int
    public var connectionsOpen: Int
    public var handshakes: Int
    public var resumptions: Int
    public var queries: Int
    /// Median round trip of the last 256 answered tries, in milliseconds.
    public var p50Ms: Double?
    public var failures: Int
    public var lastFailure: String?
    /// Answers with SERVFAIL, REFUSED, NOTIMP or FORMERR, and the last: `www.example. A: SERVFAIL, EDE 7 ...`.
    public var errorAnswers: Int
    public var lastErrorAnswer: String?

    public init(
        server: String, transport: String, origin: String, note: String? = nil, tlsVersion: String? = nil,
        verifiedName: String? = nil, keyPin: String? = nil, keyPinned: Bool? = nil, connectionsOpened: Int = 0,
        connectionsOpen: Int = 0, handshakes: Int = 0, resumptions: Int = 0, queries: Int = 0, p50Ms: Double? = nil,
        failures: Int = 0, lastFailure: String? = nil, errorAnswers: Int = 0, lastErrorAnswer: String? = nil
    ) {
        self.server = server
        self.transport = transport
        self.origin = origin
        self.note = note
        self.tlsVersion = tlsVersion
        self.verifiedName = verifiedName
        self.keyPin = keyPin
        self.keyPinned = keyPinned
        self.connectionsOpened = connectionsOpened
        self.connectionsOpen = connectionsOpen
        self.handshakes = handshakes
        self.resumptions = resumptions
        self.queries = queries
        self.p50Ms = p50Ms
        self.failures = failures
        self.lastFailure = lastFailure
        self.errorAnswers = errorAnswers
        self.lastErrorAnswer = lastErrorAnswer
    }
}

/// Parameters of `Status`.
public struct StatusParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case intervalMs }
    /// With `more`: how often to send a fresh status (default 1000 ms, at least 1).
    public var intervalMs: Int?
    public init(intervalMs: Int? = nil) { self.intervalMs = intervalMs }
}

/// Reply of `Status`.
public struct StatusReply: Codable, Equatable, Sendable {
    public var version: String
    public var uptimeSeconds: Int
    public var avahi: AvahiState
    public var upstreams: [String]
    public var cache: CacheStatistics
    public var connections: Int
    public var subscriptions: Int
    public var registrations: Int
    /// The DNS stub: where it listens and what it answered (absent when it is off).
    public var stub: StubStatus?
    /// The settings in effect since start or the last reload.
    public var settings: DaemonSettings?
    /// The uids nearest to a per-uid cap (connections or calls in flight), nearest first, at most five.
    public var nearestToCaps: [UIDUsage]?
    /// Upstream queries in flight against their limits.
    public var upstreamQueries: UpstreamQueryStatus?
    /// Every upstream: transport in use, how it was found, TLS, counters.
    public var upstreamServers: [UpstreamServerStatus]?
    /// DNSSEC validation: mode, what the probe found, verdict counts, the last bogus name.
    public var dnssec: DNSSECValidationStatus?

    public init(
        version: String, uptimeSeconds: Int, avahi: AvahiState, upstreams: [String], cache: CacheStatistics,
        connections: Int, subscriptions: Int, registrations: Int, stub: StubStatus? = nil,
        settings: DaemonSettings? = nil, upstreamQueries: UpstreamQueryStatus? = nil,
        nearestToCaps: [UIDUsage]? = nil, upstreamServers: [UpstreamServerStatus]? = nil,
        dnssec: DNSSECValidationStatus? = nil
    ) {
        self.dnssec = dnssec
        self.nearestToCaps = nearestToCaps
        self.upstreamQueries = upstreamQueries
        self.upstreamServers = upstreamServers
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.avahi = avahi
        self.upstreams = upstreams
        self.cache = cache
        self.connections = connections
        self.subscriptions = subscriptions
        self.registrations = registrations
        self.stub = stub
        self.settings = settings
    }
}

extension StatusReply {
    /// The reply for a caller who is neither root nor in the admin group: without the names looked up on this
    /// machine (by any user) that it carries, as `resolvectl monitor` is privileged and `resolvectl statistics`
    /// shows counts only. Left out: the last bogus name and its reason, and each upstream's last error answer;
    /// every count stays.
    public func withoutLookedUpNames() -> StatusReply {
        var reply = self
        reply.dnssec?.lastBogusName = nil
        reply.dnssec?.lastBogusReason = nil
        reply.upstreamServers = upstreamServers?.map { server in
            var server = server
            server.lastErrorAnswer = nil
            return server
        }
        return reply
    }
}

/// DNSSEC validation in `Status` (docs/DNSSEC.md).
public struct DNSSECValidationStatus: Codable, Equatable, Sendable {
    /// `[resolver] dnssec`: yes, allow-downgrade or no.
    public var mode: String
    /// What the probe found about the upstreams, in one word: unknown, capable (they pass DNSSEC data), incapable
    /// (in allow-downgrade, their answers are not validated), or mixed (they differ: see ``upstreamStates``).
    public var upstreams: String
    /// What the probe found about each upstream (allow-downgrade decides per upstream).
    public var upstreamStates: [DNSSECUpstreamState]?
    /// Answers stored with each verdict since start (one per upstream answer, not per answer served).
    public var secure: Int
    public var insecure: Int
    public var bogus: Int
    /// The last name that failed validation, and why (with its EDE code).
    public var lastBogusName: String?
    public var lastBogusReason: String?

    public init(
        mode: String, upstreams: String, secure: Int, insecure: Int, bogus: Int, lastBogusName: String? = nil,
        lastBogusReason: String? = nil, upstreamStates: [DNSSECUpstreamState]? = nil
    ) {
        self.mode = mode
        self.upstreams = upstreams
        self.upstreamStates = upstreamStates
        self.secure = secure
        self.insecure = insecure
        self.bogus = bogus
        self.lastBogusName = lastBogusName
        self.lastBogusReason = lastBogusReason
    }
}

/// One upstream's DNSSEC state in `Status` (docs/DNSSEC.md, "Modes and allow-downgrade").
public struct DNSSECUpstreamState: Codable, Equatable, Sendable {
    /// As in ``UpstreamServerStatus/server``.
    public var server: String
    /// unknown (no probe reply yet), capable or incapable.
    public var state: String
    /// The probe reply that decided it.
    public var evidence: String?
    /// Seconds since the state was decided.
    public var sinceSeconds: Int?

    public init(server: String, state: String, evidence: String? = nil, sinceSeconds: Int? = nil) {
        self.server = server
        self.state = state
        self.evidence = evidence
        self.sinceSeconds = sinceSeconds
    }
}

/// The settings a running daemon uses, named as in discoverd.conf; `Status` reports them so a reload can be checked.
public struct DaemonSettings: Codable, Equatable, Sendable {
    /// `[daemon] log-level`.
    public var logLevel: String
    /// `[daemon] admin-group`.
    public var adminGroup: String?
    /// `[daemon] advertise-group`.
    public var advertiseGroup: String?
    /// `[daemon] services-dir`.
    public var servicesDir: String?
    /// `[limits] max-connections`.
    public var maxConnections: Int
    /// `[limits] max-message-size`, for connections accepted from now on.
    public var maxMessageSize: Int
    /// `[limits] max-queued-calls`, for connections accepted from now on.
    public var maxQueuedCalls: Int
    /// `[limits] max-send-buffer`, for connections accepted from now on.
    public var maxSendBuffer: Int
    /// `[resolver] timeout-ms`.
    public var timeoutMs: Int
    /// `[resolver] attempts`.
    public var attempts: Int
    /// `[resolver] optimistic`.
    public var optimistic: Bool
    /// `[resolver] stale-ttl`.
    public var staleTtl: Int
    /// `[resolver] max-stale`.
    public var maxStale: Int
    /// `[resolver] refresh-retry`.
    public var refreshRetry: Int
    /// `[resolver] no-optimistic-domain`, every one.
    public var noOptimisticDomains: [String]
    /// `[resolver] cache-size`.
    public var cacheSize: Int
    /// `[resolver] persist-interval`.
    public var persistInterval: Int
    /// `[wide-area] publish-group` (unset: root and the admin group may register in unicast domains).
    public var publishGroup: String?
    /// `[limits] max-connections-per-uid`.
    public var maxConnectionsPerUid: Int?
    /// `[limits] max-calls-per-uid`.
    public var maxCallsPerUid: Int?
    /// `[limits] reserved-connections`: above `maxConnections`, for root and the admin group.
    public var reservedConnections: Int?
    /// `[limits] max-input-buffer`, bytes.
    public var maxInputBuffer: Int?
    /// `[limits] idle-timeout`, seconds (0: none).
    public var idleTimeout: Int?

    public init(
        logLevel: String, adminGroup: String? = nil, advertiseGroup: String? = nil, servicesDir: String? = nil,
        maxConnections: Int, maxMessageSize: Int, maxQueuedCalls: Int, maxSendBuffer: Int, timeoutMs: Int,
        attempts: Int, optimistic: Bool, staleTtl: Int, maxStale: Int, refreshRetry: Int,
        noOptimisticDomains: [String] = [], cacheSize: Int, persistInterval: Int, publishGroup: String? = nil,
        maxConnectionsPerUid: Int? = nil, maxCallsPerUid: Int? = nil, reservedConnections: Int? = nil,
        maxInputBuffer: Int? = nil, idleTimeout: Int? = nil
    ) {
        self.publishGroup = publishGroup
        self.maxConnectionsPerUid = maxConnectionsPerUid
        self.maxCallsPerUid = maxCallsPerUid
        self.reservedConnections = reservedConnections
        self.maxInputBuffer = maxInputBuffer
        self.idleTimeout = idleTimeout
        self.logLevel = logLevel
        self.adminGroup = adminGroup
        self.advertiseGroup = advertiseGroup
        self.servicesDir = servicesDir
        self.maxConnections = maxConnections
        self.maxMessageSize = maxMessageSize
        self.maxQueuedCalls = maxQueuedCalls
        self.maxSendBuffer = maxSendBuffer
        self.timeoutMs = timeoutMs
        self.attempts = attempts
        self.optimistic = optimistic
        self.staleTtl = staleTtl
        self.maxStale = maxStale
        self.refreshRetry = refreshRetry
        self.noOptimisticDomains = noOptimisticDomains
        self.cacheSize = cacheSize
        self.persistInterval = persistInterval
    }
}

/// What one uid holds of the API (per-uid fairness), in `Status`.
public struct UIDUsage: Codable, Equatable, Sendable {
    public var uid: Int
    /// Connections open.
    public var connections: Int
    /// Calls queued or running, streams included.
    public var calls: Int

    public init(uid: Int, connections: Int, calls: Int) {
        self.uid = uid
        self.connections = connections
        self.calls = calls
    }
}

/// The DNS stub in `Status` (docs/API.md, "The DNS stub").
public struct StubStatus: Codable, Equatable, Sendable {
    /// `udp ADDR:PORT` and `tcp ADDR:PORT` for every socket it serves.
    public var listen: [String]
    public var queries: StubQueryCounts
    /// Answered from fresh cache entries.
    public var cacheAnswers: Int
    /// Answered from expired entries while one refresh runs (RFC 8767).
    public var staleAnswers: Int
    /// Needed an upstream query.
    public var forwarded: Int
    /// Answered through mDNS (`.local`).
    public var local: Int
    /// Clients outside `[stub] allow`.
    public var refused: Int
    /// UDP replies cut to the client's size (TC set).
    public var truncated: Int
    public var formatErrors: Int
    public var serverFailures: Int
    /// The caps in effect (`[stub]` as Reload last set them).
    public var limits: StubLimits?
    /// TCP connections of allowed clients open now.
    public var tcpConnections: Int?
    /// TCP connections of allowed clients closed at accept at `max-tcp` or `max-tcp-per-address`, since start.
    public var tcpRefused: Int?
    /// The client addresses nearest to `max-tcp-per-address` (loopback is exempt), nearest first, at most five.
    public var nearestToCaps: [StubAddressUsage]?

    public init(
        listen: [String], queries: StubQueryCounts, cacheAnswers: Int, staleAnswers: Int, forwarded: Int, local: Int,
        refused: Int, truncated: Int, formatErrors: Int, serverFailures: Int, limits: StubLimits? = nil,
        tcpConnections: Int? = nil, tcpRefused: Int? = nil, nearestToCaps: [StubAddressUsage]? = nil
    ) {
        self.limits = limits
        self.tcpConnections = tcpConnections
        self.tcpRefused = tcpRefused
        self.nearestToCaps = nearestToCaps
        self.listen = listen
        self.queries = queries
        self.cacheAnswers = cacheAnswers
        self.staleAnswers = staleAnswers
        self.forwarded = forwarded
        self.local = local
        self.refused = refused
        self.truncated = truncated
        self.formatErrors = formatErrors
        self.serverFailures = serverFailures
    }
}

/// The DNS stub's caps in `Status`, named as in `[stub]` of discoverd.conf.
public struct StubLimits: Codable, Equatable, Sendable {
    /// `max-tcp`: TCP connections of allowed clients at once.
    public var maxTcp: Int
    /// `max-tcp-per-address`: TCP connections one address (not loopback) holds.
    public var maxTcpPerAddress: Int
    /// `tcp-idle-timeout`, seconds.
    public var tcpIdleTimeout: Int
    /// `refusals-per-second`: bare REFUSED replies a second to one /24 or /56 outside `allow`.
    public var refusalsPerSecond: Int
    /// DNS Cookies are on (`cookies = yes`, or `auto` and a stub that listens beyond loopback).
    public var cookies: Bool

    public init(maxTcp: Int, maxTcpPerAddress: Int, tcpIdleTimeout: Int, refusalsPerSecond: Int, cookies: Bool) {
        self.maxTcp = maxTcp
        self.maxTcpPerAddress = maxTcpPerAddress
        self.tcpIdleTimeout = tcpIdleTimeout
        self.refusalsPerSecond = refusalsPerSecond
        self.cookies = cookies
    }
}

/// What one client address holds of the stub's TCP, in `Status`.
public struct StubAddressUsage: Codable, Equatable, Sendable {
    public var address: String
    /// TCP connections open.
    public var connections: Int

    public init(address: String, connections: Int) {
        self.address = address
        self.connections = connections
    }
}

/// Queries the stub received, by transport.
public struct StubQueryCounts: Codable, Equatable, Sendable {
    public var udp: Int
    public var tcp: Int
    public init(udp: Int, tcp: Int) {
        self.udp = udp
        self.tcp = tcp
    }
}

/// Reply of `org.varlink.service.GetInfo`.
public struct ServiceInfo: Codable, Equatable, Sendable {
    public var vendor: String
    public var product: String
    public var version: String
    public var url: String
    public var interfaces: [String]

    public init(vendor: String, product: String, version: String, url: String, interfaces: [String]) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
        self.interfaces = interfaces
    }
}

/// Parameters of `org.varlink.service.GetInterfaceDescription`.
public struct InterfaceDescriptionParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case interface }
    public var interface: String
    public init(interface: String) { self.interface = interface }
}

/// Reply of `org.varlink.service.GetInterfaceDescription`.
public struct InterfaceDescriptionReply: Codable, Equatable, Sendable {
    public var description: String
    public init(description: String) { self.description = description }
}

/// The methods of `io.discoverd.Daemon`.
extension Methods {
    public static let status = VarlinkMethod<StatusParameters, StatusReply>("io.discoverd.Daemon.Status")
    public static let reload = VarlinkMethod<VarlinkEmpty, VarlinkEmpty>("io.discoverd.Daemon.Reload")
}
