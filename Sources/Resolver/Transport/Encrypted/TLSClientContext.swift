import CTLSShim
import Foundation
import NIOCore

/// The TLS client set-up of one encrypted upstream: trust store, name to verify, ALPN, and the session kept for
/// resumption.
///
/// Verification is always full (RFC 8310 §8.1 strict privacy profile for configured names): the chain against
/// the trust store (Debian's `/etc/ssl/certs/ca-certificates.crt`, or `[resolver] ca-file`), then the name, or
/// without a name the connected address as an IP subjectAltName. TLS 1.2 is the minimum; TLS 1.3 is offered first.
///
/// TLS is system OpenSSL through `CTLSShim` (``TLSClientHandler``): one context per upstream keeps the latest
/// session its server gave (a TLS 1.3 NewSessionTicket, RFC 8446 §4.6.1) and the next connection offers it once,
/// so a reconnect after an idle close or a server restart is a resumed handshake without the certificate chain.
/// A session only ever comes from a connection of the same context, verified against the same identity.
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

    /// The OpenSSL context (`SSL_CTX` and its session slot), freed with the last connection that uses it.
    final class Shared: @unchecked Sendable {
        // @unchecked Sendable: the shim's context is thread-safe (its session slot has a mutex); the pointer is
        // only freed in deinit.
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { ctls_context_free(pointer) }
        /// Whether a session waits for the next connection.
        var hasSession: Bool { ctls_context_has_session(pointer) != 0 }
    }

    let shared: Shared
    /// The SNI name and the name checked; nil: the address is checked.
    let serverName: String?
    let identity: Identity
    /// Whether servers are authenticated by pins of their key (`pin-sha256=`) instead of the trust store and a name.
    let pinned: Bool

    /// - Parameters:
    ///   - caFile: PEM file of trusted roots; nil: the system trust store.
    ///   - serverName: the name the certificate must carry; nil: the IP address.
    ///   - alpn: protocols to offer (`h2` for DoH; none for DoT, RFC 7858 predates ALPN `dot`).
    ///   - identity: what is checked besides the chain (``Identity``).
    ///   - pins: SHA-256 digests of keys (``UpstreamServer/pins``); any: the server's key must be one of them, and the
    ///     chain and the name are not checked (the name is still sent as SNI).
    init(
        caFile: String?, serverName: String?, alpn: [String], identity: Identity = .configured, pins: [[UInt8]] = []
    ) throws {
        // A pinned upstream needs no roots: its key is checked, not a chain.
        let file = pins.isEmpty ? caFile ?? Self.systemTrustStore : nil
        // OpenSSL reads a missing file as "no roots" only when a connection fails; say it now, as a set-up error.
        if let file, !FileManager.default.isReadableFile(atPath: file) {
            throw TLSClientError.setup("cannot read the CA file \(file)")
        }
        let wire = Self.alpnWire(alpn)
        var error = [CChar](repeating: 0, count: 256)
        let made = wire.withUnsafeBufferPointer { alpnBytes in
            ctls_context_new(
                file, identity == .unauthenticated ? 0 : 1, alpnBytes.baseAddress, alpnBytes.count, &error,
                error.count)
        }
        guard let made else { throw TLSClientError.setup(TLSClientContext.text(error)) }
        self.shared = Shared(made)
        let digests = pins.flatMap { $0 }
        guard digests.withUnsafeBufferPointer({ ctls_context_set_pins(made, $0.baseAddress, pins.count) }) == 0 else {
            throw TLSClientError.setup("out of memory")
        }
        self.pinned = !pins.isEmpty
        self.identity = identity
        self.serverName =
            identity == .configured ? serverName.flatMap { UpstreamServer.isIPAddress($0) ? nil : $0 } : nil
    }

    /// The text of a NUL-terminated C buffer the shim filled.
    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// ALPN protocol names in the wire format of RFC 7301 §3.1 (each prefixed by its length).
    static func alpnWire(_ names: [String]) -> [UInt8] {
        names.flatMap { name -> [UInt8] in
            let bytes = Array(name.utf8.prefix(255))
            return [UInt8(bytes.count)] + bytes
        }
    }

    /// A handler for one new connection to `remote`: SNI and the name checked, or the address as an IP SAN (the
    /// connected one for ``Identity/configured`` without a name, the designation's original one for
    /// ``Identity/address(_:)``).
    func handler(remote: SocketAddress) throws -> TLSClientHandler {
        try TLSClientHandler(context: shared, serverName: serverName, check: check(remote: remote))
    }

    /// A new OpenSSL client connection to `remote`, set up as ``handler(remote:)`` sets up its own (for
    /// ``LoopDoTConnection``, which drives the socket itself). The caller frees it.
    func connection(remote: SocketAddress) throws -> OpaquePointer {
        try TLSClientHandler.makeConnection(shared, serverName: serverName, check: check(remote: remote))
    }

    /// What the certificate of a connection to `remote` must carry besides its chain.
    private func check(remote: SocketAddress) throws -> TLSClientHandler.Check {
        if pinned { return .none }
        switch identity {
        case .configured:
            if let serverName { return .name(serverName) }
            if let ip = remote.ipAddress { return .address(ip) }
            throw TLSClientError.setup("no address to verify the certificate against")
        case .address(let address): return .address(address)
        case .unauthenticated: return .none
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

    /// What a pipeline error means for the tries on the connection: a TLS failure is ``ExchangeOutcome/insecure(_:)``
    /// (never retried in clear text), anything else a network failure.
    func outcome(for error: any Error) -> ExchangeOutcome {
        Self.outcome(for: error, identity: identity)
    }

    static func outcome(for error: any Error, identity: Identity) -> ExchangeOutcome {
        guard let tls = error as? TLSClientError else { return .failed("\(error)") }
        switch tls {
        case .verification(let code, let text, let subject, let detail):
            // Without authentication OpenSSL's verdict on the certificate is not ours to enforce (it is not
            // enforced either): the handshake failed for another reason.
            if identity == .unauthenticated { return .insecure("TLS handshake failed: \(detail)") }
            return .insecure(explain(code: code, text: text, subject: subject, identity: identity))
        case .handshake(let detail): return .insecure("TLS handshake failed: \(detail)")
        case .uncleanShutdown: return .failed("the server closed the TLS connection uncleanly")
        case .setup(let detail): return .insecure("TLS set-up: \(detail)")
        case .failed(let detail): return .insecure("TLS: \(detail)")
        }
    }

    /// OpenSSL's words for a chain to no trusted root: UNABLE_TO_GET_ISSUER_CERT, DEPTH_ZERO_SELF_SIGNED_CERT,
    /// SELF_SIGNED_CERT_IN_CHAIN, UNABLE_TO_GET_ISSUER_CERT_LOCALLY, UNABLE_TO_VERIFY_LEAF_SIGNATURE.
    static let untrustedCA: Set<Int> = [2, 18, 19, 20, 21]

    /// Why a certificate was refused, in the words of the log and `discover status`, from OpenSSL's X.509
    /// verification error (`X509_V_ERR_*`) and the subject of the certificate it concerns.
    static func explain(code: Int, text: String, subject: String, identity: Identity) -> String {
        let about = subject.isEmpty ? "" : " (\(subject))"
        switch code {
        case 10: return "certificate expired\(about)"  // X509_V_ERR_CERT_HAS_EXPIRED
        case 9: return "certificate not yet valid\(about)"  // X509_V_ERR_CERT_NOT_YET_VALID
        case _ where untrustedCA.contains(code):
            return "certificate not signed by a trusted CA\(about)"
        case Int(CTLS_KEY_NOT_PINNED):  // the shim's pin check (`subject`: the key's pin first)
            return "certificate key matches no pin-sha256 (the server's key: \(subject))"
        case 62, 64:  // X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
            if case .address(let address) = identity {
                return "certificate does not name the plain upstream's address \(address) (RFC 9462 §4.2)\(about)"
            }
            return "certificate does not match the expected name or address\(about)"
        default: return "certificate refused: \(text)\(about)"
        }
    }
}

/// Why a TLS connection failed, as ``TLSClientHandler`` fires it through `errorCaught`.
enum TLSClientError: Error, Equatable, CustomStringConvertible {
    /// The certificate was refused: OpenSSL's X.509 error code and text, the certificate's subject, and the
    /// OpenSSL error line.
    case verification(code: Int, text: String, subject: String, detail: String)
    /// The handshake failed for another reason (OpenSSL's error line: no shared cipher, an alert, garbage).
    case handshake(String)
    /// The connection closed without a close_notify.
    case uncleanShutdown
    /// A context or connection could not be made.
    case setup(String)
    /// Reading or writing on the established connection failed.
    case failed(String)

    var description: String {
        switch self {
        case .verification(_, let text, let subject, _): "certificate verify failed: \(text) (\(subject))"
        case .handshake(let detail): "TLS handshake failed: \(detail)"
        case .uncleanShutdown: "unclean TLS shutdown"
        case .setup(let detail): detail
        case .failed(let detail): "TLS: \(detail)"
        }
    }
}
