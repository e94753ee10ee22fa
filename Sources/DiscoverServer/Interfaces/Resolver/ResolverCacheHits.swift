import DNSCore
import DiscoverAPI
import NIOCore
import NIOPosix
import Resolver
import Synchronization

/// The synchronous answers of `io.discoverd.Resolver`: cache hits of `ResolveHTTPS` and `ResolveAddresses`,
/// answered on the connection's event loop (see ``RouteTable/registerImmediate(_:_:)``).
///
/// A hit's reply is encoded once and kept under the call's parameters as received (``KeptReplies``), with the
/// cache entries it was built from. The next call with the same parameters only checks that those entries are
/// still cached with the same data and writes `source`, `ttl`, `staleSeconds` and `timing` into the kept bytes: no
/// name parsing, no RFC 9460 processing, no reply building. Anything else takes the full path, which keeps its
/// reply for the next call.
enum ResolverCacheHits {
    static func register(
        into routes: inout RouteTable, resolver: DNSResolver, optimistic: @escaping @Sendable (Bool?) -> Bool,
        kept: KeptReplies = KeptReplies()
    ) {
        routes.registerImmediate(Methods.resolveHTTPS) { parameters, _ in
            let start = ContinuousClock.now
            let port = parameters.port ?? 443
            let optimistic = optimistic(parameters.optimistic)
            let key = KeptReplies.Key(method: .https, name: parameters.name, detail: port, optimistic: optimistic)
            if let reply = keptReply(key, kept: kept, resolver: resolver, since: start) { return reply }
            guard let hit = resolver.cachedHTTPS(parameters.name, port: port, optimistic: optimistic) else { return nil }
            let wire = hit.value.wire
            let fields = PerCall(source: wire.source, ttl: wire.ttl, staleSeconds: wire.staleSeconds, timing: wire.timing)
            return reply(
                wire, EncodedResolverReply.init, fields, hit: hit, key: key, kept: kept, resolver: resolver,
                secure: wire.dnssec == .secure)
        }
        routes.registerImmediate(Methods.resolveAddresses) { parameters, _ in
            let start = ContinuousClock.now
            let family = (parameters.family ?? .any).domain
            let optimistic = optimistic(parameters.optimistic)
            let key = KeptReplies.Key(
                method: .addresses, name: parameters.name, detail: family.keyDetail, optimistic: optimistic)
            if let reply = keptReply(key, kept: kept, resolver: resolver, since: start) { return reply }
            guard let hit = resolver.cachedAddresses(parameters.name, family: family, optimistic: optimistic) else {
                return nil
            }
            let wire = hit.value.wire
            let fields = PerCall(source: wire.source, ttl: wire.ttl, staleSeconds: nil, timing: wire.timing)
            return reply(
                wire, EncodedResolverReply.init, fields, hit: hit, key: key, kept: kept, resolver: resolver,
                secure: wire.dnssec == .secure)
        }
    }

    /// The fields a kept reply writes per call.
    struct PerCall {
        var source: AnswerSource
        var ttl: Int
        var staleSeconds: Int?
        var timing: Timing
    }

    /// The reply kept for `key`, patched for this call, when the cache entries it was built from are unchanged.
    static func keptReply(
        _ key: KeptReplies.Key, kept: KeptReplies, resolver: DNSResolver, since start: ContinuousClock.Instant
    ) -> ImmediateReply? {
        guard let entry = kept[key], let fields = resolver.revalidate(entry.dependencies, optimistic: key.optimistic),
            !(entry.secure && fields.source == .expiredCache)
        else { return nil }
        let reply = entry.reply
        let size = reply.maximumMessageSize
        // Written straight into the buffer that goes to the socket.
        var message = ImmediateReply.allocator.buffer(capacity: size)
        message.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { buffer in
            reply.write(
                source: fields.source.wire, ttl: Int(fields.ttl),
                // ResolveAddresses has no staleSeconds.
                staleSeconds: key.method == .https ? fields.staleSeconds.map(Int.init) : nil,
                totalMs: Timing.totalMs(milliseconds(since: start)), into: buffer)
        }
        return ImmediateReply(message: message, afterWrite: refresh(fields.refreshes, resolver))
    }

