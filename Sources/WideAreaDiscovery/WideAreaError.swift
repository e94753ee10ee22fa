import DNSCore

/// An error of wide-area (unicast) DNS-SD.
///
/// Each `code` is answered with one varlink error of `io.discoverd.Discovery` (the daemon's Discovery adapter maps
/// every code); `message` names what failed in words, with the DNS response code (`REFUSED`, `NOTAUTH`, `BADSIG`)
/// when a server answered with one, in `rcode` too.
public struct WideAreaError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CaseIterable, CustomStringConvertible {
        enum Base: Hashable, Sendable, CaseIterable {
            case notFound
            case timeout
            case lookupFailed
            case nameConflict
            case updateRejected
            case noKey
            case noUpdateServer
            case badReplySignature
            case invalidParameter
        }

        let base: Base

        /// Every code, so a mapping can be checked for completeness.
        public static var allCases: [Code] { Base.allCases.map { Code(base: $0) } }

        /// The instance does not exist in the zone, or cannot be used (no SRV, SRV target `.`).
        public static let notFound = Code(base: .notFound)
        /// No DNS server answered in time (queries, or every try of an UPDATE).
        public static let timeout = Code(base: .timeout)
        /// A query was answered with an error code (SERVFAIL, REFUSED) or could not be made.
        public static let lookupFailed = Code(base: .lookupFailed)
        /// The instance name is taken by a registration of someone else and no alternative was free.
        public static let nameConflict = Code(base: .nameConflict)
        /// The update server answered the UPDATE with an error code (REFUSED, NOTAUTH, BADSIG, BADKEY, ...).
        public static let updateRejected = Code(base: .updateRejected)
        /// No TSIG key is configured for the domain.
        public static let noKey = Code(base: .noKey)
        /// No update server could be found (no `update-server`, no `_dns-update._udp` SRV, no SOA).
        public static let noUpdateServer = Code(base: .noUpdateServer)
        /// The server's reply was not signed with our key, or its signature did not verify (RFC 8945 §5.3).
        public static let badReplySignature = Code(base: .badReplySignature)
        /// A parameter cannot be published in DNS (a name too long for the domain).
        public static let invalidParameter = Code(base: .invalidParameter)

        public var description: String {
            switch base {
            case .notFound: "notFound"
            case .timeout: "timeout"
            case .lookupFailed: "lookupFailed"
            case .nameConflict: "nameConflict"
            case .updateRejected: "updateRejected"
            case .noKey: "noKey"
            case .noUpdateServer: "noUpdateServer"
            case .badReplySignature: "badReplySignature"
            case .invalidParameter: "invalidParameter"
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// A human-readable explanation.
    public var message: String
    /// The DNS response code a server answered with (e.g. `REFUSED`, `BADSIG`), when one did.
    public var rcode: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, rcode: String? = nil) {
        self.code = code
        self.message = message
        self.rcode = rcode
    }

    public var description: String { "WideAreaError.\(code): \(message)" }
}
