import NIOCore
import Synchronization

/// How an upstream came to be used.
public enum UpstreamOrigin: String, Sendable, Hashable, Codable {
    /// Written in the configuration, on the command line or in resolv.conf.
    case configured
    /// Designated by a plain upstream through DDR (RFC 9462 §4.1), its certificate covering the plain address.
    case ddrVerified = "ddr-verified"
    /// Designated through DDR without that proof (RFC 9462 §4.2); used only with `encryption = opportunistic`.
    case ddrOpportunistic = "ddr-opportunistic"
}

/// What one upstream is and did, for `Status`.
public struct UpstreamStatus: Sendable, Hashable, Codable {
    /// The upstream as configured (``UpstreamServer/description``).
    public var server: String
    /// What queries to it travel on now: `udp` (TCP after truncation), `tls` or `https`; `none` when unused.
    public var transport: String
    /// How it was found.
    public var origin: UpstreamOrigin
    /// Why it is not used, or what it stands for (the plain upstream a DDR designation upgraded).
    public var note: String?
    /// The TLS version of the last handshake (`TLSv1.3`).
    public var tlsVersion: String?
    /// The name (or address) the certificate was verified for; nil when its key's pin authenticated it
    /// (`keyPinned`) or nothing did (DDR's opportunistic profile).
    public var verifiedName: String?
    /// The pin of the key the server presented at the last handshake (`pin-sha256=` of ``UpstreamServer/pins``:
    /// base64 of the SHA-256 of its certificate's SubjectPublicKeyInfo), and whether a configured pin matched it
    /// (nil before a handshake).
    public var keyPin: String?
    public var keyPinned: Bool?
    /// Connections opened, and open now (kept connections of DoT and DoH).
    public var connectionsOpened: Int
    public var connectionsOpen: Int
    /// Completed TLS handshakes, and how many of them resumed a session.
    public var handshakes: Int
    public var resumptions: Int
    /// Tries sent to it, and the median round trip of those answered (ms) over the last 256.
    public var queries: Int
    public var p50Milliseconds: Double?
    /// Tries that got nothing usable, and the reason of the last.
    public var failures: Int
    public var lastFailure: String?
    /// Answers with an error code the client fails over on (SERVFAIL, REFUSED, NOTIMP, FORMERR), and the last of
    /// them: the name and type asked, the code and the upstream's Extended DNS Errors (`www.example. A: SERVFAIL,
    /// EDE 7 (Signature Expired): ...`). Counted among `queries`, not `failures`: the upstream did answer.
    public var errorAnswers: Int
    public var lastErrorAnswer: String?

    public init(
        server: String, transport: String, origin: UpstreamOrigin, note: String? = nil, tlsVersion: String? = nil,
        verifiedName: String? = nil, keyPin: String? = nil, keyPinned: Bool? = nil, connectionsOpened: Int = 0,
        connectionsOpen: Int = 0, handshakes: Int = 0, resumptions: Int = 0, queries: Int = 0,
        p50Milliseconds: Double? = nil, failures: Int = 0, lastFailure: String? = nil, errorAnswers: Int = 0,
        lastErrorAnswer: String? = nil
    ) {
        self.server = server
        self.transport = transport
        self.origin = origin
        self.note = note
        self.tlsVersion = tlsVersion
        self.verifiedName = verifiedName
        self.keyPin = keyPin
        self.keyPinned = keyPinned
        self.connectionsOpened = connectionsOpened
        self.connectionsOpen = connectionsOpen
        self.handshakes = handshakes
        self.resumptions = resumptions
        self.queries = queries
        self.p50Milliseconds = p50Milliseconds
        self.failures = failures
        self.lastFailure = lastFailure
        self.errorAnswers = errorAnswers
        self.lastErrorAnswer = lastErrorAnswer
    }
}

