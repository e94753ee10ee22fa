/// The varlink IDL of every interface the daemon implements, served by `GetInterfaceDescription`.
///
/// Keep these in step with the types in `Types/`: the integration tests parse them with Python's
/// `varlink` package and call through its generated proxies.
public enum InterfaceDescriptions {
    /// Interface names in the order `GetInfo` lists them.
    public static let names = [
        "org.varlink.service", "io.discoverd.Resolver", "io.discoverd.Discovery", "io.discoverd.Daemon",
    ]

    /// The IDL text of an interface, or nil when the daemon has no such interface.
    public static func description(of interface: String) -> String? {
        switch interface {
        case "org.varlink.service": return service
        case "io.discoverd.Resolver": return resolver
        case "io.discoverd.Discovery": return discovery
        case "io.discoverd.Daemon": return daemon
        default: return nil
        }
    }

    /// Method names of an interface, parsed from its IDL (used to tell MethodNotFound from MethodNotImplemented).
    public static func methods(of interface: String) -> Set<String> {
        guard let text = description(of: interface) else { return [] }
        var names = Set<String>()
        for line in text.split(separator: "\n") where line.hasPrefix("method ") {
            let rest = line.dropFirst("method ".count)
            if let paren = rest.firstIndex(of: "(") {
                names.insert(String(rest[..<paren].filter { $0 != " " }))
            }
        }
        return names
    }

    public static let service = """
        # The Varlink Service Interface is provided by every varlink service. It
        # describes the service and the interfaces it implements.
        interface org.varlink.service

        # Get a list of all the interfaces a service provides and information
        # about the implementation.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # Get the description of an interface that is implemented by this service.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # The requested interface was not found.
        error InterfaceNotFound (interface: string)

        # The requested method was not found
        error MethodNotFound (method: string)

        # The interface defines the requested method, but the service does not
        # implement it.
        error MethodNotImplemented (method: string)

        # One of the passed parameters is invalid.
        error InvalidParameter (parameter: string)

        # Client is denied access
        error PermissionDenied ()

        # Method is expected to be called with 'more' set to true, but wasn't
        error ExpectedMore ()

        """

