import DNSCore
import DNSStub
import DiscoverAPI

extension StubStatus {
    /// The wire form of the stub's counters; nil when it serves no socket.
    init?(listening: [String], statistics: StubStatistics) {
        guard !listening.isEmpty else { return nil }
        self.init(
            listen: listening, queries: StubQueryCounts(udp: statistics.udpQueries, tcp: statistics.tcpQueries),
            cacheAnswers: statistics.cacheAnswers, staleAnswers: statistics.staleAnswers,
            forwarded: statistics.forwarded, local: statistics.local, refused: statistics.refused,
            truncated: statistics.truncated, formatErrors: statistics.formatErrors,
            serverFailures: statistics.serverFailures)
    }
}
