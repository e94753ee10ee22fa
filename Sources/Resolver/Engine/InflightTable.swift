import DNSCore
import Synchronization

/// Who a query is counted against: a uid on the API, an address on the DNS stub.
public enum QueryClient: Hashable, Sendable, CustomStringConvertible {
    case uid(UInt32)
    case address([UInt8])

    public var description: String {
        switch self {
        case .uid(let uid): return "uid \(uid)"
        case .address(let bytes) where bytes.count == 4: return bytes.map(String.init).joined(separator: ".")
        case .address(let bytes):
            return stride(from: 0, to: bytes.count - 1, by: 2).map {
                String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
            }.joined(separator: ":")
        }
    }
}

/// Bounds on upstream work (the role of Unbound's `num-queries-per-thread` and its per-client counterparts).
///
/// Every upstream query the resolver makes is one entry of its in-flight table until it ends, whoever started it
/// (a stub client, an API call, a refresh, a connection plan's target). Identical questions share one entry
/// (coalescing), so only distinct questions count. At a limit a new question is refused at once with
/// ``ResolverError/Code/tooManyQueries``; questions already in flight and cache hits are not affected.
public struct QueryLimits: Sendable, Hashable {
    /// Distinct upstream queries in flight at once, for everyone together (`[limits] upstream-queries`).
    public var maxQueries: Int
    /// Distinct upstream queries one client (a uid, an address) may have in flight
    /// (`[limits] upstream-queries-per-client`). Refreshes count only against ``maxQueries``.
    public var maxQueriesPerClient: Int

    /// The defaults: 512 in all, 128 per client. Each query holds at most one socket at a time, so the socket
    /// budget of the upstream transport (1024 by default) is never the limit that bites first.
    public init(maxQueries: Int = 512, maxQueriesPerClient: Int = 128) {
        self.maxQueries = maxQueries
        self.maxQueriesPerClient = maxQueriesPerClient
    }
}

/// What the in-flight table saw, for Status.
public struct InflightStatistics: Sendable, Hashable {
    /// Limits in effect.
    public var limits: QueryLimits
    /// Distinct upstream queries in flight now.
    public var inflight: Int
    /// The most in flight at once since start.
    public var peak: Int
    /// Questions refused at the global limit.
    public var refusedGlobal: UInt64
    /// Questions refused at a client's limit.
    public var refusedPerClient: UInt64
    /// Questions that joined one already in flight instead of asking again.
    public var coalesced: UInt64
    /// The client with the most queries in flight now, and how many.
    public var busiestClient: String?
    public var busiestClientInflight: Int
}

/// The key of an upstream question: what is cached, plus everything that changes the query sent (DO, CD).
struct InflightKey: Hashable, Sendable {
    var cacheKey: CacheKey
    var dnssecOK: Bool
    var checkingDisabled: Bool
}

/// The resolver's one in-flight table: coalesces identical questions and bounds distinct ones.
///
/// Not generic: a generic `InPlaceFetch` looked its field types' metadata up in the runtime's cache each time one
/// was freed (three lookups, with locks, per miss). The outcome is the resolver's ``DNSResolver/FetchOutcome``.
final class InflightTable: Sendable {
    typealias Outcome = DNSResolver.FetchOutcome

    /// A question in flight: in a task of its own, or run in place by the caller that started it
    /// (``admitInPlace(_:client:)``). Either way every joiner waits for the same outcome.
    enum Running: Sendable {
        case task(Task<Outcome, Never>)
        case inPlace(InPlaceFetch)

        var value: Outcome {
            get async {
                switch self {
                case .task(let task): await task.value
                case .inPlace(let fetch): await fetch.value
                }
            }
        }
    }

    enum Admission {
        case joined(Running)
        case started(Task<Outcome, Never>)
        case refused(global: Bool)
    }

    enum InPlaceAdmission {
        case joined(Running)
        /// The caller runs the question itself, then hands its outcome to ``finishInPlace(_:_:outcome:)``.
        case run(InPlaceFetch)
        case refused(global: Bool)
    }

    private struct Entry {
        var running: Running
        var client: QueryClient?
    }

    private struct State {
        var entries: [InflightKey: Entry] = [:]
        var perClient: [QueryClient: Int] = [:]
        var limits: QueryLimits
        var peak = 0
        var refusedGlobal: UInt64 = 0
        var refusedPerClient: UInt64 = 0
        var coalesced: UInt64 = 0
    }

    private let state: Mutex<State>

    init(limits: QueryLimits) {
        state = Mutex(State(limits: limits))
    }

    var limits: QueryLimits {
        get { state.withLock { $0.limits } }
        set { state.withLock { $0.limits = newValue } }
    }

