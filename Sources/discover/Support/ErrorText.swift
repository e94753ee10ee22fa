import DNSCore
import DiscoverClient

/// Errors as people should read them: one plain sentence, never a varlink error name, with the exit status
/// (1 for a negative answer such as no such name, 2 for everything else).
enum ErrorText {
    static func describe(_ error: DiscoverError) -> (message: String, status: Int32) {
        func parameter(_ key: String) -> String? { error.parameters[key]?.stringValue }
        let name = parameter("name").map(displayName)
        switch error.code {
        case .daemonUnreachable:
            return ("discover: \(error.message)", 2)
        case .connectionClosed:
            return ("discover: discoverd closed the connection (did it stop or restart?)", 2)
        case .protocolError:
            return ("discover: \(error.message)", 2)
        case .methodNotImplemented:
            let method = parameter("method") ?? "that method"
            return ("discover: this discoverd does not offer \(method) (is it older than this discover?)", 2)
        case .methodNotFound:
            return ("discover: discoverd has no method \(parameter("method") ?? "by that name")", 2)
        case .interfaceNotFound:
            return ("discover: this discoverd has no interface \(parameter("interface") ?? "by that name")", 2)
        case .invalidParameter:
            let what = parameter("parameter").map { "parameter \"\($0)\"" } ?? "a parameter"
            return ("discover: discoverd refused \(what): it is missing, unknown or of the wrong type", 2)
        case .expectedMore:
            return ("discover: that method streams its replies: call it with --more", 2)
        case .permissionDenied:
            return ("discover: permission denied: this needs root (or the admin group, for flush and reload)", 2)
        case .invalidMessage:
            return ("discover: discoverd did not understand the call: \(parameter("reason") ?? "malformed")", 2)
        case .messageTooLarge:
            return ("discover: the call is larger than discoverd accepts", 2)
        case .tooManyConnections:
            if parameter("scope") == "uid" {
                return ("discover: this user has as many connections to discoverd as it may (\(error.parameters["limit"]?.description ?? "?")); close some", 2)
            }
            return ("discover: discoverd is serving as many clients as it may; try again later", 2)
        case .tooManyCalls:
            return ("discover: this user has as many calls in flight as discoverd allows (\(error.parameters["limit"]?.description ?? "?")); try again later", 2)
        case .noSuchName:
            return ("discover: \(name ?? "the name"): no such name (NXDOMAIN)", 1)
        case .resolverTimeout:
            var servers: [String] = []
            if case .array(let items)? = error.parameters["servers"] { servers = items.compactMap(\.stringValue) }
            let from = servers.isEmpty ? "from any DNS server" : "from \(servers.joined(separator: ", "))"
            let why = parameter("reason").map { " (\($0))" } ?? " in time"
            return ("discover: \(name.map { "\($0): " } ?? "")no answer \(from)\(why)", 2)
        case .upstreamFailure:
            let rcode = parameter("rcode") ?? "an error"
            if case .int(let code)? = error.parameters["ede"], let code = UInt16(exactly: code) {
                // Why, as dig prints an EDE; discoverd's own validator's or the upstream's.
                let ede = ExtendedDNSError(code: code, text: parameter("reason") ?? "")
                let server = parameter("server").map { " (server \($0))" } ?? ""
                return ("discover: \(name.map { "\($0): " } ?? "")\(rcode), EDE \(ede)\(server)", 2)
            }
            let server = parameter("server").map { "the DNS server \($0)" } ?? "the DNS server"
            return ("discover: \(name.map { "\($0): " } ?? "")\(server) answered \(rcode)", 2)
        case .tooManyQueries:
            return (
                "discover: \(name.map { "\($0): " } ?? "")not looked up: \(parameter("reason") ?? "too many queries in flight")"
                    + "; cached names still answer, try again shortly", 2)
        case .invalidDNSName:
            return ("discover: " + withSubject(parameter("reason") ?? "invalid", "invalid name \"\(name ?? "?")\""), 2)
        case .invalidServiceType:
            let type = parameter("type") ?? "?"
            return ("discover: " + withSubject(parameter("reason") ?? "invalid", "invalid service type \"\(type)\""), 2)
        case .invalidServiceName:
            return (
                "discover: " + withSubject(parameter("reason") ?? "invalid", "invalid service name \"\(name ?? "?")\""),
                2
            )
        case .avahiUnavailable:
            return ("discover: avahi-daemon is not running, so discoverd cannot do DNS-SD right now", 2)
        case .discoveryTimeout:
            return ("discover: no answer from the network in time", 1)
        case .notFound:
            return ("discover: \(name ?? "the service"): no such service", 1)
        case .nameConflict:
            return ("discover: the name \"\(name ?? "?")\" is taken on the network", 2)
        case DiscoverError.Code(rawValue: "io.discoverd.Discovery.SubscriberTooSlow"):
            return ("discover: discoverd ended the stream because this reader fell too far behind", 2)
        default:
            return ("discover: \(plain(error))", 2)
        }
    }

    /// An error this CLI has no sentence for: the daemon's own reason when it sent one, else its last name part
    /// in words (`SubscriberTooSlow` → "subscriber too slow").
    static func plain(_ error: DiscoverError) -> String {
        if let reason = error.parameters["reason"]?.stringValue { return reason }
        let short = error.code.rawValue.split(separator: ".").last.map(String.init) ?? error.code.rawValue
        var words = ""
        for character in short {
            if character.isUppercase && !words.isEmpty { words += " " }
            words += character.lowercased()
        }
        return "discoverd answered: \(words)"
    }

    /// `reason` when it already names its subject, else "subject: reason".
    static func withSubject(_ reason: String, _ subject: String) -> String {
        reason.lowercased().hasPrefix(subject.lowercased().split(separator: " ").prefix(2).joined(separator: " "))
            ? reason : "\(subject): \(reason)"
    }

    /// `2 s`, `0.5 s`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