    /// The reply of a hit found the long way; its encoding is kept for the next call.
    ///
    /// The message itself is written by that same encoding (no Foundation encoder on this path): the first call
    /// after a refresh replaced an entry, e.g. the first answer after expiry, costs about what a kept hit does.
    private static func reply<Wire: Encodable, Value>(
        _ wire: Wire, _ encode: (Wire) -> EncodedResolverReply, _ fields: PerCall, hit: CacheHit<Value>,
        key: KeptReplies.Key, kept: KeptReplies, resolver: DNSResolver, secure: Bool
    ) -> ImmediateReply? {
        let encoded = encode(wire)
        kept[key] = KeptReplies.Entry(dependencies: hit.dependencies, reply: encoded, secure: secure)
        let afterWrite = refresh(hit.refreshes, resolver)
        // A cache hit made no queries, which is what the kept encoding writes; anything else the full encoder.
        guard fields.timing.queries.isEmpty else {
            guard let bytes = try? VarlinkReply.encode(wire) else {
                resolver.startRefreshes(hit.refreshes)
                return nil
            }
            return ImmediateReply(bytes: bytes, afterWrite: afterWrite)
        }
        let size = encoded.maximumMessageSize
        var message = ImmediateReply.allocator.buffer(capacity: size)
        message.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { buffer in
            encoded.write(
                source: fields.source, ttl: fields.ttl, staleSeconds: fields.staleSeconds,
                totalMs: fields.timing.totalMs, into: buffer)
        }
        return ImmediateReply(message: message, afterWrite: afterWrite)
    }

    private static func refresh(_ refreshes: PendingRefreshes, _ resolver: DNSResolver) -> (@Sendable () -> Void)? {
        if refreshes.isEmpty { return nil }
        // The resolver's one after-the-write hook (it hands the work to another event loop).
        return { @Sendable in resolver.startRefreshes(refreshes) }
    }

    private static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = (ContinuousClock.now - start).components
        return Double(elapsed.seconds) * 1000 + Double(elapsed.attoseconds) / 1e15
    }
}

/// Encoded replies of recent cache hits, by method and parameters exactly as the client sent them (the name
/// unparsed: validating it is part of what a kept reply saves), each with the cache entries it depends on.
///
/// Bounded: when full, it starts over (the replies are rebuilt by the next hits). Shared by every connection.
final class KeptReplies: Sendable {
    enum Method: UInt8, Hashable, Sendable {
        case https
        case addresses
    }

    struct Key: Hashable, Sendable {
        var method: Method
        /// The name as received.
        var name: String
        /// The port (`ResolveHTTPS`) or the address family (`ResolveAddresses`).
        var detail: Int
        /// Optimistic DNS as decided for the call (the request and the daemon's setting).
        var optimistic: Bool
    }

    struct Entry: Sendable {
        var dependencies: CacheDependencies
        var reply: EncodedResolverReply
        /// The reply says `dnssec: secure`: once an entry behind it is stale it would be `indeterminate`, so it
        /// is then rebuilt instead (docs/DNSSEC.md).
        var secure = false
    }

    private let entries = Mutex<[Key: Entry]>([:])
    let capacity: Int

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    subscript(key: Key) -> Entry? {
        get { entries.withLock { $0[key] } }
        set {
            entries.withLock { entries in
                if entries.count >= capacity, entries[key] == nil { entries.removeAll(keepingCapacity: true) }
                entries[key] = newValue
            }
        }
    }

    var count: Int { entries.withLock { $0.count } }
}

extension AddressFamilies {
    /// The family as the detail of a ``KeptReplies/Key``.
    fileprivate var keyDetail: Int {
        switch self {
        case .any: 0
        case .ipv4: 4
        case .ipv6: 6
        }
    }
}
