import DNSCore
import DNSStub
import DiscoverAPI

extension StubStatus {
    /// The wire form of the stub's counters, caps and TCP usage; nil when it serves no socket.
    init?(listening: [String], statistics: StubStatistics, settings: StubSettings, cookies: Bool,
        tcp: DNSStubServer.TCPUsage)
    {
        guard !listening.isEmpty else { return nil }
        self.init(
            listen: listening, queries: StubQueryCounts(udp: statistics.udpQueries, tcp: statistics.tcpQueries),
            cacheAnswers: statistics.cacheAnswers, staleAnswers: statistics.staleAnswers,
            forwarded: statistics.forwarded, local: statistics.local, refused: statistics.refused,
            truncated: statistics.truncated, formatErrors: statistics.formatErrors,
            serverFailures: statistics.serverFailures,
            limits: StubLimits(
                maxTcp: settings.maxTCPConnections, maxTcpPerAddress: settings.maxTCPConnectionsPerAddress,
                tcpIdleTimeout: Int(settings.tcpIdleTimeout.components.seconds),
                refusalsPerSecond: settings.refusalsPerSecond, cookies: cookies),
            tcpConnections: tcp.connections, tcpRefused: tcp.refused,
            nearestToCaps: tcp.nearestToCap.map { StubAddressUsage(address: $0.address, connections: $0.connections) })
    }

    /// The status of a running stub: its sockets, the responder's counters and settings, the server's TCP usage.
    init?(server: DNSStubServer, responder: StubResponder) {
        self.init(
            listening: server.listening, statistics: responder.statistics, settings: responder.settings,
            cookies: responder.cookiesEnabled, tcp: server.tcpUsage())
    }
}
