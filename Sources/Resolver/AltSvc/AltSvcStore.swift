import DNSCore
import Foundation
import Synchronization

/// Whose evidence an Alt-Svc report is: root's counts for every caller, another user's only for that user.
public enum AltSvcScope: Hashable, Sendable {
    /// Reports by root (or by an in-process caller): every plan uses them.
    case everyone
    /// Reports by this uid: only this uid's plans use them, so no user can steer another's connections.
    case user(UInt32)

    /// The scope of a report by `uid`; root (0) and nil are ``everyone``.
    public init(uid: UInt32?) {
        if let uid, uid != 0 { self = .user(uid) } else { self = .everyone }
    }

    /// The uid persisted for this scope (nil for everyone).
    var uid: UInt32? {
        if case .user(let uid) = self { return uid }
        return nil
    }
}

/// What a report did: the alternatives recorded, and those ignored because a connection plan cannot use them.
public struct AltSvcReport: Sendable, Equatable {
    /// An alternative that was not recorded, and why.
    public struct Ignored: Sendable, Equatable {
        public var alternative: AltSvcAlternative
        public var reason: String
    }

    /// The header was `clear`.
    public var cleared: Bool
    /// The alternatives stored.
    public var recorded: [AltSvcAlternative]
    /// The alternatives not stored, with the reason.
    public var ignored: [Ignored]
    /// Whose plans the report affects.
    public var scope: AltSvcScope
}

/// Alternative services learned from `Alt-Svc` headers (RFC 7838), per origin and reporting user, with absolute
/// expiry.
///
/// Fed by `io.discoverd.Resolver.ReportAltSvc` and consulted by `ConnectionPlan` (`h3Source: "altsvc"`). Only
/// alternatives a plan can use are stored: the final `h3` (RFC 9114) on the origin's host or another host name.
/// Thread-safe; persisted next to the DNS cache with ``save(to:)`` and ``load(from:)``.
public final class AltSvcStore: Sendable {
    /// One origin as seen by one scope.
    struct Key: Hashable {
        var origin: AltSvcOrigin
        var scope: AltSvcScope
    }

    /// An alternative with its absolute expiry (wall-clock seconds since 1970).
    struct Stored: Codable {
        var alternative: AltSvcAlternative
        var expires: Double
    }

    struct OriginEntry: Codable {
        var alternatives: [Stored]
        /// When the origin last reported, for eviction of the least recently reported origins.
        var updated: Double
    }

    private let clock: any CacheClock
    private let maxOrigins: Int
    private let state: Mutex<[Key: OriginEntry]>

    /// Creates an empty store.
    ///
    /// - Parameters:
    ///   - maxOrigins: Bound on the (origin, scope) entries kept; past it the least recently reported ones are
    ///     dropped. One user's entries are bounded to an eighth of it, so no user can push out everyone else's.
    ///   - clock: The wall clock; tests pass a manual one.
    public init(maxOrigins: Int = 10_000, clock: any CacheClock = SystemCacheClock()) {
        self.maxOrigins = max(maxOrigins, 1)
        self.clock = clock
        self.state = Mutex([:])
    }

    /// Handles `ReportAltSvc(origin, header)`: parses both and updates the origin for `scope`.
    ///
    /// - Returns: What was recorded and what was ignored.
    /// - Throws: ``AltSvcError``, `.invalidOrigin` or `.malformedHeader`; nothing is changed then.
    @discardableResult
    public func report(origin: String, header: String, scope: AltSvcScope = .everyone) throws(AltSvcError)
        -> AltSvcReport
    {
        let origin = try AltSvcOrigin(parsing: origin)
        let header = try AltSvcHeader(parsing: header)
        return update(origin, with: header, scope: scope)
    }

