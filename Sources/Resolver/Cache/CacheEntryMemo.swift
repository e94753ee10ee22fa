import DNSCore
import Synchronization

/// Values derived from one cache entry, computed on first use and dropped with the entry.
///
/// A hit of the hot methods should not redo work that depends only on the entry: the resolver keeps the RFC 9460
/// processing of an HTTPS RRset (or the address texts of an A/AAAA RRset) here. A refreshed entry is a new ``CachedRRset`` with a new memo and a new ``generation``, so nothing
/// derived from older data can be served for it.
public final class CacheEntryMemo: Sendable {
    private static let counter = Atomic<UInt64>(0)

    /// Unique for the life of the process: identifies the entry's data (see `CacheDependencies`).
    public let generation: UInt64

    private let derivedValue = Mutex<(any Sendable)?>(nil)

    init() {
        generation = Self.counter.add(1, ordering: .relaxed).newValue
    }

    /// The resolver's derived value, computed by `make` on first use (several threads may compute it at once; the
    /// results are equal, one is kept).
    func derived<T: Sendable>(_ make: () -> T) -> T {
        if let value = derivedValue.withLock({ $0 }) as? T { return value }
        let value = make()
        derivedValue.withLock { $0 = value }
        return value
    }
}
