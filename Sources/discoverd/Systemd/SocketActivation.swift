import Foundation
import Logging

/// One descriptor passed by socket activation (`LISTEN_FDS`), described by asking the kernel.
struct ActivatedSocket: Sendable, Equatable, CustomStringConvertible {
    /// The descriptor number (3 and up), already marked close-on-exec.
    let fd: CInt
    /// Its `FileDescriptorName=` from `LISTEN_FDNAMES`, or `"unknown"` when none was given.
    let name: String
    /// `AF_UNIX`, `AF_INET` or `AF_INET6`; nil when the descriptor is no socket.
    let family: CInt?
    /// `SOCK_STREAM` (a listening stream socket for `ListenStream=`); false for datagram sockets and non-sockets.
    let isStream: Bool
    /// Whether it is a stream socket in the listening state (`SO_ACCEPTCONN`).
    let isListening: Bool
    /// The local address: the file path of a Unix socket (`@name` for an abstract one), else `ADDR:PORT`.
    let address: String

    var isDatagram: Bool { family != nil && !isStream }

    var description: String {
        "\(name) fd=\(fd) \(isStream ? "stream" : family == nil ? "non-socket" : "datagram") \(address)"
    }

    /// Describes descriptor `fd` named `name`.
    init(fd: CInt, name: String) {
        self.fd = fd
        self.name = name
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let isSocket = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        family = isSocket ? CInt(storage.ss_family) : nil
        isStream = isSocket && Self.intOption(fd, SO_TYPE) == CInt(SOCK_STREAM.rawValue)
        isListening = isStream && Self.intOption(fd, SO_ACCEPTCONN) == 1
        address = isSocket ? Self.describe(&storage, length: length) : ""
    }

    private static func intOption(_ fd: CInt, _ option: CInt) -> CInt? {
        var value: CInt = 0
        var size = socklen_t(MemoryLayout<CInt>.size)
        return getsockopt(fd, SOL_SOCKET, option, &value, &size) == 0 ? value : nil
    }

    private static func describe(_ storage: inout sockaddr_storage, length: socklen_t) -> String {
        switch CInt(storage.ss_family) {
        case AF_UNIX:
            return withUnsafeBytes(of: &storage) { raw in
                let offset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
                let path = raw[offset..<min(Int(length), raw.count)]
                guard let first = path.first else { return "" }
                // An abstract address starts with a NUL and is not NUL-terminated.
                if first == 0 { return "@" + String(decoding: path.dropFirst(), as: UTF8.self) }
                return String(decoding: path.prefix { $0 != 0 }, as: UTF8.self)
            }
        case AF_INET, AF_INET6:
            // Numeric host and port in one call for both families.
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            var port = [CChar](repeating: 0, count: Int(NI_MAXSERV))
            let result = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    getnameinfo(
                        $0, length, &host, socklen_t(host.count), &port, socklen_t(port.count),
                        NI_NUMERICHOST | NI_NUMERICSERV)
                }
            }
            guard result == 0 else { return "family \(storage.ss_family)" }
            let text = { (chars: [CChar]) in
                String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            return CInt(storage.ss_family) == AF_INET6 ? "[\(text(host))]:\(text(port))" : "\(text(host)):\(text(port))"
        default:
            return "family \(storage.ss_family)"
        }
    }
}

/// The descriptors systemd (or `systemd-socket-activate`) passed to the daemon, by the protocol of
/// sd_listen_fds(3): `LISTEN_PID` names the process they are meant for, `LISTEN_FDS` counts them from
/// descriptor 3 on, and `LISTEN_FDNAMES` lists their `FileDescriptorName=`s separated by colons.
///
/// Names the daemon knows:
/// - `varlink`: the listening Unix stream socket of the API (`Config/discoverd.socket`). Without that name
///   (an activator that passes no names), the first listening Unix stream socket is used.
/// - `dns`: the DNS stub's sockets, a UDP and a TCP one per address (`Config/discoverd-dns.socket`).
struct ActivatedSockets: Sendable, Equatable {
    /// The name of the varlink API socket.
    static let varlinkName = "varlink"
    /// The name of the DNS stub's sockets.
    static let dnsName = "dns"

    /// Every passed descriptor, in order.
    let all: [ActivatedSocket]

    /// Nothing passed: the daemon binds its own sockets.
    static let none = ActivatedSockets(all: [])

    /// The socket the varlink server serves: the one named `varlink`, else the first listening Unix stream
    /// socket. Nil when none was passed.
    var varlink: ActivatedSocket? {
        let unixListeners = all.filter { $0.family == AF_UNIX && $0.isListening }
        return unixListeners.first { $0.name == Self.varlinkName } ?? unixListeners.first
    }

    /// The passed descriptors named `name` (for `dns`: a datagram and a stream socket per address).
    func named(_ name: String) -> [ActivatedSocket] { all.filter { $0.name == name } }

    /// Descriptors no one asked for, given the ones `claimed`, so they can be reported and closed.
    func unclaimed(_ claimed: [ActivatedSocket]) -> [ActivatedSocket] {
        all.filter { socket in !claimed.contains { $0.fd == socket.fd } }
    }

    /// Closes the passed descriptors not in `claimed`, with a warning naming each: a socket unit the daemon
    /// does not serve (e.g. `dns` in a build without the DNS stub) is a configuration mistake worth seeing.
    func closeUnclaimed(_ claimed: [ActivatedSocket], logger: Logger) {
        for socket in unclaimed(claimed) {
            logger.warning("closing a passed descriptor nothing serves", metadata: ["descriptor": "\(socket)"])
            close(socket.fd)
        }
    }

    /// Takes the passed descriptors: they are described, marked close-on-exec, and the `LISTEN_*` variables
    /// are removed from the environment so no child inherits them.
    ///
    /// Descriptors meant for another process (`LISTEN_PID` is not ours) are left alone; so is a malformed
    /// `LISTEN_FDS`. Call it first thing, before other threads read the environment.
    static func takeFromEnvironment() -> ActivatedSockets {
        let environment = ProcessInfo.processInfo.environment
        defer {
            for variable in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(variable) }
        }
        let sockets = parse(environment: environment, pid: getpid())
        for socket in sockets.all { _ = fcntl(socket.fd, F_SETFD, FD_CLOEXEC) }
        return sockets
    }

    /// The descriptors `environment` passes to process `pid`, each described by asking the kernel.
    static func parse(environment: [String: String], pid: pid_t) -> ActivatedSockets {
        guard let listenPID = environment["LISTEN_PID"].flatMap({ pid_t($0) }), listenPID == pid,
            let count = environment["LISTEN_FDS"].flatMap({ Int($0) }), count > 0, count < 4096
        else { return .none }
        // Without LISTEN_FDNAMES, or with the wrong number of names, descriptors are "unknown", as in sd-daemon.
        var names = environment["LISTEN_FDNAMES"].map { $0.split(separator: ":", omittingEmptySubsequences: false) }
            .map { $0.map(String.init) } ?? []
        if names.count != count { names = Array(repeating: "unknown", count: count) }
        let first: CInt = 3  // SD_LISTEN_FDS_START
        return ActivatedSockets(
            all: (0..<count).map {
                ActivatedSocket(fd: first + CInt($0), name: names[$0].isEmpty ? "unknown" : names[$0])
            })
    }
}
