import DiscoverAPI
import NIOCore

/// What a method handler knows about its call: who made it, whether it streams, and how to send replies.
public struct CallContext: Sendable {
    /// The caller, from `SO_PEERCRED`.
    public let peer: PeerCredentials
    /// The call asked for a stream (`more: true`).
    public let more: Bool
    /// Identifies the connection, so resources can belong to it (registrations).
    public let connectionID: UInt64
    let slotID: UInt64
    let outbox: NIOLoopBound<VarlinkConnectionHandler>

    /// Where this call's intermediate replies go, for senders that serve many calls at once (``StreamFanout``).
    var stream: StreamSlot { StreamSlot(outbox: outbox, slot: slotID) }

    /// Sends an intermediate reply (`continues: true`) of a streaming call.
    ///
    /// Never blocks: when the reader lets more than the connection's send-buffer limit pile up, the handler ends
    /// the call (see ``RouteTable/register(_:requiresMore:whenReaderTooSlow:_:)``) and cancels its task.
    public func send<R: Encodable>(_ reply: R) throws {
        send(encoded: try VarlinkReply.encode(reply, continues: true))
    }

    /// Sends an intermediate reply already encoded with `continues: true` (shared by many streams).
    public func send(encoded bytes: [UInt8]) {
        let outbox = self.outbox
        let slot = slotID
        if outbox.eventLoop.inEventLoop {
            outbox.value.deliver(slot: slot, bytes: bytes)
        } else {
            outbox.eventLoop.execute { outbox.value.deliver(slot: slot, bytes: bytes) }
        }
    }
}
