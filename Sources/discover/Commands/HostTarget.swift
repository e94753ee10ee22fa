import ArgumentParser
import DiscoverClient

/// The host argument of `h3`, `plan`, `https` and `svcb`: one syntax everywhere, `HOST[:PORT]` or `--port`.
struct HostTarget: ParsableArguments {
    @Argument(
        help: ArgumentHelp("NAME, NAME:PORT, an address (192.0.2.10, 2001:db8::10) or [IPV6]:PORT.", valueName: "host"))
    var target: String

    @Option(name: .long, help: "Port (the same as HOST:PORT).")
    var port: Int?

    func validate() throws {
        _ = try parsed()
    }

    /// The host and the port from either place; a port given twice must agree.
    func parsed() throws -> HostPort {
        var hostPort: HostPort
        do {
            hostPort = try HostPort(parsing: target)
        } catch {
            throw ValidationError(error.message)
        }
        if let port {
            guard (1...65535).contains(port) else { throw ValidationError("port \(port) is not between 1 and 65535") }
            if let given = hostPort.port, given != port {
                throw ValidationError("\(target) says port \(given) but --port says \(port)")
            }
            hostPort.port = port
        }
        return hostPort
    }

    /// For commands that query DNS records of the name itself: an address has none.
    func requireName(for records: String, instead: String) throws {
        let hostPort = try parsed()
        if hostPort.isAddressLiteral {
            throw ValidationError("\(hostPort.host) is an IP address: it has no \(records) records (\(instead))")
        }
    }
}
