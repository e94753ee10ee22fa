import Foundation

/// Binds a Unix socket of `type` (`SOCK_STREAM`, `SOCK_DGRAM`) at `address`: a path, or `@name` for an abstract
/// address. Stream sockets are put in the listening state. The descriptor is close-on-exec.
func bindUnixSocket(_ address: String, type: Int32) throws -> Int32 {
    let fd = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw DaemonError("socket() failed: \(String(cString: strerror(errno)))") }
    var path = Array(address.utf8)
    if address.hasPrefix("@") { path[0] = 0 } else { path.append(0) }
    var storage = sockaddr_un()
    storage.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: path.prefix($0.count)) }
    let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count)
    let bound = withUnsafePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    guard bound == 0, type != Int32(SOCK_STREAM.rawValue) || listen(fd, 16) == 0 else {
        let reason = String(cString: strerror(errno))
        close(fd)
        throw DaemonError("cannot bind \(address): \(reason)")
    }
    return fd
}

/// A `NOTIFY_SOCKET` of the test's own: collects the datagrams the daemon sends its service manager.
final class NotifyListener: @unchecked Sendable {
    // @unchecked: `messages` is only touched by the test's own thread, one call at a time.
    let fd: Int32
    /// What to put in `NOTIFY_SOCKET`.
    let address: String
    /// Every datagram received so far, in order.
    private(set) var messages: [String] = []

    init(address: String) throws {
        fd = try bindUnixSocket(address, type: Int32(SOCK_DGRAM.rawValue))
        self.address = address
    }

    deinit { close(fd) }

    /// Receives datagrams until `condition` holds for all received so far (true) or `timeout` seconds pass
    /// (false).
    func waitUntil(timeout: Double = 20, _ condition: ([String]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition(messages) {
            guard case .bytes(let datagram) = receive(fd, before: deadline, capacity: 4096) else { return false }
            messages.append(String(decoding: datagram, as: UTF8.self))
        }
        return true
    }

    /// Indices of the received datagrams that assign `key=value`.
    func indices(of key: String, _ value: String = "1") -> [Int] {
        messages.indices.filter { Self.fields(messages[$0])[key] == value }
    }

    /// The `KEY=VALUE` assignments of a datagram, by key.
    static func fields(_ message: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in message.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            fields[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return fields
    }
}

/// Binds a socket of `type` to 127.0.0.1 on a free port (stream sockets listen); returns it and the port.
func bindLoopbackSocket(type: Int32) throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw DaemonError("socket() failed: \(String(cString: strerror(errno)))") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound, type != Int32(SOCK_STREAM.rawValue) || listen(fd, 16) == 0 else {
        let reason = String(cString: strerror(errno))
        close(fd)
        throw DaemonError("cannot bind 127.0.0.1: \(reason)")
    }
    return (fd, UInt16(bigEndian: address.sin_port))
}
