import NIOCore
import Testing

@testable import Resolver

/// ``UpstreamStatistics``: which reason `discover status` shows as an upstream's last failure.
@Suite struct UpstreamStatisticsTests {
    static let silent = "no reply on the connection for 3000 ms"

    static func status(_ statistics: UpstreamStatistics) throws -> UpstreamStatus {
        statistics.status(
            server: try UpstreamServer(parsing: "192.0.2.53#dns.example.test"), transport: "tls", origin: .configured,
            note: nil)
    }

    /// A try times out, and its connection, silent for as long, is let go as dead (the order of the two records
    /// is a race): the reason shown is the connection's, not the bare "timeout", and the try still counts once.
    @Test(arguments: [true, false])
    func aTimedOutTryKeepsWhatItsConnectionRecordedMeanwhile(connectionFirst: Bool) throws {
        let statistics = UpstreamStatistics()
        let sent = NIODeadline.now()
        if connectionFirst { statistics.connectionFailed(Self.silent) }
        statistics.tried(milliseconds: nil, failure: "timeout", timedOutSince: sent)
        if !connectionFirst { statistics.connectionFailed(Self.silent) }
        let status = try Self.status(statistics)
        #expect(status.lastFailure == Self.silent, "\(status)")
        #expect(status.queries == 1 && status.failures == 1, "\(status)")
    }

    /// A reason recorded before the try was sent is older news: the try's timeout replaces it.
    @Test func aTimeoutAfterAnEarlierConnectionFailureIsTheLastReason() throws {
        let statistics = UpstreamStatistics()
        statistics.connectionFailed("connect: Connection refused")
        statistics.tried(milliseconds: nil, failure: "timeout", timedOutSince: .now() + .milliseconds(1))
        #expect(try Self.status(statistics).lastFailure == "timeout")
    }

    /// Every other failure of a try is its own reason, whatever the connection recorded.
    @Test func aFailedTryReplacesTheConnectionsReason() throws {
        let statistics = UpstreamStatistics()
        statistics.connectionFailed(Self.silent)
        statistics.tried(milliseconds: nil, failure: "failed: HTTP status 500")
        let status = try Self.status(statistics)
        #expect(status.lastFailure == "failed: HTTP status 500" && status.failures == 1, "\(status)")
    }
}
