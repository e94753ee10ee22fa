import Logging
import NIOCore

/// The kept connections to one encrypted upstream: a ``LoopDoTConnection`` (DoT) or a ``TLSConnectionPool`` of
/// ``DoHSession`` (DoH).
protocol EncryptedConnection: AnyObject, Sendable {
    var statistics: UpstreamStatistics { get }
    /// The event loop that owns the connection and all its state.
    var loop: any EventLoop { get }
    /// `loop` as a task executor (``DNSTransport/preferredExecutor``).
    var taskExecutor: EventLoopTaskExecutor { get }
    /// On `loop`: sends `query` (connecting first when needed); `completion` gets the reply or why there is none.
    func start(_ query: PendingQuery, timeout: TimeAmount, completion: TryCompletion)
    /// Closes the connection; waiting tries fail.
    func shutdown()
    /// Whether ``start(_:timeout:completion:)`` may be called on any thread (``LoopDoTConnection``: the stub's
    /// worker that receives a miss writes its query itself); otherwise it is called on `loop`.
    var startsAnywhere: Bool { get }
}

extension EncryptedConnection {
    var startsAnywhere: Bool { false }

    /// One query on the connection, opened when needed; its reply or why there is none, within `timeout`.
    /// Cancelling the calling task ends the try at once (the connection stays).
    nonisolated(nonsending) func exchange(_ query: PendingQuery, timeout: TimeAmount) async -> ExchangeOutcome {
        let completion = TryCompletion(loop: loop)
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                // A task that prefers this loop (``DNSTransport/preferredExecutor``) is here already.
                if loop.inEventLoop {
                    begin(query, timeout: timeout, completion: completion, continuation: continuation)
                } else {
                    loop.execute {
                        self.begin(query, timeout: timeout, completion: completion, continuation: continuation)
                    }
                }
            }
        } onCancel: {
            completion.cancel()
        }
    }

    /// ``exchange(_:timeout:)`` without a task, from any thread: `callback` gets the outcome on `loop` (on the
    /// thread that reads the reply, for a connection that ``startsAnywhere``).
    func exchange(_ query: PendingQuery, timeout: TimeAmount, then callback: @escaping @Sendable (ExchangeOutcome) -> Void) {
        let completion = TryCompletion(loop: loop)
        if startsAnywhere || loop.inEventLoop {
            completion.wait(callback)
            start(query, timeout: timeout, completion: completion)
        } else {
            loop.execute {
                completion.wait(callback)
                self.start(query, timeout: timeout, completion: completion)
            }
        }
    }

    /// On `loop`: waits for the try's end and starts it, unless a cancel ended it first.
    private func begin(
        _ query: PendingQuery, timeout: TimeAmount, completion: TryCompletion,
        continuation: UnsafeContinuation<ExchangeOutcome, Never>
    ) {
        completion.wait(continuation)
        if !completion.isEnded { start(query, timeout: timeout, completion: completion) }
    }
}

/// Builds the kept connection of a DoT or DoH upstream.
enum EncryptedConnections {
    /// The failure of a query whose connection the server closed before answering it (such a query is sent again:
    /// ``EncryptedTransport/resends(_:)``).
    static let closedByServer = "the server closed the connection"

    /// The failure of a query whose connection discoverd closed because the server had stopped answering on it;
    /// sent again on the next connection, as after the server's own close.
    static let abandoned = "its connection was closed: the server stopped answering on it"

    /// Whether a try that timed out after `timeout` finds its connection dead: nothing at all heard from the server
    /// since `lastHeard` for as long (``LoopDoTConnection``, ``TLSConnectionPool``).
    static func silent(since lastHeard: NIODeadline, timeout: TimeAmount, now: NIODeadline) -> Bool {
        now - lastHeard >= timeout
    }

    /// The log line and Status reason of a connection let go as ``silent(since:timeout:now:)``.
    static func reportStoppedAnswering(
        timeout: TimeAmount, waiting: Int, logger: Logger, statistics: UpstreamStatistics
    ) {
        let reason = "no reply on the connection for \(timeout.nanoseconds / 1_000_000) ms"
        logger.warning(
            "closing a connection the server stopped answering on",
            metadata: ["reason": "\(reason)", "dns.waiting": "\(waiting)"])
        statistics.connectionFailed(reason)
    }

    /// ``closedByServer`` with how the connection ended, when it broke rather than closed (`write: Broken pipe`).
    static func closedByServer(_ how: String) -> String { "\(closedByServer) (\(how))" }

