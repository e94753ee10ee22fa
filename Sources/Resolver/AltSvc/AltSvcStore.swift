import Foundation
import Synchronization

/// Alternative services learned from `Alt-Svc` headers (RFC 7838), per origin, with absolute expiry.
///
/// Fed by `io.discoverd.Resolver.ReportAltSvc` and consulted by `ConnectionPlan` (`h3Source: "altsvc"`).
/// Thread-safe; persisted next to the DNS cache with ``save(to:)`` and ``load(from:)``.
public final class AltSvcStore: Sendable {
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
    private let state: Mutex<[AltSvcOrigin: OriginEntry]>

    /// Creates an empty store.
    ///
    /// - Parameters:
    ///   - maxOrigins: Bound on the origins kept; past it the least recently reported ones are dropped.
    ///   - clock: The wall clock; tests pass a manual one.
    public init(maxOrigins: Int = 10_000, clock: any CacheClock = SystemCacheClock()) {
        self.maxOrigins = max(maxOrigins, 1)
        self.clock = clock
        self.state = Mutex([:])
    }

    /// Handles `ReportAltSvc(origin, header)`: parses both and updates the origin.
    ///
    /// - Throws: ``AltSvcError``, `.invalidOrigin` or `.malformedHeader`; nothing is changed then.
    public func report(origin: String, header: String) throws(AltSvcError) {
        let origin = try AltSvcOrigin(parsing: origin)
        let header = try AltSvcHeader(parsing: header)
        update(origin, with: header)
    }

    /// Applies a parsed header: `clear` removes the origin's alternatives; a list replaces them all
    /// (RFC 7838 §3: a new field value invalidates and replaces every cached alternative of the origin).
    public func update(_ origin: AltSvcOrigin, with header: AltSvcHeader) {
        let now = clock.now()
        state.withLock { entries in
            switch header {
            case .clear:
                entries.removeValue(forKey: origin)
            case .alternatives(let alternatives):
                // ma=0 alternatives are already stale (RFC 7838 §3.1) and are not kept.
                let stored = alternatives.filter { $0.maxAge > 0 }
                    .map { Stored(alternative: $0, expires: now + Double($0.maxAge)) }
                if stored.isEmpty {
                    entries.removeValue(forKey: origin)
                    return
                }
                entries[origin] = OriginEntry(alternatives: stored, updated: now)
                if entries.count > maxOrigins { Self.evict(&entries, keeping: origin, limit: maxOrigins) }
            }
        }
    }

    /// The unexpired alternatives of `origin`, in the server's order of preference; `maxAge` is the time left.
    public func alternatives(for origin: AltSvcOrigin) -> [AltSvcAlternative] {
        let now = clock.now()
        return state.withLock { entries in
            guard let entry = entries[origin] else { return [] }
            let live = entry.alternatives.filter { $0.expires > now }
            if live.isEmpty {
                entries.removeValue(forKey: origin)
            } else if live.count != entry.alternatives.count {
                entries[origin]?.alternatives = live
            }
            return live.map { stored in
                var alternative = stored.alternative
                alternative.maxAge = wholeSeconds(stored.expires - now)
                return alternative
            }
        }
    }

    /// Whether `origin` currently advertises HTTP/3 (ALPN `h3`, RFC 9114 §3.1) on any alternative.
    ///
    /// Draft versions such as `h3-29` do not count.
    public func h3(for origin: AltSvcOrigin) -> Bool {
        alternatives(for: origin).contains { $0.protocolID == "h3" }
    }

    /// Forgets everything about `origin`.
    ///
    /// - Returns: Whether the origin had alternatives.
    @discardableResult
    public func clear(_ origin: AltSvcOrigin) -> Bool {
        state.withLock { $0.removeValue(forKey: origin) != nil }
    }

    /// Call when the network configuration changes: drops every alternative not marked `persist=1`
    /// (RFC 7838 §3.1).
    ///
    /// - Returns: The number of alternatives dropped.
    @discardableResult
    public func networkChanged() -> Int {
        state.withLock { entries in
            var dropped = 0
            for origin in Array(entries.keys) {
                guard let entry = entries[origin] else { continue }
                let kept = entry.alternatives.filter { $0.alternative.persist }
                dropped += entry.alternatives.count - kept.count
                if kept.isEmpty {
                    entries.removeValue(forKey: origin)
                } else {
                    entries[origin]?.alternatives = kept
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

    /// The number of origins with stored alternatives (expired ones included until purged).
    public var count: Int {
        state.withLock { $0.count }
    }

    // MARK: - Persistence

    private static let fileFormat = "discoverd.altsvc"

    private struct PersistedOrigin: Codable {
        var origin: AltSvcOrigin
        var entry: OriginEntry
    }

    /// Saves every origin to `url` with an atomic replace (mode 0600); see ``OptimisticCache/save(to:)``.
    ///
    /// - Throws: ``CachePersistenceError`` with code `.io`.
    public func save(to url: URL) throws(CachePersistenceError) {
        let origins = state.withLock { entries in
            entries.map { Lenient(PersistedOrigin(origin: $0.key, entry: $0.value)) }
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
                guard !live.isEmpty, entries[persisted.origin] == nil else {
                    result.skipped += 1
                    continue
                }
                entries[persisted.origin] = OriginEntry(
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
    private static func evict(_ entries: inout [AltSvcOrigin: OriginEntry], keeping: AltSvcOrigin?, limit: Int) {
        let target = limit - max(1, limit / 16)
        let excess = entries.count - max(target, 0)
        guard excess > 0 else { return }
        let victims = entries.filter { $0.key != keeping }
            .map { (updated: $0.value.updated, origin: $0.key) }
            .sorted { $0.updated < $1.updated }
            .prefix(excess)
        for victim in victims { entries.removeValue(forKey: victim.origin) }
    }
}
