import Logging
import NIOCore

/// A kept connection to one encrypted upstream (``DoTConnection``, ``DoHConnection``).
protocol EncryptedConnection: AnyObject, Sendable {
    var statistics: UpstreamStatistics { get }
    /// One query on the connection, opened when needed; its reply or why there is none, within `timeout`.
    func exchange(_ query: PendingQuery, timeout: TimeAmount) async -> ExchangeOutcome
    /// Closes the connection; waiting tries fail.
    func shutdown()
}

/// DNS over TLS or DNS over HTTPS: every try is one exchange on the upstream's kept connection.
struct EncryptedTransport: UpstreamTransport {
    let connection: any EncryptedConnection
    let kind: QueryTransport

    func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome {
        // The connection may need a TCP and a TLS handshake first: the TCP try's timeout covers it.
        await run(kind) { query in
            await connection.exchange(query, timeout: TimeAmount(configuration.tcpTimeout))
        }
    }
}

/// An upstream that may not be used as things are (`encryption = strict` and no encrypted path to it): every try
/// fails at once, nothing is sent.
struct RefusedTransport: UpstreamTransport {
    let reason: String

    func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome {
        .insecure(reason)
    }
}
