import DNSCore

/// A DNS server to ask: an IP address (v4, or v6 without brackets) and a port.
public struct UpstreamServer: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int = 53) {
        self.host = host
        self.port = port
    }

    /// `192.0.2.53:53` or `[2001:db8::53]:53`.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// How a query travelled.
public enum QueryTransport: String, Sendable, Codable, Hashable {
    case udp, tcp
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

    public init(message: DNSMessage, attempts: [QueryAttempt]) {
        self.message = message
        self.attempts = attempts
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
    }

    public var code: Code
    public var message: String
    /// Every attempt made, for the timing report.
    public var attempts: [QueryAttempt]

    public init(code: Code, message: String, attempts: [QueryAttempt] = []) {
        self.code = code
        self.message = message
        self.attempts = attempts
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
    func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange
    /// The same with the DO bit (RFC 3225) set as given, so DNSSEC records come back for clients that ask.
    func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange
}

extension DNSTransport {
    /// Transports that cannot set the DO bit answer without DNSSEC records.
    public func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange {
        try await query(question)
    }
}