    public static let resolver = """
        # DNS HTTPS/SVCB resolution (RFC 9460), addresses and connection plans,
        # with optimistic DNS (RFC 8767): an expired answer is served at once as
        # source "expiredCache" while one refresh runs.
        interface io.discoverd.Resolver

        # Where an answer came from.
        type Source (cache, expiredCache, network)

        # The DNSSEC state of the answers used (docs/DNSSEC.md): secure
        # (validated from a trust anchor), insecure (proven unsigned, or not
        # validated), bogus (validation failed; a bogus answer is an
        # UpstreamFailure error, so it is not seen in a reply), indeterminate
        # (secure data served from expired cache, not proven now).
        type DNSSEC (secure, insecure, bogus, indeterminate)

        # One upstream query made for this call.
        type Query (
          name: string,
          type: string,
          server: string,
          transport: (udp, tcp),
          ms: float,
          rcode: string
        )

        # The resolution half of an establishment report. queries is empty when
        # the call was answered from cache.
        type Timing (
          totalMs: float,
          queries: []Query
        )

        # An SvcParam the daemon does not interpret: its key number and the
        # base64 of its value.
        type UnknownParam (
          key: int,
          value: string
        )

        # A usable ServiceMode binding after RFC 9460 processing. ech is the
        # base64 ECHConfigList.
        type ServiceBinding (
          priority: int,
          target: string,
          port: ?int,
          alpn: []string,
          noDefaultAlpn: bool,
          ipv4hint: []string,
          ipv6hint: []string,
          ech: ?string,
          mandatory: []string,
          dohpath: ?string,
          unknown: []UnknownParam
        )

        # One endpoint of a connection plan.
        type Endpoint (
          address: string,
          port: int,
          transport: (quic, tcp),
          alpn: []string,
          target: string,
          priority: int,
          ech: ?string
        )

        # The HTTPS records of a name (queryName is _PORT._https.NAME for ports
        # other than 443), in priority order. With more, an expiredCache answer
        # is followed by the network's, which says confirmed: true when the data
        # is unchanged (nothing to redo) or confirmed: false when it changed.
        # note says why records were set aside or ignored: an alias loop, a
        # malformed RRset (RFC 9460 section 2.2), a mandatory key this client
        # does not support (section 8).
        method ResolveHTTPS(name: string, port: ?int, optimistic: ?bool) -> (
          name: string,
          queryName: string,
          aliasChain: []string,
          records: []ServiceBinding,
          h3: bool,
          source: Source,
          ttl: int,
          staleSeconds: ?int,
          timing: Timing,
          note: ?string,
          confirmed: ?bool,
          dnssec: DNSSEC
        )

        # The SVCB (type 64) records of a name, processed like ResolveHTTPS. name
        # carries its scheme prefix (e.g. _dns.resolver.example); with port the
        # query name is _PORT.NAME (RFC 9460 section 2.3).
        method ResolveSVCB(name: string, port: ?int, optimistic: ?bool) -> (
          name: string,
          queryName: string,
          aliasChain: []string,
          records: []ServiceBinding,
          h3: bool,
          source: Source,
          ttl: int,
          staleSeconds: ?int,
          timing: Timing,
          note: ?string,
          confirmed: ?bool,
          dnssec: DNSSEC
        )

        # The addresses of a name. With more, as ResolveHTTPS: an expiredCache
        # answer is followed by the network's, with confirmed.
        method ResolveAddresses(name: string, family: ?(any, ipv4, ipv6), optimistic: ?bool) -> (
          name: string,
          addresses: []string,
          source: Source,
          ttl: int,
          timing: Timing,
          confirmed: ?bool,
          dnssec: DNSSEC
        )

        # Endpoints in the order a Happy Eyeballs v3 client should try them.
        # echAuthentication, present when an endpoint has ech, says whether the
        # HTTPS answers its ECH configurations came from were authenticated:
        # dnssec (validated secure), encryptedTransport (DoT or DoH with a
        # verified certificate) or none.
        method ConnectionPlan(host: string, port: ?int, optimistic: ?bool, assumeH3: ?bool) -> (
          host: string,
          port: int,
          h3: bool,
          h3Source: ?(https, altsvc, assumed),
          endpoints: []Endpoint,
          source: Source,
          timing: Timing,
          dnssec: DNSSEC,
          echAuthentication: ?(dnssec, encryptedTransport, none)
        )

        # An Alt-Svc alternative that was not recorded, and why.
        type IgnoredAlternative (
          alternative: string,
          reason: string
        )

        # Tell the daemon what an origin's Alt-Svc header said (RFC 7838). Root's
        # reports count for every caller (scope everyone), another user's only for
        # that user's own calls (scope reporter). Alternatives a connection plan
        # cannot use (draft h3 versions, protocols other than h3, ma=0, address
        # literals as alternative host) are listed in ignored, not recorded.
        method ReportAltSvc(origin: string, header: string) -> (
          recorded: bool,
          cleared: bool,
          alternatives: []string,
          ignored: []IgnoredAlternative,
          scope: (everyone, reporter)
        )

        # Drop cached answers for a name, or everything. Needs root or the admin group.
        method Flush(name: ?string) -> (flushed: int)

        # The name does not exist (NXDOMAIN).
        error NoSuchName (name: string)

        # No upstream answered in time: the name asked, the servers tried and, when the tries failed rather
        # than waited (a closed port), what they failed with.
        error Timeout (name: ?string, servers: ?[]string, reason: ?string)

        # The upstream answered with an error code: for which name, from which server. ede and reason, when
        # known, say why: the Extended DNS Error code (RFC 8914) and its text, from discoverd's own validator
        # for a bogus answer (6 DNSSEC Bogus, 7 Signature Expired, ...) or as the upstream's reply gave them.
        error UpstreamFailure (rcode: string, name: ?string, server: ?string, ede: ?int, reason: ?string)

        # No upstream could be reached as securely as [resolver] encryption demands (TLS handshake or
        # certificate failure, unusable DoH reply, strict mode without an encrypted path); reason names them.
        error NetworkError (name: ?string, reason: string)

        # The name is not a valid DNS name, or the origin or header is malformed.
        error InvalidName (name: string, reason: string)

        # Not asked: a limit on upstream queries in flight was reached (reason names it; see [limits] in
        # discoverd.conf). Cached names are still answered.
        error TooManyQueries (name: string, reason: string)

        """