    /// Whether a new question for `key` from `client` would be refused now (it would neither join one in flight
    /// nor fit under the limits); true for the global limit in `global`. Counted like a refusal, since the caller
    /// answers it as one without asking ``admit(_:client:body:)``.
    func refusal(_ key: InflightKey, client: QueryClient?) -> (refused: Bool, global: Bool) {
        state.withLock { state in
            if state.entries[key] != nil { return (false, false) }
            guard let global = Self.refusal(&state, client: client) else { return (false, false) }
            return (true, global)
        }
    }

    /// The limit a new question of `client` meets (true: the global one, false: the client's), counted; nil when it
    /// fits. The one check behind ``admit(_:client:body:)`` and ``refusal(_:client:)``.
    private static func refusal(_ state: inout State, client: QueryClient?) -> Bool? {
        if state.entries.count >= max(state.limits.maxQueries, 1) {
            state.refusedGlobal &+= 1
            return true
        }
        if let client, state.perClient[client, default: 0] >= max(state.limits.maxQueriesPerClient, 1) {
            state.refusedPerClient &+= 1
            return false
        }
        return nil
    }

    /// The question in flight for `key`, if any.
    func running(_ key: InflightKey) -> Running? {
        state.withLock { $0.entries[key]?.running }
    }

    /// Joins the question in flight for `key`, or starts `body` as a new one when the limits allow. The task
    /// removes itself from the table when `body` returns.
    func admit(
        _ key: InflightKey, client: QueryClient?, executor: (any TaskExecutor)? = nil,
        body: nonisolated(nonsending) @escaping @Sendable () async -> Outcome
    ) -> Admission {
        state.withLock { state in
            if let running = state.entries[key] {
                state.coalesced &+= 1
                return .joined(running.running)
            }
            if let global = Self.refusal(&state, client: client) { return .refused(global: global) }
            let task = Task(executorPreference: executor) { [self] in
                let outcome = await body()
                finish(key)
                return outcome
            }
            Self.enter(&state, key, Entry(running: .task(task), client: client))
            return .started(task)
        }
    }

    /// Joins the question in flight for `key`, or registers one that the caller runs itself, in its own task:
    /// no task made, started and awaited for it (7 % of a DoT miss's instructions, BENCHMARKS.md round 8). Only
    /// for a caller that is never cancelled while it runs the question (the DNS stub's): its joiners share what it
    /// gets. The caller must end a `.run` with ``finishInPlace(_:_:outcome:)``, whatever happens.
    func admitInPlace(_ key: InflightKey, client: QueryClient?) -> InPlaceAdmission {
        state.withLock { state in
            if let running = state.entries[key] {
                state.coalesced &+= 1
                return .joined(running.running)
            }
            if let global = Self.refusal(&state, client: client) { return .refused(global: global) }
            let fetch = InPlaceFetch()
            Self.enter(&state, key, Entry(running: .inPlace(fetch), client: client))
            return .run(fetch)
        }
    }

    /// Ends a question run in place: out of the table, then its joiners resumed with `outcome`.
    func finishInPlace(_ key: InflightKey, _ fetch: InPlaceFetch, outcome: Outcome) {
        finish(key)
        fetch.finish(outcome)
    }

    private static func enter(_ state: inout State, _ key: InflightKey, _ entry: Entry) {
        state.entries[key] = entry
        if let client = entry.client { state.perClient[client, default: 0] += 1 }
        state.peak = max(state.peak, state.entries.count)
    }

    private func finish(_ key: InflightKey) {
        state.withLock { state in
            guard let entry = state.entries.removeValue(forKey: key), let client = entry.client else { return }
            let left = (state.perClient[client] ?? 1) - 1
            if left > 0 { state.perClient[client] = left } else { state.perClient.removeValue(forKey: client) }
        }
    }

    var statistics: InflightStatistics {
        state.withLock { state in
            let busiest = state.perClient.max { $0.value < $1.value }
            return InflightStatistics(
                limits: state.limits, inflight: state.entries.count, peak: state.peak,
                refusedGlobal: state.refusedGlobal, refusedPerClient: state.refusedPerClient,
                coalesced: state.coalesced, busiestClient: busiest?.key.description,
                busiestClientInflight: busiest?.value ?? 0)
        }
    }
}

/// The outcome of a question run in place (``InflightTable/admitInPlace(_:client:)``) and the joiners waiting
/// for it.
final class InPlaceFetch: Sendable {
    typealias Outcome = DNSResolver.FetchOutcome

    private struct State {
        var outcome: Outcome?
        var waiters: [UnsafeContinuation<Outcome, Never>] = []
    }
    private let state = Mutex(State())

    /// The outcome, once the runner has it.
    var value: Outcome {
        get async {
            if let done = state.withLock({ $0.outcome }) { return done }
            return await withUnsafeContinuation { continuation in
                let done: Outcome? = state.withLock { state in
                    if let outcome = state.outcome { return outcome }
                    state.waiters.append(continuation)
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
        }
    }

    func finish(_ outcome: Outcome) {
        let waiters = state.withLock { state in
            state.outcome = outcome
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }
}
