#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Group and user look-ups through NSS with the re-entrant calls.
///
/// NSS may ask a network service (LDAP, sssd) and block for seconds, so these run on a thread pool, never on an
/// event loop (DESIGN.md, "Nothing blocks an event loop"); see ``AccessControl``.
enum GroupDirectory {
    /// The gid of the group called `name` (`getgrnam_r`), or nil when there is no such group.
    static func gid(ofGroup name: String) -> UInt32? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var size = max(1024, Int(sysconf(Int32(_SC_GETGR_R_SIZE_MAX))))
        while size <= 1 << 24 {
            var buffer = [CChar](repeating: 0, count: size)
            let rc = getgrnam_r(name, &entry, &buffer, size, &result)
            if rc == ERANGE {
                size *= 2
                continue
            }
            guard rc == 0, result != nil else { return nil }
            return entry.gr_gid
        }
        return nil
    }

    /// The user name of `uid` (`getpwuid_r`), or nil when the user database does not know it.
    static func userName(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var size = max(1024, Int(sysconf(Int32(_SC_GETPW_R_SIZE_MAX))))
        while size <= 1 << 24 {
            var buffer = [CChar](repeating: 0, count: size)
            let rc = getpwuid_r(uid, &entry, &buffer, size, &result)
            if rc == ERANGE {
                size *= 2
                continue
            }
            guard rc == 0, result != nil, let name = entry.pw_name else { return nil }
            return String(cString: name)
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
