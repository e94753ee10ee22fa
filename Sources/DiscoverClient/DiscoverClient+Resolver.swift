extension DiscoverClient {
    /// The HTTPS records of a host after RFC 9460 processing (`io.discoverd.Resolver.ResolveHTTPS`).
    /// - Parameters:
    ///   - name: host name.
    ///   - port: the port the client will connect to; other than 443 queries `_PORT._https.NAME`.
    ///   - optimistic: false to refuse answers from expired cache.
    /// - Throws: ``DiscoverError`` (`noSuchName`, `resolverTimeout`, `upstreamFailure`, `invalidDNSName`, ...).
    public func resolveHTTPS(_ name: String, port: Int = 443, optimistic: Bool = true) async throws -> ResolveHTTPSReply {
        try await call(
            Methods.resolveHTTPS, ResolveHTTPSParameters(name: name, port: port, optimistic: optimistic ? nil : false))
    }

    /// Like ``resolveHTTPS(_:port:optimistic:)``; when the first answer is stale (`expiredCache`), the refreshed
    /// answer follows.
    public func resolveHTTPSUpdates(_ name: String, port: Int = 443) -> AsyncThrowingStream<ResolveHTTPSReply, any Error> {
        stream(Methods.resolveHTTPS, ResolveHTTPSParameters(name: name, port: port))
    }

    /// Whether `host` speaks HTTP/3 on `port`: from its HTTPS records, or from Alt-Svc reported earlier.
    public func h3Capability(host: String, port: Int = 443) async throws -> Bool {
        try await connectionPlan(host: host, port: port).h3
    }

    /// The endpoints to try for `host:port`, in Happy Eyeballs v3 order.
    /// - Parameter assumeH3: plan QUIC even without evidence, like URLSession's `assumesHTTP3Capable`.
    public func connectionPlan(host: String, port: Int = 443, assumeH3: Bool = false, optimistic: Bool = true)
        async throws -> ConnectionPlanReply
    {
        try await call(
            Methods.connectionPlan,
            ConnectionPlanParameters(
                host: host, port: port, optimistic: optimistic ? nil : false, assumeH3: assumeH3 ? true : nil))
    }

    /// The addresses of a host.
    public func resolveAddresses(_ name: String, family: AddressFamily = .any) async throws -> ResolveAddressesReply {
        try await call(Methods.resolveAddresses, ResolveAddressesParameters(name: name, family: family))
    }

    /// The SVCB (type 64) records of `name` (with its scheme prefix, e.g. `_dns.resolver.example`), or of
    /// `_PORT.NAME` when `port` is given (RFC 9460 §2.3), after RFC 9460 processing.
    public func resolveSVCB(_ name: String, port: Int? = nil, optimistic: Bool = true) async throws -> ResolveHTTPSReply {
        try await call(
            Methods.resolveSVCB, ResolveSVCBParameters(name: name, port: port, optimistic: optimistic ? nil : false))
    }

    /// Tells the daemon what an origin's `Alt-Svc` header said (RFC 7838).
    ///
    /// A report by root counts for every caller; another user's only for that user's own plans.
    /// - Returns: what was recorded and which alternatives were ignored (a plan cannot use them), with reasons.
    @discardableResult
    public func reportAltSvc(origin: String, header: String) async throws -> ReportAltSvcReply {
        try await call(Methods.reportAltSvc, ReportAltSvcParameters(origin: origin, header: header))
    }

    /// Drops cached answers (root or the admin group only); returns how many.
    public func flush(_ name: String? = nil) async throws -> Int {
        try await call(Methods.flush, FlushParameters(name: name)).flushed
    }
}
