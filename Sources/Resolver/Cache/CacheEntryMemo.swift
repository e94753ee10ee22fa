import Synchronization

/// Values derived from one cache entry, computed on first use and dropped with the entry.
///
/// A hit of the hot methods should not redo work that depends only on the entry: the resolver keeps the RFC 9460
/// processing of an HTTPS RRset (or the address texts of an A/AAAA RRset) here, and the varlink adapter keeps the
/// encoded reply. A refreshed entry is a new ``CachedRRset`` with a new memo and a new ``generation``, so nothing
/// derived from older data can be served for it.
public final class CacheEntryMemo: Sendable {
    private static let counter = Atomic<UInt64>(0)

    /// Unique for the life of the process: identifies the entry's data in encodings that span several entries.
    public let generation: UInt64

    private struct State {
        var derived: (any Sendable)?
        var encoded: [Int: any Sendable] = [:]
    }

    private let state = Mutex(State())

    init() {
        generation = Self.counter.add(1, ordering: .relaxed).newValue
    }

    /// The resolver's derived value, computed by `make` on first use (several threads may compute it at once; the
    /// results are equal, one is kept).
    func derived<T: Sendable>(_ make: () -> T) -> T {
        if let value = state.withLock({ $0.derived }) as? T { return value }
        let value = make()
        state.withLock { $0.derived = value }
        return value
    }

    /// An encoding a front end stored under `key` (e.g. a reply for one method and port), or nil.
    public func encoded<T: Sendable>(_ key: Int, as type: T.Type = T.self) -> T? {
        state.withLock { $0.encoded[key] } as? T
    }

    /// Stores an encoding under `key`; it lives as long as the entry.
    public func setEncoded(_ value: some Sendable, for key: Int) {
        state.withLock { $0.encoded[key] = value }
    }
}
