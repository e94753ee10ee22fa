import DNSCore
import NIOCore

/// How a query travelled.
public enum QueryTransport: String, Sendable, Codable, Hashable {
    /// Plain DNS over UDP, and over TCP after truncation.
    case udp, tcp
    /// DNS over TLS (RFC 7858) on a kept connection.
    case tls
    /// DNS over HTTPS (RFC 8484) on a kept HTTP/2 connection.
    case https
}

/// One query sent to one upstream, for the timing report of docs/API.md (`timing.queries[]`).
public struct QueryAttempt: Sendable, Hashable, Codable {
    /// The query name (absolute, lowercased).
    public var name: String
    public var type: RRType
    /// The upstream, as `UpstreamServer.description`.
    public var server: String
    public var transport: QueryTransport
    /// From sending the query to accepting the response (or giving up).
    public var milliseconds: Double
    /// The response code text (`NOERROR`, `NXDOMAIN`, `SERVFAIL`...), or `TIMEOUT` when nothing acceptable came.
    public var rcode: String

    public init(name: String, type: RRType, server: String, transport: QueryTransport, milliseconds: Double, rcode: String) {
        self.name = name
        self.type = type
        self.server = server
        self.transport = transport
        self.milliseconds = milliseconds
        self.rcode = rcode
    }
}

/// An accepted response and every attempt it took.
public struct DNSExchange: Sendable {
    /// The response: it matched the query's ID, name, type and class.
    public var message: DNSMessage
    public var attempts: [QueryAttempt]
    /// The response came over DNS over TLS or HTTPS whose certificate was verified (a configured encrypted
    /// upstream, or a verified DDR designation; not the opportunistic profile): nobody on the path could alter it.
    public var authenticatedTransport: Bool

    public init(message: DNSMessage, attempts: [QueryAttempt], authenticatedTransport: Bool = false) {
        self.message = message
        self.attempts = attempts
        self.authenticatedTransport = authenticatedTransport
    }
}

/// Why no acceptable response came.
public struct DNSTransportError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// No upstream answered acceptably within the tries (including: only malformed or mismatched answers).
        case timeout
        /// The transport was not given any upstream.
        case noUpstreams
        /// The query could not be encoded (invalid name).
        case invalidQuery
        /// No upstream could be reached as the encryption settings demand: a TLS handshake or certificate check
        /// failed, an HTTPS reply was unusable, or `encryption = strict` left only plain upstreams. The message
        /// names the upstream and the reason; nothing was sent in clear text to an upstream that must be encrypted.
        case networkError
    }

    public var code: Code
    public var message: String
    /// Every attempt made, for the timing report.
    public var attempts: [QueryAttempt]
    /// For `timeout`: what the last try of each upstream that failed rather than waited said, naming the upstream
    /// ("192.0.2.1:53: receive: Connection refused", an ICMP port unreachable); empty when they only timed out.
    public var failures: [String]

    public init(code: Code, message: String, attempts: [QueryAttempt] = [], failures: [String] = []) {
        self.code = code
        self.message = message
        self.attempts = attempts
        self.failures = failures
    }

    public var description: String { message }
}

/// Sends one DNS question to the upstreams and returns the first acceptable response.
///
/// Contract (implemented by `UpstreamClient`):
/// - UDP first with EDNS0 (1232 bytes), a fresh random 16-bit ID and a fresh socket (random source port)
///   per try; TCP (2-byte length framing) to the same server when the UDP response has TC set.
/// - A response is accepted only if `DNSMessage.matches(id:question:)`; anything else (wrong ID, another
///   name, garbage) is dropped and the try keeps waiting until its timeout.
/// - SERVFAIL, REFUSED, NOTIMP and FORMERR move on to the next upstream (failover); when every upstream
///   answered like that, the last such response is returned (not thrown) so the caller can report its rcode.
///   NOERROR and NXDOMAIN are final.
/// - Per-try timeout and tries per upstream come from the transport's configuration.
public protocol DNSTransport: Sendable {
    nonisolated(nonsending) func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange
    /// The same with the DO bit (RFC 3225) set as given, so DNSSEC records come back for clients that ask.
    nonisolated(nonsending) func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange
    /// The upstreams, named as `QueryAttempt.server` names them, in failover order.
    var upstreamNames: [String] { get }
    /// The question to every upstream on its own (no failover between them), for evidence about each one
    /// (allow-downgrade's probe, docs/DNSSEC.md): one reply per upstream, nil where it gave nothing usable.
    func queryEach(_ question: DNSQuestion, dnssecOK: Bool) async -> [UpstreamReply]
    /// Where a task that queries the first upstream best runs, as a task executor: the event loop of its kept
    /// connection (DoT, DoH), so that such a task changes threads once, when it starts. Nil: no preference (plain
    /// DNS runs on whatever loop asks).
    var preferredExecutor: (any TaskExecutor)? { get }
    /// ``query(_:dnssecOK:)`` without a task, where the transport can (``UpstreamClient``: one upstream over its
    /// kept DoT or DoH connection): `completion` runs exactly once. False, with nothing started, where it cannot.
    func startQuery(
        _ question: DNSQuestion, dnssecOK: Bool,
        completion: @escaping @Sendable (Result<DNSExchange, DNSTransportError>) -> Void
    ) -> Bool
}

/// One upstream's reply to ``DNSTransport/queryEach(_:dnssecOK:)``.
public struct UpstreamReply: Sendable {
    /// As `QueryAttempt.server`.
    public var server: String
    /// The reply (any response code), or nil: a timeout, a refused connection, only garbage or mismatched replies.
    public var message: DNSMessage?

    public init(server: String, message: DNSMessage?) {
        self.server = server
        self.message = message
    }
}

extension DNSTransport {
    /// Transports that cannot set the DO bit answer without DNSSEC records.
    nonisolated(nonsending) public func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange {
        try await query(question)
    }

    /// A transport that cannot list its upstreams names none.
    public var upstreamNames: [String] { [] }

    /// A transport without kept connections prefers no executor.
    public var preferredExecutor: (any TaskExecutor)? { nil }

    /// A transport that only queries in a task starts nothing.
    public func startQuery(
        _ question: DNSQuestion, dnssecOK: Bool,
        completion: @escaping @Sendable (Result<DNSExchange, DNSTransportError>) -> Void
    ) -> Bool {
        false
    }

    /// A transport that cannot address its upstreams one by one: one query, the reply credited to the upstream
    /// that sent it (the last attempt's server).
    public func queryEach(_ question: DNSQuestion, dnssecOK: Bool) async -> [UpstreamReply] {
        do {
            let exchange = try await query(question, dnssecOK: dnssecOK)
            return [UpstreamReply(server: exchange.attempts.last?.server ?? "", message: exchange.message)]
        } catch {
            return []
        }
    }
}