    /// How the tries on an established connection end when it breaks with `outcome`: a network failure (a reset,
    /// no close_notify) as a close by the server, so they are sent again on the next connection (RFC 7766 §6.2.3;
    /// a server that stops after so many queries resets them unread); a TLS verification failure as it is.
    static func endingTries(_ outcome: ExchangeOutcome) -> ExchangeOutcome {
        guard case .failed(let how) = outcome else { return outcome }
        return .failed(closedByServer(how))
    }

    /// The loop of the DoT connections (their timers, and the queries of tasks and the API); the stub's workers
    /// run the rest on their own loops (``LoopDoTConnection``). Nil only when no thread could be made.
    static let home: IOLoop? = try? IOLoop(name: "dns-dot")

    /// A DoT or DoH connection to `server` at `address`, verified as ``TLSClientContext`` says (`identity`: what
    /// the certificate must prove besides its chain); nothing is opened until the first query.
    static func make(
        _ server: UpstreamServer, address: SocketAddress, configuration: UpstreamClient.Configuration,
        statistics: UpstreamStatistics, group: any EventLoopGroup, logger: Logger,
        identity: TLSClientContext.Identity = .configured
    ) throws -> any EncryptedConnection {
        let tls = try TLSClientContext(
            caFile: configuration.caFile, serverName: server.tlsName, alpn: server.transport == .https ? ["h2"] : [],
            identity: identity, pins: server.pinDigests)
        if server.transport == .tls {
            guard let home else { throw TLSClientError.setup("no thread for DNS over TLS could be started") }
            return LoopDoTConnection(
                server: server, address: address, tls: tls, statistics: statistics,
                idleTimeout: configuration.idleTimeout, policy: .dot, home: home, logger: logger)
        }
        let loop = group.next()
        let method = DoHMethod(get: configuration.dohGET)
        return TLSConnectionPool(
            server: server, address: address, tls: tls, statistics: statistics,
            idleTimeout: configuration.idleTimeout, policy: .doh, loop: loop, logger: logger
        ) { DoHSession(server: server, method: method, statistics: statistics, logger: logger) }
    }
}

/// DNS over TLS or DNS over HTTPS: every try is one exchange on the upstream's kept connection.
struct EncryptedTransport: UpstreamTransport {
    let connection: any EncryptedConnection
    let kind: QueryTransport

    var keptConnection: (connection: any EncryptedConnection, kind: QueryTransport)? { (connection, kind) }

    nonisolated(nonsending) func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome {
        // The connection may need a TCP and a TLS handshake first: the TCP try's timeout covers it.
        var outcome = await run(kind) { query in
            await connection.exchange(query, timeout: TimeAmount(configuration.tcpTimeout))
        }
        // RFC 7766 §6.2.3: a server may close an idle or busy connection with queries unanswered; they are sent
        // again, on the next connection, before the try counts as failed (`StartedQuery` does the same).
        for _ in 0..<Self.maximumResends where Self.resends(outcome) {
            outcome = await run(kind) { query in
                await connection.exchange(query, timeout: TimeAmount(configuration.tcpTimeout))
            }
        }
        return outcome
    }
}

extension EncryptedTransport {
    /// How often one query is sent again after the server closed its connection on it. More than once: a resent
    /// query may land on a connection the server is about to close too (one that stops after so many queries,
    /// dnsdist's `setMaxTCPQueriesPerConnection`, nginx's `keepalive_requests`); a bound, so that a query that
    /// makes the server close every connection it comes on costs four connections, not more.
    static let maximumResends = 3

    /// Whether a try's outcome is a query whose connection closed under it (the server's close, or ours of one it
    /// stopped answering on), which is sent again.
    static func resends(_ outcome: ExchangeOutcome) -> Bool {
        guard case .failed(let reason) = outcome else { return false }
        let closed = EncryptedConnections.closedByServer
        return reason == closed || reason.hasPrefix(closed + " (") || reason == EncryptedConnections.abandoned
    }
}

/// An upstream that may not be used as things are (`encryption = strict` and no encrypted path to it): every try
/// fails at once, nothing is sent.
struct RefusedTransport: UpstreamTransport {
    let reason: String

    nonisolated(nonsending) func attempt(
        _ configuration: UpstreamClient.Configuration, on loop: any EventLoop, logger: Logger, run: TryExchange
    ) async -> ExchangeOutcome {
        .insecure(reason)
    }
}
