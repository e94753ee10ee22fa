import DNSCore
import Synchronization

/// Counters of the DNS stub, reported by `io.discoverd.Daemon.Status` under `stub`.
public struct StubStatistics: Sendable, Hashable, Codable {
    public var udpQueries = 0
    public var tcpQueries = 0
    /// Answered from fresh cache entries.
    public var cacheAnswers = 0
    /// Answered from expired entries under optimistic DNS (RFC 8767).
    public var staleAnswers = 0
    /// Needed an upstream query.
    public var forwarded = 0
    /// Answered through mDNS (`.local`).
    public var local = 0
    /// Clients outside `[stub] allow`.
    public var refused = 0
    /// UDP replies cut to fit the client's size (TC set).
    public var truncated = 0
    public var formatErrors = 0
    public var serverFailures = 0

    public init() {}
}

/// The live counters behind ``StubStatistics``; lock-free so the hot path pays one relaxed atomic add per event.
final class StubCounters: Sendable {
    let udpQueries = Atomic<Int>(0)
    let tcpQueries = Atomic<Int>(0)
    let cacheAnswers = Atomic<Int>(0)
    let staleAnswers = Atomic<Int>(0)
    let forwarded = Atomic<Int>(0)
    let local = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
    let truncated = Atomic<Int>(0)
    let formatErrors = Atomic<Int>(0)
    let serverFailures = Atomic<Int>(0)

    var snapshot: StubStatistics {
        var statistics = StubStatistics()
        statistics.udpQueries = udpQueries.load(ordering: .relaxed)
        statistics.tcpQueries = tcpQueries.load(ordering: .relaxed)
        statistics.cacheAnswers = cacheAnswers.load(ordering: .relaxed)
        statistics.staleAnswers = staleAnswers.load(ordering: .relaxed)
        statistics.forwarded = forwarded.load(ordering: .relaxed)
        statistics.local = local.load(ordering: .relaxed)
        statistics.refused = refused.load(ordering: .relaxed)
        statistics.truncated = truncated.load(ordering: .relaxed)
        statistics.formatErrors = formatErrors.load(ordering: .relaxed)
        statistics.serverFailures = serverFailures.load(ordering: .relaxed)
        return statistics
    }
}

extension Atomic where Value == Int {
    /// Counts one event.
    func bump() { wrappingAdd(1, ordering: .relaxed) }
}
