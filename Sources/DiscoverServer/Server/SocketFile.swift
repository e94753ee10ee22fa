import Foundation

/// The socket file: created in its directory, never stolen from a live daemon.
public enum SocketFile {
    /// Why the socket could not be put in place; the daemon prints it and exits 1.
    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// Creates the directory and removes a stale socket. Fails if a live daemon holds the path.
    static func prepare(path: String) throws {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw Error("socket path is too long (\(path.utf8.count) bytes; Unix sockets allow 107): \(path)")
        }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw Error("cannot create socket directory \(directory): \(error.localizedDescription)")
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw Error("\(path) exists and is not a socket; refusing to replace it")
        }
        if isListening(path: path) {
            throw Error("another discoverd is already listening on \(path)")
        }
        unlink(path)
    }

    /// Whether something accepts connections on the socket.
    static func isListening(path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1)) + [0]
            raw.copyBytes(from: bytes)
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    static func remove(path: String) {
        var info = stat()
        if lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK { unlink(path) }
    }
}
