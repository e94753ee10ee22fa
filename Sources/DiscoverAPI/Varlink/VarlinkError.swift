/// An error as it travels on the wire: a qualified varlink error name and its parameters.
///
/// Every error of docs/API.md has a constructor here, so the daemon and the client spell names once.
public struct VarlinkError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fully qualified error name, e.g. `io.discoverd.Resolver.NoSuchName`.
    public var name: String
    /// The error's parameters, as declared in the interface description.
    public var parameters: [String: JSONValue]

    /// Creates an error from its name and parameters.
    public init(name: String, parameters: [String: JSONValue] = [:]) {
        self.name = name
        self.parameters = parameters
    }

    /// A one-line, human-readable explanation.
    public var description: String {
        let short = name.split(separator: ".").last.map(String.init) ?? name
        let detail = parameters.sorted { $0.key < $1.key }.map { key, value in
            "\(key): \(value.stringValue ?? value.description)"
        }.joined(separator: ", ")
        let explanation = Self.explanations[name].map { " (\($0))" } ?? ""
        return detail.isEmpty ? "\(short)\(explanation)" : "\(short)\(explanation): \(detail)"
    }

    static let explanations: [String: String] = [
        "org.varlink.service.InterfaceNotFound": "the daemon has no such interface",
        "org.varlink.service.MethodNotFound": "the interface has no such method",
        "org.varlink.service.MethodNotImplemented": "this daemon does not offer that method yet",
        "org.varlink.service.InvalidParameter": "a parameter is missing, unknown or of the wrong type",
        "org.varlink.service.PermissionDenied": "not allowed for this user",
        "org.varlink.service.ExpectedMore": "this method must be called with more: true",
        "io.discoverd.Daemon.InvalidMessage": "the message is not a valid varlink call",
        "io.discoverd.Daemon.MessageTooLarge": "the message exceeds the size limit",
        "io.discoverd.Daemon.TooManyConnections": "the daemon's connection limit is reached",
        "io.discoverd.Daemon.TooManyCalls": "this user has too many calls in flight",
        "io.discoverd.Daemon.InvalidConfiguration": "the configuration file has an error; nothing was changed",
        "io.discoverd.Daemon.InternalError": "the daemon failed unexpectedly",
        "io.discoverd.Resolver.NoSuchName": "the name does not exist",
        "io.discoverd.Resolver.Timeout": "no upstream answered in time",
        "io.discoverd.Resolver.UpstreamFailure": "the upstream answered with an error",
        "io.discoverd.Resolver.InvalidName": "not a valid DNS name",
        "io.discoverd.Discovery.InvalidServiceType": "not a valid DNS-SD service type",
        "io.discoverd.Discovery.InvalidName": "not a valid service instance name",
        "io.discoverd.Discovery.NotFound": "no such service",
        "io.discoverd.Discovery.Timeout": "no answer in time",
        "io.discoverd.Discovery.AvahiUnavailable": "avahi-daemon is not running",
        "io.discoverd.Discovery.NameConflict": "the name is taken",
        "io.discoverd.Discovery.SubscriberTooSlow": "the browse stream was not read fast enough and ended",
    ]

    // org.varlink.service
    public static func interfaceNotFound(_ interface: String) -> VarlinkError {
        VarlinkError(name: "org.varlink.service.InterfaceNotFound", parameters: ["interface": .string(interface)])
    }
    public static func methodNotFound(_ method: String) -> VarlinkError {
        VarlinkError(name: "org.varlink.service.MethodNotFound", parameters: ["method": .string(method)])
    }
    public static func methodNotImplemented(_ method: String) -> VarlinkError {
        VarlinkError(name: "org.varlink.service.MethodNotImplemented", parameters: ["method": .string(method)])
    }
    public static func invalidParameter(_ parameter: String) -> VarlinkError {
        VarlinkError(name: "org.varlink.service.InvalidParameter", parameters: ["parameter": .string(parameter)])
    }
    public static let permissionDenied = VarlinkError(name: "org.varlink.service.PermissionDenied")
    public static let expectedMore = VarlinkError(name: "org.varlink.service.ExpectedMore")

    // io.discoverd.Daemon: protocol-level errors that belong to no method.
    public static func invalidMessage(reason: String) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Daemon.InvalidMessage", parameters: ["reason": .string(reason)])
    }
    public static func messageTooLarge(limit: Int) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Daemon.MessageTooLarge", parameters: ["limit": .int(limit)])
    }
    /// A connection over a cap: `scope` is `total` (every connection of the daemon is taken) or `uid` (this
    /// user's share is).
    public static func tooManyConnections(limit: Int, scope: String) -> VarlinkError {
        VarlinkError(
            name: "io.discoverd.Daemon.TooManyConnections", parameters: ["limit": .int(limit), "scope": .string(scope)])
    }
    /// A call over the caller's uid's cap of calls in flight; the connection stays open.
    public static func tooManyCalls(limit: Int) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Daemon.TooManyCalls", parameters: ["limit": .int(limit)])
    }
    /// Reload found an error in the configuration file (`reason` names file, line and key); nothing changed.
    public static func invalidConfiguration(reason: String) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Daemon.InvalidConfiguration", parameters: ["reason": .string(reason)])
    }
    /// A failure inside the daemon that no interface names; the reason is for humans.
    public static func internalError(reason: String) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Daemon.InternalError", parameters: ["reason": .string(reason)])
    }

    // io.discoverd.Resolver
    public static func noSuchName(_ name: String) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Resolver.NoSuchName", parameters: ["name": .string(name)])
    }
    public static let resolverTimeout = VarlinkError(name: "io.discoverd.Resolver.Timeout")
    /// `Timeout` naming the name asked, the servers that did not answer and, when the tries failed rather than
    /// waited, what they failed with.
    public static func resolverTimeout(name: String?, servers: [String], reason: String? = nil) -> VarlinkError {
        var parameters: [String: JSONValue] = [:]
        if let name { parameters["name"] = .string(name) }
        if !servers.isEmpty { parameters["servers"] = .array(servers.map(JSONValue.string)) }
        if let reason { parameters["reason"] = .string(reason) }
        return VarlinkError(name: "io.discoverd.Resolver.Timeout", parameters: parameters)
    }
    /// `UpstreamFailure`: the response code, and with it, when one is known, the Extended DNS Error (RFC 8914) and
    /// its reason: discoverd's own validator's for a bogus answer, or the one the upstream's reply carried.
    public static func upstreamFailure(
        rcode: String, name: String? = nil, server: String? = nil, ede: UInt16? = nil, reason: String? = nil
    ) -> VarlinkError {
        var parameters: [String: JSONValue] = ["rcode": .string(rcode)]
        if let name { parameters["name"] = .string(name) }
        if let server { parameters["server"] = .string(server) }
        if let ede { parameters["ede"] = .int(Int(ede)) }
        if let reason { parameters["reason"] = .string(reason) }
        return VarlinkError(name: "io.discoverd.Resolver.UpstreamFailure", parameters: parameters)
    }
    /// No upstream reachable as securely as required; `reason` names the upstreams and what failed.
    public static func networkError(name: String?, reason: String) -> VarlinkError {
        var parameters: [String: JSONValue] = ["reason": .string(reason)]
        if let name { parameters["name"] = .string(name) }
        return VarlinkError(name: "io.discoverd.Resolver.NetworkError", parameters: parameters)
    }
    /// A limit on upstream work was reached; cached answers are still served (`[limits]` in discoverd.conf(5)).
    public static func tooManyQueries(name: String, reason: String) -> VarlinkError {
        VarlinkError(
            name: "io.discoverd.Resolver.TooManyQueries",
            parameters: ["name": .string(name), "reason": .string(reason)])
    }
    public static func invalidDNSName(_ name: String, reason: String) -> VarlinkError {
        VarlinkError(
            name: "io.discoverd.Resolver.InvalidName", parameters: ["name": .string(name), "reason": .string(reason)])
    }

    // io.discoverd.Discovery
    public static func invalidServiceType(_ type: String, reason: String) -> VarlinkError {
        VarlinkError(
            name: "io.discoverd.Discovery.InvalidServiceType",
            parameters: ["type": .string(type), "reason": .string(reason)])
    }
    public static func invalidServiceName(_ name: String, reason: String) -> VarlinkError {
        VarlinkError(
            name: "io.discoverd.Discovery.InvalidName", parameters: ["name": .string(name), "reason": .string(reason)])
    }
    public static func notFound(_ name: String) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Discovery.NotFound", parameters: ["name": .string(name)])
    }
    public static let discoveryTimeout = VarlinkError(name: "io.discoverd.Discovery.Timeout")
    public static let avahiUnavailable = VarlinkError(name: "io.discoverd.Discovery.AvahiUnavailable")
    public static func nameConflict(_ name: String) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Discovery.NameConflict", parameters: ["name": .string(name)])
    }
    /// A `Browse` stream's reader fell more than the send-buffer limit behind; the stream ended.
    public static let subscriberTooSlow = VarlinkError(name: "io.discoverd.Discovery.SubscriberTooSlow")
}