    /// Applies a parsed header for `scope`: `clear` removes the origin's alternatives; a list replaces them all
    /// (RFC 7838 §3: a new field value invalidates and replaces every cached alternative of the origin). Only the
    /// alternatives a plan can use are stored (see ``unusableReason(_:origin:)``).
    @discardableResult
    public func update(_ origin: AltSvcOrigin, with header: AltSvcHeader, scope: AltSvcScope = .everyone)
        -> AltSvcReport
    {
        let now = clock.now()
        let key = Key(origin: origin, scope: scope)
        var report = AltSvcReport(cleared: false, recorded: [], ignored: [], scope: scope)
        switch header {
        case .clear:
            report.cleared = true
        case .alternatives(let alternatives):
            for alternative in alternatives {
                if let reason = Self.unusableReason(alternative, origin: origin) {
                    report.ignored.append(AltSvcReport.Ignored(alternative: alternative, reason: reason))
                } else {
                    report.recorded.append(alternative)
                }
            }
        }
        let stored = report.recorded.map { Stored(alternative: $0, expires: now + Double($0.maxAge)) }
        state.withLock { entries in
            guard !stored.isEmpty else {
                entries.removeValue(forKey: key)
                return
            }
            entries[key] = OriginEntry(alternatives: stored, updated: now)
            if case .user(let uid) = scope {
                let perUser = max(1, maxOrigins / 8)
                var own = entries.filter { $0.key.scope == .user(uid) }
                if own.count > perUser {
                    Self.evict(&own, keeping: key, limit: perUser)
                    for victim in entries.keys where victim.scope == .user(uid) && own[victim] == nil {
                        entries.removeValue(forKey: victim)
                    }
                }
            }
            if entries.count > maxOrigins { Self.evict(&entries, keeping: key, limit: maxOrigins) }
        }
        return report
    }

    /// Why a connection plan cannot use `alternative` of `origin`, or nil when it can.
    public static func unusableReason(_ alternative: AltSvcAlternative, origin: AltSvcOrigin) -> String? {
        let id = alternative.protocolID
        if id != "h3" {
            // RFC 9114 §3.1: "h3" is HTTP/3; "h3-NN" were drafts no server should still need.
            if HTTPSProcessing.isQUICALPN(id) { return "\(id) is a draft of HTTP/3: only h3 (RFC 9114) is used" }
            return "\(id) is not HTTP/3: only h3 alternatives change a connection plan"
        }
        if alternative.maxAge == 0 { return "ma=0 means already stale (RFC 7838 §3.1)" }
        if let host = alternative.host, host != origin.host, IPAddressText.literal(host) != nil {
            return "alternative host \(host) is an address literal: only host names are used"
        }
        return nil
    }

    /// The unexpired alternatives of `origin` for `caller`: the caller's own reports (when not root), then root's;
    /// in the server's order of preference; `maxAge` is the time left.
    public func alternatives(for origin: AltSvcOrigin, caller: UInt32? = nil) -> [AltSvcAlternative] {
        let now = clock.now()
        var scopes: [AltSvcScope] = [.everyone]
        if case .user = AltSvcScope(uid: caller) { scopes.insert(AltSvcScope(uid: caller), at: 0) }
        return state.withLock { entries in
            var result: [AltSvcAlternative] = []
            for scope in scopes {
                let key = Key(origin: origin, scope: scope)
                guard let entry = entries[key] else { continue }
                let live = entry.alternatives.filter { $0.expires > now }
                if live.isEmpty {
                    entries.removeValue(forKey: key)
                } else if live.count != entry.alternatives.count {
                    entries[key]?.alternatives = live
                }
                for stored in live {
                    var alternative = stored.alternative
                    alternative.maxAge = wholeSeconds(stored.expires - now)
                    let duplicate = result.contains { known in
                        (known.protocolID, known.host, known.port)
                            == (alternative.protocolID, alternative.host, alternative.port)
                    }
                    if !duplicate { result.append(alternative) }
                }
            }
            return result
        }
    }

    /// Whether `origin` currently advertises HTTP/3 (ALPN `h3`, RFC 9114 §3.1) on any alternative, for `caller`.
    ///
    /// Draft versions such as `h3-29` do not count.
    public func h3(for origin: AltSvcOrigin, caller: UInt32? = nil) -> Bool {
        alternatives(for: origin, caller: caller).contains { $0.protocolID == "h3" }
    }

    /// Forgets everything about `origin`, whoever reported it.
    ///
    /// - Returns: Whether the origin had alternatives.
    @discardableResult
    public func clear(_ origin: AltSvcOrigin) -> Bool {
        state.withLock { entries in
            let keys = entries.keys.filter { $0.origin == origin }
            for key in keys { entries.removeValue(forKey: key) }
            return !keys.isEmpty
        }
    }