    public static let discovery = """
        # DNS-SD (Bonjour) through Avahi: browse, resolve and advertise services.
        interface io.discoverd.Discovery

        # A service instance, merged over every interface and protocol it is seen
        # on. txt maps each TXT key to its value (RFC 6763 §6.4): null for a
        # boolean attribute ("flag", no "="), "" for "key=", the first occurrence
        # of a key given twice. txtRaw (base64 of each TXT string, in wire order)
        # is present when txt cannot show every string: a value that is not UTF-8,
        # a duplicate key, a string without a key.
        type Service (
          name: string,
          type: string,
          domain: string,
          interfaces: []string,
          host: ?string,
          port: ?int,
          addresses: []string,
          txt: [string]?string,
          txtRaw: ?[]string
        )

        # With more: a stream of events. Without: one reply with services once
        # Avahi says all-for-now, or after timeoutMs (default 3000).
        method Browse(
          type: string,
          domain: ?string,
          subtype: ?string,
          interface: ?string,
          resolve: ?bool,
          timeoutMs: ?int
        ) -> (
          event: ?(added, removed, changed, allForNow),
          service: ?Service,
          services: ?[]Service
        )

        # Resolve one service instance.
        method Resolve(name: string, type: string, domain: ?string, timeoutMs: ?int) -> (service: Service)

        # Advertise a service for as long as this connection lives. Requires more:
        # first "registered" with the final name, later "renamed"; the call ends with
        # "failed" or, after Withdraw, "withdrawn".
        # txt: null publishes a boolean attribute ("flag"), "" publishes "key=";
        # keys differing only in case are refused (InvalidParameter).
        method Advertise(
          name: ?string,
          type: string,
          port: int,
          txt: ?[string]?string,
          subtypes: ?[]string,
          domain: ?string,
          host: ?string
        ) -> (
          event: (registered, renamed, failed, withdrawn),
          id: string,
          name: string,
          error: ?string
        )

        # Replace the TXT of an advertisement. Owner uid or root only.
        method UpdateAdvertisement(id: string, txt: [string]?string) -> ()

        # Withdraw an advertisement. Owner uid or root only.
        method Withdraw(id: string) -> ()

        # The service types seen in a domain.
        method BrowseTypes(domain: ?string) -> (types: []string)

        # The browse domains Avahi knows.
        method BrowseDomains() -> (domains: []string)

        error InvalidServiceType (type: string, reason: string)
        error InvalidName (name: string, reason: string)
        error NotFound (name: string)
        error Timeout ()
        error AvahiUnavailable ()
        error NameConflict (name: string)

        # A Browse stream's reader let more than max-send-buffer bytes pile up
        # unread; this is the stream's last reply.
        error SubscriberTooSlow ()

        """

