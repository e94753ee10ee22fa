#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Group and user look-ups through NSS with the re-entrant calls.
///
/// NSS may ask a network service (LDAP, sssd) and block for seconds, so these run on a thread pool, never on an
/// event loop (docs/DESIGN.md, "Nothing blocks an event loop"); see ``AccessControl``.
enum GroupDirectory {
    /// The gid of the group called `name` (`getgrnam_r`), or nil when there is no such group.
    static func gid(ofGroup name: String) -> UInt32? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        return withGrowingBuffer(initial: Int(sysconf(Int32(_SC_GETGR_R_SIZE_MAX)))) { buffer, size in
            let rc = getgrnam_r(name, &entry, buffer, size, &result)
            return (rc, result == nil ? nil : entry.gr_gid)
        }
    }

    /// The user name of `uid` (`getpwuid_r`), or nil when the user database does not know it.
    static func userName(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        return withGrowingBuffer(initial: Int(sysconf(Int32(_SC_GETPW_R_SIZE_MAX)))) { buffer, size in
            let rc = getpwuid_r(uid, &entry, buffer, size, &result)
            return (rc, result == nil ? nil : entry.pw_name.map { String(cString: $0) })
        }
    }

    /// Calls a `get*_r` look-up with a buffer that doubles while the look-up answers `ERANGE` (up to 16 MiB).
    private static func withGrowingBuffer<Value>(
        initial: Int, _ lookup: (UnsafeMutablePointer<CChar>, Int) -> (rc: Int32, value: Value?)
    ) -> Value? {
        var size = max(1024, initial)
        while size <= 1 << 24 {
            var buffer = [CChar](repeating: 0, count: size)
            let (rc, value) = buffer.withUnsafeMutableBufferPointer { lookup($0.baseAddress!, size) }
            guard rc == ERANGE else { return rc == 0 ? value : nil }
            size *= 2
        }
        return nil
    }

    /// Every group of the user `uid`: `primaryGID` and the supplementary groups the group database lists for the
    /// user (`getgrouplist`). Just `primaryGID` when the user is unknown.
    static func groups(ofUID uid: UInt32, primaryGID: UInt32) -> [UInt32] {
        guard let name = userName(of: uid) else { return [primaryGID] }
        var count: Int32 = 32
        while count <= 1 << 16 {
            var groups = [gid_t](repeating: 0, count: Int(count))
            var found = count
            if getgrouplist(name, primaryGID, &groups, &found) >= 0 {
                return Array(groups.prefix(Int(found)))
            }
            // -1: the array was too small; `found` says how large it must be.
            count = max(found, count * 2)
        }
        return [primaryGID]
    }
}
