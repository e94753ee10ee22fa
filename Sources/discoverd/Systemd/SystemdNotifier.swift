import Foundation

/// Tells the service manager how the daemon is doing, by the protocol of sd_notify(3): newline-separated
/// `KEY=VALUE` assignments in one datagram to the Unix socket named by `$NOTIFY_SOCKET` (a path, or `@name`
/// for an abstract socket).
///
/// Without `$NOTIFY_SOCKET` there is no notifier and the daemon tells nobody anything.
final class SystemdNotifier: Sendable {
    private let fd: CInt
    /// The `sockaddr_un` bytes and their length.
    private let address: [UInt8]
    /// Where the datagrams go, as given in `$NOTIFY_SOCKET`.
    let socket: String

    /// A notifier for `$NOTIFY_SOCKET`; nil when it is unset, empty, or no Unix socket address.
    init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let socket = environment["NOTIFY_SOCKET"], let address = Self.encode(socket) else { return nil }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.address = address
        self.socket = socket
    }

    deinit { close(fd) }

    /// `READY=1`: start-up is complete, every socket is bound.
    @discardableResult
    func ready(status: String) -> Bool { send(["READY=1", "STATUS=" + status]) }

    /// `STOPPING=1`: graceful shutdown has begun.
    @discardableResult
    func stopping(status: String) -> Bool { send(["STOPPING=1", "STATUS=" + status]) }

    /// `STATUS=`: a line `systemctl status` shows.
    @discardableResult
    func status(_ text: String) -> Bool { send(["STATUS=" + text]) }

    /// `WATCHDOG=1`: the keep-alive `WatchdogSec=` asks for.
    @discardableResult
    func watchdog() -> Bool { send(["WATCHDOG=1"]) }

    /// Sends the assignments in one datagram; false when it could not be sent (the manager went away).
    @discardableResult
    func send(_ assignments: [String]) -> Bool {
        // A value cannot hold a newline: it would start another assignment.
        let message = assignments.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: "\n")
        let bytes = Array(message.utf8)
        while true {
            let sent = bytes.withUnsafeBytes { payload in
                address.withUnsafeBytes { raw in
                    sendto(
                        fd, payload.baseAddress, payload.count, Int32(MSG_NOSIGNAL),
                        raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
                }
            }
            if sent < 0 && errno == EINTR { continue }
            return sent == bytes.count
        }
    }

    /// The `sockaddr_un` for `$NOTIFY_SOCKET`: a path (NUL-terminated) or `@name` (an abstract address: a
    /// leading NUL, no terminator, the length says where it ends).
    static func encode(_ socket: String) -> [UInt8]? {
        guard let first = socket.utf8.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@") else {
            return nil
        }
        var path = Array(socket.utf8)
        if first == UInt8(ascii: "@") { path[0] = 0 } else { path.append(0) }
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        guard path.count <= capacity else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count
        return withUnsafeBytes(of: &address) { Array($0.prefix(length)) }
    }

    /// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, as sd_watchdog_enabled(3) advises; nil when
    /// the manager asks for no watchdog, or asks another process (`$WATCHDOG_PID`).
    static func watchdogInterval(
        environment: [String: String] = ProcessInfo.processInfo.environment, pid: pid_t = getpid()
    ) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0 else {
            return nil
        }
        if let owner = environment["WATCHDOG_PID"], pid_t(owner) != pid { return nil }
        return .microseconds(Int64(clamping: microseconds / 2))
    }
}