/// The counters of one upstream; shared by its transport (connections, handshakes) and the client (tries).
final class UpstreamStatistics: Sendable {
    private struct State {
        var connectionsOpened = 0
        var connectionsOpen = 0
        var handshakes = 0
        var resumptions = 0
        var queries = 0
        var failures = 0
        var lastFailure: String?
        var errorAnswers = 0
        var lastErrorAnswer: String?
        /// When a connection last recorded why it failed (``connectionFailed(_:)``).
        var connectionFailedAt: NIODeadline?
        var tlsVersion: String?
        var verifiedName: String?
        var keyPin: String?
        var keyPinned: Bool?
        /// What the transport says of itself (a DoH upstream that takes only GET).
        var transportNote: String?
        /// The last `window` round trips, a ring.
        var rtts: [Double] = []
        var next = 0
    }

    private static let window = 256
    private let state = Mutex(State())

    func connectionOpened() { state.withLock { $0.connectionsOpened += 1; $0.connectionsOpen += 1 } }
    func connectionClosed() { state.withLock { $0.connectionsOpen = max(0, $0.connectionsOpen - 1) } }

    /// A completed handshake with `server`: verified for its name or address, or by its key's pin when `pinned`.
    func handshake(version: String?, server: UpstreamServer, pinned: Bool, keyPin: String?, resumed: Bool) {
        state.withLock {
            $0.handshakes += 1
            if resumed { $0.resumptions += 1 }
            $0.tlsVersion = version
            $0.verifiedName = pinned ? nil : server.tlsName ?? server.host
            $0.keyPin = keyPin
            $0.keyPinned = pinned
        }
    }

    /// One try: its round trip when answered, else why not. A try that timed out (`timedOutSince`: when it was
    /// sent) keeps a reason its connection recorded meanwhile as the last one: a connection let go because the server
    /// stopped answering on it says so, where the try would only say "timeout". `errorAnswer`: an answered try's
    /// error code and why (``UpstreamStatus/lastErrorAnswer``).
    func tried(
        milliseconds: Double?, failure: String?, timedOutSince sent: NIODeadline? = nil, errorAnswer: String? = nil
    ) {
        state.withLock { s in
            s.queries += 1
            if let errorAnswer {
                s.errorAnswers += 1
                s.lastErrorAnswer = errorAnswer
            }
            if let failure {
                s.failures += 1
                let connectionSaidWhy = sent.flatMap { sent in s.connectionFailedAt.map { $0 >= sent } } ?? false
                if !connectionSaidWhy { s.lastFailure = failure }
            }
            if let milliseconds {
                if s.rtts.count < Self.window {
                    s.rtts.append(milliseconds)
                } else {
                    s.rtts[s.next] = milliseconds
                    s.next = (s.next + 1) % Self.window
                }
            }
        }
    }

    /// Notes what the transport learned about the upstream; `Status` shows it when nothing else is noted.
    func note(_ text: String) { state.withLock { $0.transportNote = text } }

    /// Records why a connection failed (a refused connect, a certificate, a reset) as the last reason. Not counted:
    /// `failures` counts tries, and every try on that connection ends failed
    /// (``tried(milliseconds:failure:timedOutSince:)``) or is sent again, so counting here too made one refused query
    /// two failures.
    func connectionFailed(_ reason: String) {
        let now = NIODeadline.now()
        state.withLock {
            $0.lastFailure = reason
            $0.connectionFailedAt = now
        }
    }

    func status(server: UpstreamServer, transport: String, origin: UpstreamOrigin, note: String?) -> UpstreamStatus {
        state.withLock { s in
            let sorted = s.rtts.sorted()
            return UpstreamStatus(
                server: server.description, transport: transport, origin: origin, note: note ?? s.transportNote,
                tlsVersion: s.tlsVersion, verifiedName: s.verifiedName, keyPin: s.keyPin, keyPinned: s.keyPinned,
                connectionsOpened: s.connectionsOpened, connectionsOpen: s.connectionsOpen, handshakes: s.handshakes,
                resumptions: s.resumptions, queries: s.queries,
                p50Milliseconds: sorted.isEmpty ? nil : sorted[sorted.count / 2], failures: s.failures,
                lastFailure: s.lastFailure, errorAnswers: s.errorAnswers, lastErrorAnswer: s.lastErrorAnswer)
        }
    }
}
