#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Where the daemon's socket lives, by the rules of docs/API.md.
public enum SocketPath {
    /// Environment variable clients read to find the socket.
    public static let environmentVariable = "DISCOVERD_SOCKET"

    /// The default path for a daemon run by `uid`: `/run/discoverd/io.discoverd` for root, else
    /// `$XDG_RUNTIME_DIR/discoverd/io.discoverd` (falling back to `/run/user/UID` when unset).
    public static func daemonDefault(
        uid: UInt32 = getuid(), environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        if uid == 0 { return "/run/discoverd/io.discoverd" }
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/run/user/\(uid)"
        return runtime + "/discoverd/io.discoverd"
    }

    /// The path a client uses: an explicit one, else `$DISCOVERD_SOCKET`, else the daemon default for this
    /// user, else (for a non-root user whose own daemon is not running) the system daemon's socket.
    public static func clientDefault(
        explicit: String? = nil, uid: UInt32 = getuid(),
        environment: [String: String] = ProcessInfo.processInfo.environment,
        exists: (String) -> Bool = { FileManager.default.fileExists(atPath: $0) }
    ) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment[environmentVariable], !fromEnvironment.isEmpty { return fromEnvironment }
        let own = daemonDefault(uid: uid, environment: environment)
        if uid != 0 && !exists(own) && exists(daemonDefault(uid: 0)) { return daemonDefault(uid: 0) }
        return own
    }
}
