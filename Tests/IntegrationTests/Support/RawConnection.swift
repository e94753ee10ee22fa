import Foundation

/// Calls `body` with the `sockaddr_un` of `path` (cut to fit) and its length, for connect or bind.
func withUnixAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// A blocking Unix-socket connection that speaks raw bytes, to test the wire protocol exactly
/// (no client library in between).
// @unchecked: `write` touches only the fd (send/recv on one socket from two threads is safe in the kernel);
// the read buffer is used by one thread at a time, as the tests do.
final class RawConnection: @unchecked Sendable {
    let fd: Int32

    init(path: String) throws {
        // Connect on a local descriptor and store it only on success: a throwing init whose stored properties
        // are all set runs deinit, which would close the descriptor a second time (maybe someone else's by then).
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw DaemonError("socket() failed") }
        guard withUnixAddress(path, { connect(fd, $0, $1) }) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw DaemonError("connect(\(path)) failed: \(reason)")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    static func canConnect(_ path: String) -> Bool { (try? RawConnection(path: path)) != nil }

    /// Writes all bytes (blocking). Returns false when the peer closed.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    /// Sends a call (NUL appended).
    @discardableResult
    func call(_ json: String) -> Bool { write(Array(json.utf8) + [0]) }

    private var buffer: [UInt8] = []
    /// Set when the peer closed the connection.
    private(set) var closedByPeer = false

    /// Reads the next NUL-terminated message, or nil on EOF or timeout.
    func readMessage(timeout: Double = 10) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let nul = buffer.firstIndex(of: 0) {
                let message = String(decoding: buffer[..<nul], as: UTF8.self)
                buffer.removeSubrange(...nul)
                return message
            }
            if closedByPeer { return nil }
            switch receive(fd, before: deadline, capacity: 65536) {
            case .timeout: return nil
            case .closed: closedByPeer = true
            case .bytes(let chunk): buffer += chunk
            }
        }
    }

    /// Reads a message and parses it as a JSON object.
    func readJSON(timeout: Double = 10) -> [String: Any]? {
        guard let text = readMessage(timeout: timeout) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    /// Waits until the peer closes the connection (true) or the timeout passes (false).
    func waitForClose(timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if closedByPeer { return true }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n == 0 || (n < 0 && errno != EINTR) { closedByPeer = true }
        }
        return closedByPeer
    }
}

/// What ``receive(_:before:capacity:)`` got.
enum Received {
    case bytes([UInt8])
    /// End of file or an error: the peer is gone.
    case closed
    case timeout
}

/// Waits until `fd` is readable (at most until `deadline`), then reads up to `capacity` bytes: one datagram, or
/// what a stream has. Signals (SIGCHLD of other tests' processes) interrupt poll and recv: they are retried.
func receive(_ fd: Int32, before deadline: Date, capacity: Int) -> Received {
    while true {
        let remaining = deadline.timeIntervalSinceNow
        guard remaining > 0 else { return .timeout }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(max(1, remaining * 1000)))
        if ready < 0 && errno == EINTR { continue }
        guard ready > 0 else { return .timeout }
        var chunk = [UInt8](repeating: 0, count: capacity)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n < 0 && errno == EINTR { continue }
        return n > 0 ? .bytes(Array(chunk[..<n])) : .closed
    }
}
