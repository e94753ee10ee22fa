import DNSCore
import Logging
import NIOCore

/// Runs one exchange of a try for an ``UpstreamTransport``: ``UpstreamClient`` gives it a fresh query (a new
/// random ID), times it, records it as a `QueryAttempt`, logs it and counts its socket against the budget.
typealias TryExchange = nonisolated(nonsending) (QueryTransport, nonisolated(nonsending) (PendingQuery) async -> ExchangeOutcome)
    async -> ExchangeOutcome

/// How one upstream server is reached.
///
/// ``UpstreamClient`` owns what is the same for every way of reaching a server: the list of upstreams, the
/// rounds and failover, the query template, the attempts report and the socket budget. A transport does one try
/// to its server: plain DNS (``PlainDNSTransport``) today; DNS over TLS and DNS over HTTPS are further
/// conformances (a kept, multiplexed connection behind the same call), not new code paths in the client or the
/// resolution walk above it.
protocol UpstreamTransport: Sendable {
    /// One try to the server: one or more exchanges, each through `run`.
    nonisolated(nonsending) func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome
    /// The event loop that owns this upstream's kept connection, if it has one (``DNSTransport/preferredExecutor``).
    var connectionExecutor: EventLoopTaskExecutor? { get }
    /// The kept connection whose every try is one exchange on it (DoT, DoH), for tries without a task
    /// (``UpstreamClient/startQuery(_:dnssecOK:completion:)``); nil for any other transport.
    var keptConnection: (connection: any EncryptedConnection, kind: QueryTransport)? { get }
}

extension UpstreamTransport {
    /// The kept connection's loop; plain DNS opens a socket per try on the loop it runs on: no loop of its own.
    var connectionExecutor: EventLoopTaskExecutor? { keptConnection?.connection.taskExecutor }
    var keptConnection: (connection: any EncryptedConnection, kind: QueryTransport)? { nil }
}

/// Plain DNS (RFC 1035): UDP with EDNS(0) from a fresh socket, then TCP to the same server when the UDP reply is
/// truncated (RFC 7766 §5).
struct PlainDNSTransport: UpstreamTransport {
    let address: SocketAddress

    nonisolated(nonsending) func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome {
        let udp = await run(.udp) { query in
            await UDPExchange.run(
                query, to: address, timeout: TimeAmount(configuration.timeout), on: loop, logger: logger)
        }
        guard case .truncated = udp else { return udp }
        if Task.isCancelled { return .cancelled }
        return await run(.tcp) { query in
            await TCPExchange.run(
                query, to: address, timeout: TimeAmount(configuration.tcpTimeout), on: loop, logger: logger)
        }
    }
}
