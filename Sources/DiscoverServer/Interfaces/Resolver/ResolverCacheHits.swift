import DiscoverAPI
import Resolver

/// The synchronous answers of `io.discoverd.Resolver`: cache hits of `ResolveHTTPS` and `ResolveAddresses`,
/// answered on the connection's event loop (see ``RouteTable/registerImmediate(_:_:)``).
///
/// A `ResolveHTTPS` reply is encoded once per cache entry: its constant part is kept in the memo of the first entry
/// the resolution used, tagged with the generations of every entry used, and only `source`, `ttl`, `staleSeconds`
/// and `timing` are written per hit.
enum ResolverCacheHits {
    static func register(into routes: inout RouteTable, resolver: DNSResolver, optimistic: @escaping @Sendable (Bool?) -> Bool) {
        routes.registerImmediate(Methods.resolveHTTPS) { parameters, _ in
            let port = parameters.port ?? 443
            guard let hit = resolver.cachedHTTPS(parameters.name, port: port, optimistic: optimistic(parameters.optimistic))
            else { return nil }
            guard let bytes = httpsMessage(hit, port: port) else {
                resolver.startRefreshes(hit.refreshes)
                return nil
            }
            return ImmediateReply(bytes: bytes, afterWrite: refresh(hit.refreshes, resolver))
        }
        routes.registerImmediate(Methods.resolveAddresses) { parameters, _ in
            guard
                let hit = resolver.cachedAddresses(
                    parameters.name, family: (parameters.family ?? .any).domain,
                    optimistic: optimistic(parameters.optimistic))
            else { return nil }
            guard let bytes = try? VarlinkReply.encode(hit.value.wire) else {
                resolver.startRefreshes(hit.refreshes)
                return nil
            }
            return ImmediateReply(bytes: bytes, afterWrite: refresh(hit.refreshes, resolver))
        }
    }

    private static func refresh(_ refreshes: PendingRefreshes, _ resolver: DNSResolver) -> (@Sendable () -> Void)? {
        if refreshes.isEmpty { return nil }
        return { @Sendable in resolver.startRefreshes(refreshes) }
    }

    /// The reply message of a `ResolveHTTPS` hit, from the encoding kept with its cache entries when they are the
    /// same ones (same generations), else encoded now and kept.
    static func httpsMessage(_ hit: CacheHit<HTTPSResolution>, port: Int) -> [UInt8]? {
        let resolution = hit.value
        let timing = Timing(attempts: resolution.attempts, milliseconds: resolution.elapsedMilliseconds)
        let memos = hit.memos.compactMap { $0 }
        // A negative entry without data has no memo to key an encoding by: encode this reply as a whole.
        guard let first = memos.first, memos.count == hit.memos.count else {
            return try? VarlinkReply.encode(resolution.wire)
        }
        let generations = memos.map(\.generation)
        let encoded: EncodedHTTPSReply
        // The first entry is the query name's, which the host and the port determine, so the port is the key.
        if let kept = first.encoded(port, as: EncodedHTTPSReply.self), kept.generations == generations {
            encoded = kept
        } else {
            encoded = EncodedHTTPSReply(resolution.wire, generations: generations)
            first.setEncoded(encoded, for: port)
        }
        return encoded.message(
            source: resolution.source.wire, ttl: Int(resolution.ttl), staleSeconds: resolution.staleSeconds.map(Int.init),
            timing: timing)
    }
}
