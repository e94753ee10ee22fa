import DNSCore
import Logging
import NIOCore

/// DNS over TLS on one connection of a ``TLSConnectionPool`` (RFC 7858).
///
/// Queries are pipelined and replies matched by ID in any order (RFC 7766 §6.2.1.1, RFC 7858 §3.3); an ID already
/// waiting on the connection is never reused. Every query carries an empty edns-tcp-keepalive option (RFC 7828)
/// and is padded to a multiple of 128 bytes (RFC 7830, RFC 8467 §4.1); the timeout the server gives back in its
/// keepalive option bounds how long the pool keeps the connection idle.
///
/// The queries sent during one event-loop tick go out together: each is written, and the connection is flushed
/// once the tick's other tasks have run, so a burst is encrypted in one `SSL_write` (its queries share TLS records,
/// each still padded on its own) and costs one `write` instead of one per query (RFC 7766 §6.2.1.1 allows any
/// number of queries in one segment). A query sent while no other waits on the connection goes out at once, in a
/// record of its own: a lone miss does not wait a loop turn for company.
final class DoTSession: TLSSession, @unchecked Sendable {
    // @unchecked Sendable: every `var` is read and written only on its pool's event loop.
    static let sendsKeepalive = true

    private let logger: Logger
    /// The tries waiting for their reply, by message ID.
    private var pending: [UInt16: (query: PendingQuery, completion: TryCompletion)] = [:]
    /// Queries were written in this tick and a flush is scheduled.
    private var flushPending = false
    private(set) var serverKeepalive: TimeAmount?

    init(logger: Logger) {
        self.logger = logger
    }

    func channelHandlers() -> [any ChannelHandler] {
        [DoTReplyHandler { [self] frame in received(frame) }]
    }

    func handshakeCompleted(alpn: String?, channel: any Channel) throws {}

    func send(_ query: PendingQuery, completion: TryCompletion, on channel: any Channel) {
        var query = query
        while pending[query.id] != nil {
            query = query.withID(QueryID.random())
        }
        let id = query.id
        pending[id] = (query, completion)
        completion.tag = Int(id)
        let wire = query.wire
        var frame = channel.allocator.buffer(capacity: wire.count + 2)
        frame.writeInteger(UInt16(truncatingIfNeeded: wire.count))
        frame.writeBytes(wire)
        // No write promise: a write fails only with its connection (the TLS handler closes it on any failure,
        // NIO on a socket error), and the pool then ends every try on it with the reason.
        channel.write(frame, promise: nil)
        if pending.count == 1, !flushPending {
            // The only query on the connection (misses one at a time): out now, not a loop turn later.
            channel.flush()
        } else if !flushPending {
            flushPending = true
            // Runs after the tasks already queued on the loop: the other queries of this tick are written by then.
            channel.eventLoop.execute {
                self.flushPending = false
                channel.flush()
            }
        }
    }

    func ended(_ completion: TryCompletion) {
        let id = UInt16(truncatingIfNeeded: completion.tag)
        if pending[id]?.completion === completion { pending[id] = nil }
    }

    private func received(_ frame: [UInt8]) {
        guard frame.count >= 2 else { return }
        let id = UInt16(frame[0]) << 8 | UInt16(frame[1])
        guard let (query, completion) = pending[id] else {
            logger.debug("dropped DoT reply for no waiting query", metadata: ["dns.id": "\(id)"])
            return
        }
        switch query.classify(frame, overTCP: true) {
        case .accept(let message):
            // RFC 7828 §3.3.2: the server's timeout, in units of 100 ms, bounds how long the connection stays idle.
            if let timeout = EDNSPadding.keepaliveTimeout(in: frame) {
                serverKeepalive = .milliseconds(Int64(timeout) * 100)
            }
            completion.succeed(.response(message))
        case .truncated: break
        case .drop(let reason): logger.debug("dropped DoT message", metadata: ["dns.reason": "\(reason)"])
        }
    }
}

/// Splits the plaintext stream into DNS messages (RFC 1035 §4.2.2: a 2-byte length, then the message) and hands
/// each to the ``DoTSession``; an error from the TLS handler error closes the connection (its tries then fail).
///
/// One handler instead of NIO's `ByteToMessageHandler` and a decoder: a read that holds whole messages (nearly
/// every DoT read: one reply per TLS record) is split in place; only a partial message is kept for the next read.
final class DoTReplyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let deliver: ([UInt8]) -> Void
    /// The start of a message whose rest has not come yet.
    private var carry: ByteBuffer?

    /// - Parameter deliver: called with each message, in order, on the channel's loop.
    init(deliver: @escaping ([UInt8]) -> Void) {
        self.deliver = deliver
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var kept = carry {
            carry = nil
            kept.writeBuffer(&buffer)
            buffer = kept
        }
        while let frame = Self.nextFrame(&buffer) {
            deliver(frame)
        }
        if buffer.readableBytes > 0 {
            buffer.discardReadBytes()
            carry = buffer
        }
    }

    /// The next whole message in `buffer` (its length prefix consumed), or nil when it has not all come yet.
    static func nextFrame(_ buffer: inout ByteBuffer) -> [UInt8]? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
            buffer.readableBytes >= 2 + Int(length)
        else { return nil }
        buffer.moveReaderIndex(forwardBy: 2)
        return buffer.readBytes(length: Int(length)) ?? []
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
