import DiscoverAPI
import Logging
import NIOConcurrencyHelpers
import NIOPosix

/// Who may call the privileged methods: root always; members of the admin group may call `Flush` and `Reload`;
/// when an advertise group is set, only its members may call `Advertise`.
///
/// Group names are resolved to gids when configured (at start and on every reload) and a peer's groups are read
/// when a privileged call arrives, both on a thread pool: NSS may block, and the event loops must not. A peer is a
/// member through its primary group or any supplementary group the group database lists for its user.
public final class AccessControl: Sendable {
    /// A group named in the configuration, with its gid when it exists.
    public struct Group: Sendable, Equatable {
        /// The name as configured.
        public var name: String
        /// Its gid, or nil when no such group exists (then only root passes).
        public var gid: UInt32?
    }

    private struct Groups {
        var admin: Group?
        var advertise: Group?
        var publish: Group?
    }

    private let groups = NIOLockedValueBox(Groups())
    /// Uids found in the admin group by a privileged call since the groups were configured: they may use the
    /// connection reserve, which is decided at accept, where no NSS look-up may run.
    private let knownAdmins = NIOLockedValueBox(Set<UInt32>())
    private let threadPool: NIOThreadPool
    private let logger: Logger

    /// Creates a policy where only root is privileged and everyone may advertise.
    public init(threadPool: NIOThreadPool = .singleton, logger: Logger) {
        self.threadPool = threadPool
        self.logger = logger
    }

    /// The admin group in effect.
    public var adminGroup: Group? { groups.withLockedValue { $0.admin } }
    /// The advertise group in effect (nil: everyone may advertise).
    public var advertiseGroup: Group? { groups.withLockedValue { $0.advertise } }
    /// The group that may advertise in unicast domains (nil: root and the admin group).
    public var publishGroup: Group? { groups.withLockedValue { $0.publish } }

    /// Resolves the group names on the thread pool and puts them in effect. A name that does not exist is logged
    /// and admits nobody but root.
    public func configure(adminGroup: String?, advertiseGroup: String?, publishGroup: String? = nil) async {
        let admin = await resolve(adminGroup, setting: "admin-group")
        let advertise = await resolve(advertiseGroup, setting: "advertise-group")
        let publish = await resolve(publishGroup, setting: "publish-group")
        groups.withLockedValue { $0 = Groups(admin: admin, advertise: advertise, publish: publish) }
        knownAdmins.withLockedValue { $0.removeAll() }
    }

    /// Throws `PermissionDenied` unless `peer` may register in a unicast domain (DNS UPDATE signed with the
    /// daemon's key, seen by everyone who queries the zone): root, members of `[wide-area] publish-group`, or, when
    /// none is set, members of the admin group.
    public func requireWideAreaPublisher(_ peer: PeerCredentials) async throws(VarlinkError) {
        let group = publishGroup ?? adminGroup
        guard await isMember(peer, of: group, whenUnset: false) else { throw .permissionDenied }
    }

    /// Whether `peer` is root or in the admin group (`Status` shows such a caller the names looked up).
    public func isAdmin(_ peer: PeerCredentials) async -> Bool {
        await isMember(peer, of: adminGroup, whenUnset: false)
    }

    /// Throws `PermissionDenied` unless `peer` is root or in the admin group.
    public func requireAdmin(_ peer: PeerCredentials) async throws(VarlinkError) {
        guard await isAdmin(peer) else { throw .permissionDenied }
        if !peer.isRoot { knownAdmins.withLockedValue { _ = $0.insert(peer.uid) } }
    }

    /// Whether `peer` may take the connections reserved above `max-connections` (so that Reload always gets
    /// through): root, a peer whose primary group is the admin group, or a uid a privileged call found in it.
    /// Decided without NSS: it runs at accept, on an event loop.
    public func mayUseReserve(_ peer: PeerCredentials) -> Bool {
        if peer.isRoot { return true }
        if let gid = adminGroup?.gid, peer.gid == gid { return true }
        return knownAdmins.withLockedValue { $0.contains(peer.uid) }
    }

    /// Throws `PermissionDenied` when an advertise group is set and `peer` is neither root nor in it.
    public func requireAdvertiser(_ peer: PeerCredentials) async throws(VarlinkError) {
        guard await isMember(peer, of: advertiseGroup, whenUnset: true) else { throw .permissionDenied }
    }

    func isMember(_ peer: PeerCredentials, of group: Group?, whenUnset: Bool) async -> Bool {
        if peer.isRoot { return true }
        guard let group else { return whenUnset }
        guard let gid = group.gid, peer != .unknown else { return false }
        if peer.gid == gid { return true }
        let groups = try? await threadPool.runIfActive {
            GroupDirectory.groups(ofUID: peer.uid, primaryGID: peer.gid)
        }
        return groups?.contains(gid) ?? false
    }

    private func resolve(_ name: String?, setting: String) async -> Group? {
        guard let name else { return nil }
        let gid = try? await threadPool.runIfActive { GroupDirectory.gid(ofGroup: name) }
        if gid == nil {
            logger.warning(
                "group does not exist; only root passes", metadata: ["setting": "\(setting)", "group": "\(name)"])
        }
        return Group(name: name, gid: gid)
    }
}