    /// Call when the network configuration changes: drops every alternative not marked `persist=1`
    /// (RFC 7838 §3.1).
    ///
    /// - Returns: The number of alternatives dropped.
    @discardableResult
    public func networkChanged() -> Int {
        state.withLock { entries in
            var dropped = 0
            for key in Array(entries.keys) {
                guard let entry = entries[key] else { continue }
                let kept = entry.alternatives.filter { $0.alternative.persist }
                dropped += entry.alternatives.count - kept.count
                if kept.isEmpty {
                    entries.removeValue(forKey: key)
                } else {
                    entries[key]?.alternatives = kept
                }
            }
            return dropped
        }
    }

    /// Removes expired alternatives and origins left with none.
    ///
    /// - Returns: The number of origins removed.
    @discardableResult
    public func purgeExpired() -> Int {
        let now = clock.now()
        return state.withLock { entries in
            let before = entries.count
            entries = entries.compactMapValues { entry in
                var entry = entry
                entry.alternatives.removeAll { $0.expires <= now }
                return entry.alternatives.isEmpty ? nil : entry
            }
            return before - entries.count
        }
    }

    /// The number of (origin, scope) entries with stored alternatives (expired ones included until purged).
    public var count: Int {
        state.withLock { $0.count }
    }

    // MARK: - Persistence

    private static let fileFormat = "discoverd.altsvc"

    private struct PersistedOrigin: Codable {
        var origin: AltSvcOrigin
        var entry: OriginEntry
        /// The reporting user; absent for root's reports (and in files written before scopes existed).
        var uid: UInt32?
    }

    /// Saves every origin to `url` with an atomic replace (mode 0600); see ``OptimisticCache/save(to:)``.
    ///
    /// - Throws: ``CachePersistenceError`` with code `.io`.
    public func save(to url: URL) throws(CachePersistenceError) {
        let origins = state.withLock { entries in
            entries.map { Lenient(PersistedOrigin(origin: $0.key.origin, entry: $0.value, uid: $0.key.scope.uid)) }
        }
        try CachePersistence.write(origins, format: Self.fileFormat, savedAt: clock.now(), to: url)
    }

    /// Loads origins saved by ``save(to:)``, skipping expired alternatives and origins already present.
    ///
    /// - Returns: How many origins were loaded, skipped and invalid.
    /// - Throws: ``CachePersistenceError`` (`.notFound`, `.corrupt`, `.unsupportedVersion`, `.tooLarge`, `.io`);
    ///   the daemon logs it and starts empty.
    @discardableResult
    public func load(from url: URL) throws(CachePersistenceError) -> CacheLoadResult {
        let origins = try CachePersistence.read([Lenient<PersistedOrigin>].self, format: Self.fileFormat, from: url)
        let now = clock.now()
        return state.withLock { entries in
            var result = CacheLoadResult()
            for persisted in origins {
                guard let persisted = persisted.element else {
                    result.invalid += 1
                    continue
                }
                // Cap lifetimes at 2^31 s from now (RFC 7234 §1.2.1) so an edited file cannot pin data forever.
                let limit = now + Double(1 << 31)
                let live = persisted.entry.alternatives.compactMap { stored -> Stored? in
                    guard stored.expires.isFinite, stored.expires > now else { return nil }
                    return Stored(alternative: stored.alternative, expires: min(stored.expires, limit))
                }
                let key = Key(origin: persisted.origin, scope: AltSvcScope(uid: persisted.uid))
                guard !live.isEmpty, entries[key] == nil else {
                    result.skipped += 1
                    continue
                }
                entries[key] = OriginEntry(
                    alternatives: Array(live.prefix(AltSvcHeader.maxAlternatives)),
                    updated: persisted.entry.updated.isFinite ? persisted.entry.updated : now
                )
                result.loaded += 1
            }
            if entries.count > maxOrigins { Self.evict(&entries, keeping: nil, limit: maxOrigins) }
            return result
        }
    }

    /// Drops the least recently reported origins, 1/16 of the limit at a time, never `keeping`.
    private static func evict(_ entries: inout [Key: OriginEntry], keeping: Key?, limit: Int) {
        let target = limit - max(1, limit / 16)
        let excess = entries.count - max(target, 0)
        guard excess > 0 else { return }
        let victims = entries.filter { $0.key != keeping }
            .map { (updated: $0.value.updated, key: $0.key) }
            .sorted { $0.updated < $1.updated }
            .prefix(excess)
        for victim in victims { entries.removeValue(forKey: victim.key) }
    }
}
