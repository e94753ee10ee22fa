import DiscoverAPI
import NIOCore

/// What a method handler knows about its call: who made it, whether it streams, and how to send replies.
struct CallContext: Sendable {
    /// The caller, from `SO_PEERCRED`.
    let peer: PeerCredentials
    /// The call asked for a stream (`more: true`).
    let more: Bool
    /// Identifies the connection, so resources can belong to it (registrations).
    let connectionID: UInt64
    let slotID: UInt64
    let outbox: NIOLoopBound<VarlinkConnectionHandler>

    /// Sends an intermediate reply (`continues: true`) of a streaming call.
    ///
    /// Never blocks: a reader too slow for its stream gets its connection closed by the handler.
    func send<R: Encodable>(_ reply: R) throws {
        send(encoded: try VarlinkReply.encode(reply, continues: true))
    }

    /// Sends an intermediate reply already encoded with `continues: true` (shared by many streams).
    func send(encoded bytes: [UInt8]) {
        let outbox = self.outbox
        let slot = slotID
        if outbox.eventLoop.inEventLoop {
            outbox.value.deliver(slot: slot, bytes: bytes)
        } else {
            outbox.eventLoop.execute { outbox.value.deliver(slot: slot, bytes: bytes) }
        }
    }

    /// Throws `PermissionDenied` unless the caller is root or in `group`.
    func requirePrivilege(group: String?) throws(VarlinkError) {
        guard peer.isRootOrMember(of: group) else { throw .permissionDenied }
    }
}
