import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// The TLS client set-up of one encrypted upstream: trust store, name to verify, ALPN.
///
/// Verification is always full (RFC 8310 §8.1 strict privacy profile for configured names): the chain against
/// the trust store (Debian's `/etc/ssl/certs/ca-certificates.crt`, or `[resolver] ca-file`), then the name, or
/// without a name the connected address as an IP subjectAltName. TLS 1.2 is the minimum; TLS 1.3 is offered first.
struct TLSClientContext: Sendable {
    /// The system trust store of Debian and its derivatives.
    static let systemTrustStore = "/etc/ssl/certs/ca-certificates.crt"

    let context: NIOSSLContext
    /// The SNI name and the name checked; nil: the address is checked.
    let serverName: String?

    /// - Parameters:
    ///   - caFile: PEM file of trusted roots; nil: the system trust store.
    ///   - serverName: the name the certificate must carry; nil: the IP address.
    ///   - alpn: protocols to offer (`h2` for DoH; none for DoT, RFC 7858 predates ALPN `dot`).
    init(caFile: String?, serverName: String?, alpn: [String]) throws {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.trustRoots = .file(caFile ?? Self.systemTrustStore)
        configuration.certificateVerification = .fullVerification
        configuration.applicationProtocols = alpn
        self.context = try NIOSSLContext(configuration: configuration)
        self.serverName = serverName.flatMap { UpstreamServer.isIPAddress($0) ? nil : $0 }
    }

    /// A handler for one new connection; `reasons` receives why a certificate of the chain was refused.
    func handler(reasons: VerificationReasons) throws -> NIOSSLClientHandler {
        // The (deprecated) per-certificate callback is the only public hook that sees BoringSSL's verdict while
        // keeping its verification; it only notes a reason and returns the verdict unchanged.
        try NIOSSLClientHandler(
            context: context, serverHostname: serverName,
            verificationCallback: { preverify, certificate in
                if case .failed = preverify { reasons.note(Self.explain(certificate)) }
                return preverify
            })
    }

    /// Why BoringSSL refused `certificate` in the chain (it does not say): expired, not yet valid, or untrusted.
    private static func explain(_ certificate: NIOSSLCertificate) -> String {
        let now = time(nil)
        let subject = certificate.description
        if certificate.notValidAfter < now { return "certificate expired (\(subject))" }
        if certificate.notValidBefore > now { return "certificate not yet valid (\(subject))" }
        return "certificate not signed by a trusted CA (\(subject))"
    }

    /// `TLSv1.3`.
    static func describe(_ version: TLSVersion) -> String {
        switch version {
        case .tlsv1: "TLSv1.0"
        case .tlsv11: "TLSv1.1"
        case .tlsv12: "TLSv1.2"
        case .tlsv13: "TLSv1.3"
        }
    }

    /// What a pipeline error means for the tries on the connection: a TLS failure is ``ExchangeOutcome/insecure(_:)``
    /// (never retried in clear text), anything else a network failure.
    static func outcome(for error: any Error, reasons: VerificationReasons) -> ExchangeOutcome {
        if let extra = error as? NIOSSLExtraError {
            if extra == .failedToValidateHostname {
                return .insecure("certificate does not match the expected name or address (\(extra))")
            }
            return .insecure("TLS: \(extra)")
        }
        if let ssl = error as? NIOSSLError {
            if let reason = reasons.first { return .insecure(reason) }
            switch ssl {
            case .handshakeFailed(let inner): return .insecure("TLS handshake failed: \(inner)")
            case .uncleanShutdown: return .failed("the server closed the TLS connection uncleanly")
            default: return .insecure("TLS: \(ssl)")
            }
        }
        return .failed("\(error)")
    }
}

/// The first reason a certificate was refused during one handshake (written by the verification callback, which
/// runs on the connection's event loop, read after the handshake failed).
final class VerificationReasons: Sendable {
    private let reason = Mutex<String?>(nil)
    func note(_ text: String) { reason.withLock { if $0 == nil { $0 = text } } }
    var first: String? { reason.withLock { $0 } }
}
