/// An error of DNS-SD, over mDNS (Avahi) or unicast DNS.
///
/// Each `code` is answered with one varlink error of `io.discoverd.Discovery` (the daemon's Discovery adapter maps
/// every code on purpose); `message` says what went wrong in words; `avahiError` and `avahiErrorText` carry Avahi's
/// own error number and text when the error came from Avahi (the `Discovery` module fills them in).
public struct DNSSDError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CaseIterable, CustomStringConvertible {
        enum Base: Hashable, Sendable, CaseIterable {
            case invalidServiceType
            case invalidName
            case notFound
            case timeout
            case avahiUnavailable
            case nameConflict
            case invalidParameter
            case subscriberTooSlow
            case avahiFailure
        }

        let base: Base

        /// Every code, so a mapping can be checked for completeness.
        public static var allCases: [Code] { Base.allCases.map { Code(base: $0) } }

        /// The service type is not `_name._tcp` / `_name._udp` (RFC 6763 §7), or a subtype is malformed.
        public static let invalidServiceType = Code(base: .invalidServiceType)
        /// An instance, host or domain name is empty, too long or malformed.
        public static let invalidName = Code(base: .invalidName)
        /// The service instance does not exist.
        public static let notFound = Code(base: .notFound)
        /// The operation did not complete in time.
        public static let timeout = Code(base: .timeout)
        /// avahi-daemon (or the system bus) is not reachable right now.
        public static let avahiUnavailable = Code(base: .avahiUnavailable)
        /// The name is taken and could not be replaced by an alternative.
        public static let nameConflict = Code(base: .nameConflict)
        /// A parameter other than a name or type is invalid (port, TXT record, interface).
        /// Maps to `org.varlink.service.InvalidParameter`.
        public static let invalidParameter = Code(base: .invalidParameter)
        /// A browse subscriber did not consume its events fast enough and was dropped.
        public static let subscriberTooSlow = Code(base: .subscriberTooSlow)
        /// Avahi reported an error that fits no other code.
        public static let avahiFailure = Code(base: .avahiFailure)

        public var description: String {
            switch self.base {
            case .invalidServiceType: "invalidServiceType"
            case .invalidName: "invalidName"
            case .notFound: "notFound"
            case .timeout: "timeout"
            case .avahiUnavailable: "avahiUnavailable"
            case .nameConflict: "nameConflict"
            case .invalidParameter: "invalidParameter"
            case .subscriberTooSlow: "subscriberTooSlow"
            case .avahiFailure: "avahiFailure"
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// A human-readable explanation.
    public var message: String
    /// Avahi's error number (`AVAHI_ERR_*`, negative), when the error came from Avahi.
    public var avahiError: Int32?
    /// Avahi's text for `avahiError` (`avahi_strerror`), when the error came from Avahi.
    public var avahiErrorText: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, avahiError: Int32? = nil, avahiErrorText: String? = nil) {
        self.code = code
        self.message = message
        self.avahiError = avahiError
        self.avahiErrorText = avahiErrorText
    }

    public var description: String {
        if let text = self.avahiErrorText {
            return "DNSSDError.\(self.code): \(self.message) (avahi: \(text))"
        }
        return "DNSSDError.\(self.code): \(self.message)"
    }
}