    public static let daemon = """
        # The daemon itself: status, configuration, and errors about messages that
        # belong to no method.
        interface io.discoverd.Daemon

        type CacheStatistics (
          entries: int,
          hits: int,
          misses: int,
          staleServed: int,
          refreshes: int,
          refreshFailures: int
        )

        # Queries the DNS stub received, by transport.
        type StubQueryCounts (
          udp: int,
          tcp: int
        )

        # The DNS stub's caps as [stub] sets them (tcpIdleTimeout in seconds;
        # cookies: whether DNS Cookies are on now).
        type StubLimits (
          maxTcp: int,
          maxTcpPerAddress: int,
          tcpIdleTimeout: int,
          refusalsPerSecond: int,
          cookies: bool
        )

        # What one client address holds of the stub's TCP: connections open.
        # Status lists the addresses nearest to max-tcp-per-address.
        type StubAddressUsage (
          address: string,
          connections: int
        )

        # The DNS stub listener: the sockets it serves ("udp 127.0.0.153:53") and
        # what it answered from fresh cache, from expired cache (RFC 8767), by
        # forwarding, through mDNS; clients refused by [stub] allow; UDP replies
        # truncated to the client's size; malformed queries; SERVFAIL replies;
        # its caps; TCP connections open now and closed at accept at a cap; the
        # addresses nearest to the per-address cap (loopback is exempt).
        type StubStatus (
          listen: []string,
          queries: StubQueryCounts,
          cacheAnswers: int,
          staleAnswers: int,
          forwarded: int,
          local: int,
          refused: int,
          truncated: int,
          formatErrors: int,
          serverFailures: int,
          limits: ?StubLimits,
          tcpConnections: ?int,
          tcpRefused: ?int,
          nearestToCaps: ?[]StubAddressUsage
        )

        # What one uid holds of the API: connections open, calls queued or running
        # (streams included). Status lists the uids nearest to a per-uid cap.
        type UIDUsage (
          uid: int,
          connections: int,
          calls: int
        )

        # One upstream's DNSSEC state (allow-downgrade decides per upstream):
        # unknown until a probe reply shows something, then capable (its answers
        # are validated) or incapable (they are not); the probe reply that
        # decided it and how long ago.
        type DNSSECUpstreamState (
          server: string,
          state: string,
          evidence: ?string,
          sinceSeconds: ?int
        )

        # DNSSEC validation (docs/DNSSEC.md): the mode ([resolver] dnssec), what
        # the probe found about the upstreams in one word (unknown, capable,
        # incapable, mixed) and per upstream, answers stored as secure, insecure
        # and bogus since start, and the last bogus name with its reason.
        type DNSSECStatus (
          mode: string,
          upstreams: string,
          secure: int,
          insecure: int,
          bogus: int,
          lastBogusName: ?string,
          lastBogusReason: ?string,
          upstreamStates: ?[]DNSSECUpstreamState
        )

        # Upstream work against [limits]: distinct queries in flight now and at
        # most, sockets open, questions refused (at the total, at a client's
        # limit, for want of a socket), questions that joined one in flight, the
        # client with the most in flight, and records the bailiwick rules dropped
        # from upstream replies.
        type UpstreamQueries (
          limit: int,
          perClientLimit: int,
          socketLimit: int,
          inflight: int,
          peak: int,
          socketsOpen: int,
          refused: int,
          refusedPerClient: int,
          socketsRefused: int,
          coalesced: int,
          busiestClient: ?string,
          busiestClientInflight: int,
          scrubbedRecords: int
        )

        # One upstream: the transport queries travel on now (udp, tls, https,
        # none when encryption = strict leaves it unused), how it was found
        # (configured, ddr-verified, ddr-opportunistic), the last TLS version and
        # verified name (null when a configured pin-sha256 authenticated the
        # key, keyPinned, or nothing did), the pin of the server's key (base64
        # SHA-256 of its SubjectPublicKeyInfo), connections, handshakes, tries,
        # median round trip, failures with the last reason, and answers with
        # an error code (SERVFAIL, REFUSED, NOTIMP, FORMERR) with the last:
        # name, type, code and the upstream's Extended DNS Errors.
        type UpstreamServer (
          server: string,
          transport: string,
          origin: string,
          note: ?string,
          tlsVersion: ?string,
          verifiedName: ?string,
          keyPin: ?string,
          keyPinned: ?bool,
          connectionsOpened: int,
          connectionsOpen: int,
          handshakes: int,
          resumptions: int,
          queries: int,
          p50Ms: ?float,
          failures: int,
          lastFailure: ?string,
          errorAnswers: int,
          lastErrorAnswer: ?string
        )

        # The settings in effect, named as in discoverd.conf. Reload changes them
        # live; the limits apply to connections accepted after it.
        type Settings (
          logLevel: string,
          adminGroup: ?string,
          advertiseGroup: ?string,
          servicesDir: ?string,
          maxConnections: int,
          maxMessageSize: int,
          maxQueuedCalls: int,
          maxSendBuffer: int,
          timeoutMs: int,
          attempts: int,
          optimistic: bool,
          staleTtl: int,
          maxStale: int,
          refreshRetry: int,
          noOptimisticDomains: []string,
          cacheSize: int,
          persistInterval: int,
          publishGroup: ?string,
          maxConnectionsPerUid: ?int,
          maxCallsPerUid: ?int,
          reservedConnections: ?int,
          maxInputBuffer: ?int,
          idleTimeout: ?int
        )

        # The daemon's state. With more: a fresh status every intervalMs (default
        # 1000), until the connection closes. Names looked up on the machine (the
        # last bogus name and reason, each upstream's lastErrorAnswer) are left
        # out unless the caller is root or in the admin group.
        method Status(intervalMs: ?int) -> (
          version: string,
          uptimeSeconds: int,
          avahi: (running, connecting, unavailable),
          upstreams: []string,
          cache: CacheStatistics,
          connections: int,
          subscriptions: int,
          registrations: int,
          stub: ?StubStatus,
          settings: ?Settings,
          nearestToCaps: ?[]UIDUsage,
          upstreamQueries: ?UpstreamQueries,
          upstreamServers: ?[]UpstreamServer,
          dnssec: ?DNSSECStatus
        )

        # Re-read the configuration and static services and apply them without a
        # restart (socket and state-dir need one and are logged as such). Needs
        # root or the admin group.
        method Reload() -> ()

        # The message is not a varlink call (malformed JSON, no method). The
        # connection stays open.
        error InvalidMessage (reason: string)

        # The message is larger than the limit. The connection is closed.
        error MessageTooLarge (limit: int)

        # A connection over a cap: scope "total" (the daemon serves its maximum
        # number of connections; root and the admin group have a reserve above
        # it) or "uid" (this user holds its share). The connection is closed.
        error TooManyConnections (limit: int, scope: ?string)

        # The caller's uid has its maximum number of calls queued or running
        # over all its connections. The connection stays open.
        error TooManyCalls (limit: int)

        # Reload found an error in the configuration file; nothing was changed.
        error InvalidConfiguration (reason: string)

        # The daemon failed in a way no other error describes.
        error InternalError (reason: string)

        """
}
