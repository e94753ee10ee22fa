import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a connection to the daemon's socket failed, in the words of the system (`strerror`), so people see
/// "No such file or directory" or "Permission denied" rather than a guess.
enum SocketDiagnosis {
    /// The reason for `error`, thrown by connecting to `path`: the path's own state first (missing, not a socket),
    /// then the errno of the connect call.
    static func reason(connecting path: String, error: any Error) -> String {
        var info = stat()
        if stat(path, &info) != 0 {
            return String(cString: strerror(errno))
        }
        if info.st_mode & S_IFMT != S_IFSOCK {
            return info.st_mode & S_IFMT == S_IFDIR ? "is a directory, not a socket" : "is not a socket"
        }
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        if let nested = (error as? NIOConnectionError)?.connectionErrors.first?.error as? IOError {
            return String(cString: strerror(nested.errnoCode))
        }
        if error is SocketAddressError { return "the path is too long for a Unix socket" }
        return "\(error)"
    }

    /// The one-line message for a failed connection to `path`.
    static func message(path: String, reason: String) -> String {
        let hint: String
        switch reason {
        case String(cString: strerror(ENOENT)), String(cString: strerror(ECONNREFUSED)):
            hint = " (is discoverd running?)"
        default: hint = ""
        }
        return reason.hasPrefix("is ") ? "\(path) \(reason)" : "cannot reach discoverd at \(path): \(reason)\(hint)"
    }
}
