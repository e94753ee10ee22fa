import DiscoverAPI

/// An error from the daemon or from talking to it.
///
/// `code` is the varlink error name for errors the daemon sent (see docs/API.md), or one of the local codes
/// (`daemonUnreachable`, `connectionClosed`, `protocolError`) when the daemon could not be asked.
public struct DiscoverError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of error this is.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // Local: the daemon could not be asked.
        public static let daemonUnreachable = Code(rawValue: "local.DaemonUnreachable")
        public static let connectionClosed = Code(rawValue: "local.ConnectionClosed")
        public static let protocolError = Code(rawValue: "local.ProtocolError")

        // org.varlink.service
        public static let interfaceNotFound = Code(rawValue: "org.varlink.service.InterfaceNotFound")
        public static let methodNotFound = Code(rawValue: "org.varlink.service.MethodNotFound")
        public static let methodNotImplemented = Code(rawValue: "org.varlink.service.MethodNotImplemented")
        public static let invalidParameter = Code(rawValue: "org.varlink.service.InvalidParameter")
        public static let permissionDenied = Code(rawValue: "org.varlink.service.PermissionDenied")
        public static let expectedMore = Code(rawValue: "org.varlink.service.ExpectedMore")

        // io.discoverd.Daemon
        public static let invalidMessage = Code(rawValue: "io.discoverd.Daemon.InvalidMessage")
        public static let messageTooLarge = Code(rawValue: "io.discoverd.Daemon.MessageTooLarge")
        public static let tooManyConnections = Code(rawValue: "io.discoverd.Daemon.TooManyConnections")
        public static let tooManyCalls = Code(rawValue: "io.discoverd.Daemon.TooManyCalls")
        public static let invalidConfiguration = Code(rawValue: VarlinkError.invalidConfiguration(reason: "").name)
        public static let internalError = Code(rawValue: VarlinkError.internalError(reason: "").name)

        // io.discoverd.Resolver
        public static let noSuchName = Code(rawValue: "io.discoverd.Resolver.NoSuchName")
        public static let resolverTimeout = Code(rawValue: "io.discoverd.Resolver.Timeout")
        public static let upstreamFailure = Code(rawValue: "io.discoverd.Resolver.UpstreamFailure")
        public static let invalidDNSName = Code(rawValue: "io.discoverd.Resolver.InvalidName")
        public static let tooManyQueries = Code(rawValue: "io.discoverd.Resolver.TooManyQueries")

        // io.discoverd.Discovery
        public static let invalidServiceType = Code(rawValue: "io.discoverd.Discovery.InvalidServiceType")
        public static let invalidServiceName = Code(rawValue: "io.discoverd.Discovery.InvalidName")
        public static let notFound = Code(rawValue: "io.discoverd.Discovery.NotFound")
        public static let discoveryTimeout = Code(rawValue: "io.discoverd.Discovery.Timeout")
        public static let avahiUnavailable = Code(rawValue: "io.discoverd.Discovery.AvahiUnavailable")
        public static let nameConflict = Code(rawValue: "io.discoverd.Discovery.NameConflict")
        public static let subscriberTooSlow = Code(rawValue: VarlinkError.subscriberTooSlow.name)
    }

    public var code: Code
    /// The error's parameters as the daemon sent them.
    public var parameters: [String: JSONValue]
    /// A human-readable explanation.
    public var message: String

    public init(code: Code, parameters: [String: JSONValue] = [:], message: String) {
        self.code = code
        self.parameters = parameters
        self.message = message
    }

    /// The error the daemon sent.
    public init(_ error: VarlinkError) {
        self.init(code: Code(rawValue: error.name), parameters: error.parameters, message: error.description)
    }

    public var description: String { message }
}
