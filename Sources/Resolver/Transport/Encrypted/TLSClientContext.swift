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

    /// What the certificate must prove besides a chain to a trusted root.
    enum Identity: Sendable, Hashable {
        /// The configured name (`#NAME`, the DoH host), or without one the connected address as an IP SAN.
        case configured
        /// An IP SAN for this address, which is not the one connected to: a DDR designation at another address
        /// must cover the plain upstream's original address (RFC 9462 §4.2, §7).
        case address(String)
        /// Nothing: the Opportunistic Privacy Profile (RFC 7858 §4.1) that RFC 9462 §4.3 allows for a designation
        /// of a private or local plain upstream at that same address. Encrypts against passive observers only.
        case unauthenticated
    }

    let context: NIOSSLContext
    /// The SNI name and the name checked; nil: the address is checked.
    let serverName: String?
    let identity: Identity

    /// - Parameters:
    ///   - caFile: PEM file of trusted roots; nil: the system trust store.
    ///   - serverName: the name the certificate must carry; nil: the IP address.
    ///   - alpn: protocols to offer (`h2` for DoH; none for DoT, RFC 7858 predates ALPN `dot`).
    ///   - identity: what is checked besides the chain (``Identity``).
    init(caFile: String?, serverName: String?, alpn: [String], identity: Identity = .configured) throws {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.trustRoots = .file(caFile ?? Self.systemTrustStore)
        switch identity {
        case .configured: configuration.certificateVerification = .fullVerification
        // The chain is still verified by BoringSSL; the address is checked on the leaf in `handler(reasons:)`.
        case .address: configuration.certificateVerification = .noHostnameVerification
        case .unauthenticated: configuration.certificateVerification = .none
        }
        configuration.applicationProtocols = alpn
        self.context = try NIOSSLContext(configuration: configuration)
        self.identity = identity
        self.serverName = identity == .configured ? serverName.flatMap { UpstreamServer.isIPAddress($0) ? nil : $0 } : nil
    }

    /// A handler for one new connection; `reasons` receives why a certificate of the chain was refused.
    func handler(reasons: VerificationReasons) throws -> NIOSSLClientHandler {
        // The (deprecated) per-certificate callback is the only public hook that sees BoringSSL's verdict while
        // keeping its verification; it notes a reason, and for ``Identity/address(_:)`` refuses a leaf (the one
        // certificate of a valid chain that is not a CA) without that address.
        let identity = self.identity
        return try NIOSSLClientHandler(
            context: context, serverHostname: serverName,
            verificationCallback: { preverify, certificate in
                if case .failed = preverify {
                    reasons.note(Self.explain(certificate))
                    return preverify
                }
                if case .address(let address) = identity, !Self.isCA(certificate),
                    !Self.names(certificate, address: address)
                {
                    reasons.note(
                        "certificate does not name the plain upstream's address \(address) (RFC 9462 §4.2) "
                            + "(\(certificate.description))")
                    return .failed
                }
                return preverify
            })
    }

    /// Whether `certificate` says it is a CA (basicConstraints cA TRUE). A leaf that claims to be a CA and was
    /// issued by a trusted root is an intermediate that could issue itself any address anyway.
    static func isCA(_ certificate: NIOSSLCertificate) -> Bool {
        guard let basicConstraints = NIOSSLObjectIdentifier("2.5.29.19") else { return false }
        for item in certificate._extensions where item.objectIdentifier == basicConstraints {
            // BasicConstraints ::= SEQUENCE { cA BOOLEAN DEFAULT FALSE, ... }: 30 LL 01 01 FF when cA is TRUE.
            let bytes = Array(item.data)
            return bytes.count >= 5 && bytes[0] == 0x30 && bytes[2] == 0x01 && bytes[3] == 0x01 && bytes[4] != 0
        }
        return false
    }

    /// Whether `certificate` has `address` as an iPAddress subjectAltName (RFC 5280 §4.2.1.6).
    static func names(_ certificate: NIOSSLCertificate, address: String) -> Bool {
        guard let wanted = addressBytes(address) else { return false }
        return certificate._subjectAlternativeNames().contains { name in
            name.nameType == .ipAddress && Array(name.contents) == wanted
        }
    }

    /// The 4 or 16 bytes of a numeric address.
    static func addressBytes(_ text: String) -> [UInt8]? {
        let bare = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        var v4 = in_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, bare, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
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
