/// Who is on the other end of a connection, read with `SO_PEERCRED` when it is accepted.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32

    /// Creates credentials (tests; the server reads them from the socket).
    public init(uid: UInt32, gid: UInt32, pid: Int32) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }

    /// Used when the kernel did not tell: matches no owner and no group.
    public static let unknown = PeerCredentials(uid: UInt32.max, gid: UInt32.max, pid: 0)

    /// The peer runs as root.
    public var isRoot: Bool { uid == 0 }

    public var description: String { "uid=\(uid) gid=\(gid) pid=\(pid)" }
}

/// `struct ucred` from <sys/socket.h>, which Glibc's Swift module hides behind _GNU_SOURCE.
/// Same layout: pid_t, uid_t, gid_t, each 32 bits.
struct KernelPeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
