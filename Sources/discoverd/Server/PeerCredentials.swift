import Foundation

/// Who is on the other end of a connection, read with `SO_PEERCRED` when it is accepted.
struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    var uid: UInt32
    var gid: UInt32
    var pid: Int32

    /// Used when the kernel did not tell: matches no owner and no group.
    static let unknown = PeerCredentials(uid: UInt32.max, gid: UInt32.max, pid: 0)

    var isRoot: Bool { uid == 0 }

    var description: String { "uid=\(uid) gid=\(gid) pid=\(pid)" }

    /// Whether the peer is root or belongs to `group` (primary group, or listed as a member in the group file).
    func isRootOrMember(of group: String?) -> Bool {
        if isRoot { return true }
        guard let group, let entry = getgrnam(group) else { return false }
        if entry.pointee.gr_gid == gid { return true }
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name.map({ String(cString: $0) }) else { return false }
        var member = entry.pointee.gr_mem
        while let pointer = member?.pointee {
            if String(cString: pointer) == name { return true }
            member = member?.advanced(by: 1)
        }
        return false
    }
}

/// `struct ucred` from <sys/socket.h>, which Glibc's Swift module hides behind _GNU_SOURCE.
/// Same layout: pid_t, uid_t, gid_t, each 32 bits.
struct KernelPeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
