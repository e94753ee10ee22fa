import CTLSShim
import DNSCore
import NIOCore
import NIOTLS

/// TLS client on one channel, over system OpenSSL through `CTLSShim` (memory BIOs: the socket stays NIO's).
///
/// - The handshake starts when the channel is active (or at once when it already is); plaintext written before
///   it completes waits and goes out right after it. Completion fires `TLSUserEvent.handshakeCompleted` with the
///   agreed ALPN protocol, as NIO's TLS handlers do, so HTTP/2 and the pool's ``TLSLinkEvents`` see the usual event.
/// - Writes wait for the flush and are encrypted together then (one `SSL_write`): an HTTP/2 request's frames share
///   TLS records instead of taking one each, and the flush sends the ciphertext as one buffer. Their promises
///   complete with that write. (DoT does not come here: ``LoopDoTConnection`` gives each query a record.)
/// - A failure (a refused certificate, a broken handshake, garbage) is fired as a ``TLSClientError`` and closes the
///   channel; the server's close_notify closes it cleanly; an end without one is ``TLSClientError/uncleanShutdown``.
/// - Our close sends close_notify first. The OpenSSL connection is freed when the channel goes inactive or the
///   handler is removed, on the event loop, and never used after.
///
/// Not Sendable: made in the channel initializer and used on the channel's event loop only.
final class TLSClientHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What the certificate must carry besides a chain to a trusted root.
    enum Check: Equatable {
        case name(String)
        case address(String)
        /// Nothing, not even the chain (``TLSClientContext/Identity/unauthenticated``).
        case none
    }

    private enum State {
        case idle, handshaking, ready
        /// Closed by either side or failed: nothing more is read or written.
        case closed
    }

    private let shared: TLSClientContext.Shared
    private var connection: OpaquePointer?
    private var state = State.idle
    /// Plaintext written before the handshake completed, and whether a flush was asked for it.
    private var waiting: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var flushAsked = false
    /// Plaintext written since the last flush, and the promises of those writes: encrypted together at the flush.
    /// Each record's size is still a sum of padded messages (RFC 8467), so this hides no less than a record each.
    private var staged: ByteBuffer?
    private var stagedPromises: [EventLoopPromise<Void>] = []
    /// Promises of plaintext encrypted but not yet sent.
    private var unflushed: [EventLoopPromise<Void>] = []

    /// After the handshake: the protocol version (`TLSv1.3`), whether the session was resumed, the ALPN protocol.
    private(set) var tlsVersion: String?
    private(set) var resumed = false
    private(set) var negotiatedProtocol: String?
    /// The pin of the server's key (``peerPin(_:)``).
    private(set) var keyPin: String?

    init(context shared: TLSClientContext.Shared, serverName: String?, check: Check) throws {
        self.shared = shared
        connection = try Self.makeConnection(shared, serverName: serverName, check: check)
    }

    /// A new OpenSSL client connection of `shared` (memory BIOs): SNI `serverName`, and what the certificate must
    /// carry. The caller frees it (`ctls_connection_free`).
    static func makeConnection(_ shared: TLSClientContext.Shared, serverName: String?, check: Check) throws -> OpaquePointer {
        var error = [CChar](repeating: 0, count: 256)
        var host: String?
        var ip: String?
        switch check {
        case .name(let name): host = name
        case .address(let address): ip = address
        case .none: break
        }
        let made = ctls_connection_new(shared.pointer, serverName, host, ip, &error, error.count)
        guard let made else { throw TLSClientError.setup(TLSClientContext.text(error)) }
        return made
    }

    deinit {
        // Normally freed on the event loop already (channelInactive, handlerRemoved); a handler that never joined
        // a pipeline is freed here.
        if let connection { ctls_connection_free(connection) }
    }

    // MARK: Life

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startHandshake(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        state = .closed
        failWaiting(ChannelError.ioOnClosedChannel)
        release()
    }

    func channelActive(context: ChannelHandlerContext) {
        startHandshake(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        let unclean = state == .handshaking || state == .ready
        state = .closed
        failWaiting(unclean ? TLSClientError.uncleanShutdown : ChannelError.ioOnClosedChannel)
        release()
        if unclean { context.fireErrorCaught(TLSClientError.uncleanShutdown) }
        context.fireChannelInactive()
    }

    private func release() {
        if let connection {
            ctls_connection_free(connection)
            self.connection = nil
        }
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let connection, state == .handshaking || state == .ready else { return }
        let fed = buffer.withUnsafeReadableBytes { bytes in
            ctls_feed(connection, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
        }
        guard fed == 0 else {
            failed(context: context, TLSClientError.failed("out of memory"))
            return
        }
        if state == .handshaking {
            advanceHandshake(context: context)
        } else {
            readPlaintext(context: context)
        }
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard state == .idle, connection != nil else { return }
        state = .handshaking
        advanceHandshake(context: context)
    }

    private func advanceHandshake(context: ChannelHandlerContext) {
        guard let connection else { return }
        let result = ctls_handshake(connection)
        if result < 0 {
            failed(context: context, Self.failure(connection, verification: true))
            return
        }
        // Sending may close the channel (a write error) and free the connection: look again after it.
        sendCiphertext(context: context)
        guard result == 1, state == .handshaking, let connection = self.connection else { return }
        handshakeCompleted(context: context, connection: connection)
    }

    private func handshakeCompleted(context: ChannelHandlerContext, connection: OpaquePointer) {
        state = .ready
        tlsVersion = ctls_version(connection).map { String(cString: $0) }
        resumed = ctls_session_reused(connection) != 0
        keyPin = Self.peerPin(connection)
        var alpn = [CChar](repeating: 0, count: 256)
        negotiatedProtocol = ctls_alpn(connection, &alpn, alpn.count) > 0 ? TLSClientContext.text(alpn) : nil
        context.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: negotiatedProtocol))
        // The event may have closed the channel (a server without HTTP/2).
        guard state == .ready else { return }
        let queued = waiting
        waiting = []
        for (buffer, promise) in queued { stage(buffer, promise: promise, context: context) }
        if flushAsked {
            flushAsked = false
            flushStaged(context: context)
        }
        // Application data (or a session ticket) may have come with the last handshake flight.
        readPlaintext(context: context)
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        while state == .ready, let connection {
            // Nothing buffered: no read can give anything (a DoT reply is one record, so this saves a second,
            // empty read per reply). Otherwise what is buffered bounds the plaintext, so a reply gets a buffer of
            // its own size instead of 16 KiB (which glibc serves from its slow path).
            let readable = ctls_readable(connection)
            if readable == 0 {
                sendCiphertext(context: context)
                break
            }
            let capacity = min(16_384, max(readable, 512))
            var buffer = context.channel.allocator.buffer(capacity: capacity)
            var result: Int32 = 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: capacity) { space in
                result = ctls_read(connection, space.bindMemory(to: UInt8.self).baseAddress, space.count)
                return Int(max(result, 0))
            }
            if result > 0 {
                context.fireChannelRead(wrapInboundOut(buffer))
                continue
            }
            if result == -1 {
                failed(context: context, Self.failure(connection, verification: false))
                break
            }
            // Post-handshake messages (a key update) may need an answer. Sending may close the channel and free
            // the connection: look again after it.
            sendCiphertext(context: context)
            if result == -2, state == .ready, let connection = self.connection {
                // The server's close_notify: answer it and close.
                ctls_shutdown(connection)
                sendCiphertext(context: context)
                state = .closed
                failWaiting(ChannelError.ioOnClosedChannel)
                context.close(promise: nil)
            }
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        switch state {
        case .idle, .handshaking: waiting.append((buffer, promise))
        case .ready: stage(buffer, promise: promise, context: context)
        case .closed: promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    func flush(context: ChannelHandlerContext) {
        switch state {
        case .idle, .handshaking: flushAsked = true
        case .ready: flushStaged(context: context)
        case .closed: break
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all, state == .ready, let connection {
            ctls_shutdown(connection)
            sendCiphertext(context: context)
        }
        if mode == .all, state != .closed {
            state = .closed
            failWaiting(ChannelError.ioOnClosedChannel)
        }
        context.close(mode: mode, promise: promise)
    }

    /// Keeps one write's plaintext for the next flush.
    private func stage(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        if staged == nil {
            staged = buffer
        } else {
            var buffer = buffer
            staged!.writeBuffer(&buffer)
        }
        if let promise { stagedPromises.append(promise) }
    }

    /// Encrypts what was written since the last flush in one `SSL_write` and sends it with whatever else OpenSSL
    /// has for the server. A failure ends the connection (OpenSSL's state is then unusable): the writes' promises
    /// and every other waiting one fail and the channel closes, so a writer without a promise (a DoT query) learns
    /// of it from the close.
    private func flushStaged(context: ChannelHandlerContext) {
        if let buffer = staged {
            staged = nil
            let promises = stagedPromises
            stagedPromises = []
            guard let connection else {
                for promise in promises { promise.fail(ChannelError.ioOnClosedChannel) }
                return
            }
            if buffer.readableBytes > 0 {
                let written = buffer.withUnsafeReadableBytes { bytes in
                    ctls_write(connection, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
                }
                guard written == buffer.readableBytes else {
                    let error = Self.failure(connection, verification: false)
                    for promise in promises { promise.fail(error) }
                    failed(context: context, error)
                    return
                }
            }
            unflushed.append(contentsOf: promises)
        }
        sendCiphertext(context: context)
    }

    /// Sends every byte of ciphertext OpenSSL has for the server as one write; the promises of the plaintext in it
    /// complete with that write.
    private func sendCiphertext(context: ChannelHandlerContext) {
        let promises = unflushed
        unflushed = []
        let pending = connection.map { ctls_pending($0) } ?? 0
        guard let connection, pending > 0 else {
            for promise in promises { promise.succeed(()) }
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: pending)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { space in
            ctls_take(connection, space.bindMemory(to: UInt8.self).baseAddress, space.count)
        }
        var sent: EventLoopPromise<Void>?
        if promises.count == 1 {
            // One write in the flush (a miss at a time): its promise is the write's own, no promise to fan out.
            sent = promises[0]
        } else if !promises.isEmpty {
            let promise = context.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenComplete { result in
                for each in promises { each.completeWith(result) }
            }
            sent = promise
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: sent)
    }

    // MARK: Failure

    /// Why `connection` failed: the certificate's refusal (in the handshake, when OpenSSL noted one), the
    /// handshake's error, or a failure on the established connection.
    static func failure(_ connection: OpaquePointer, verification: Bool) -> TLSClientError {
        var text = [CChar](repeating: 0, count: 256)
        var subject = [CChar](repeating: 0, count: 256)
        var detail = [CChar](repeating: 0, count: 256)
        ctls_failure(connection, &text, text.count, &subject, subject.count, &detail, detail.count)
        let code = ctls_verify_error(connection)
        if verification, code != 0 {
            var about = TLSClientContext.text(subject)
            // A key that matched no pin: its own pin is what the operator needs to see. A server no trusted CA
            // vouches for (a self-signed resolver at home) may be trusted by its key: its pin is the remedy.
            if code == Int(CTLS_KEY_NOT_PINNED), let pin = peerPin(connection) {
                about = "pin-sha256=\(pin)" + (about.isEmpty ? "" : ", \(about)")
            } else if TLSClientContext.untrustedCA.contains(code), let pin = peerPin(connection) {
                about += (about.isEmpty ? "" : ", ") + "key pin-sha256=\(pin)"
            }
            return .verification(
                code: code, text: TLSClientContext.text(text), subject: about, detail: TLSClientContext.text(detail))
        }
        return verification ? .handshake(TLSClientContext.text(detail)) : .failed(TLSClientContext.text(detail))
    }

    /// The pin of the server's key (``UpstreamServer/pins``, base64), once the handshake has seen it.
    static func peerPin(_ connection: OpaquePointer) -> String? {
        var digest = [UInt8](repeating: 0, count: 32)
        return ctls_peer_pin(connection, &digest) == 1 ? Base64.encode(digest) : nil
    }

    private func failed(context: ChannelHandlerContext, _ error: TLSClientError) {
        guard state != .closed else { return }
        state = .closed
        // The alert OpenSSL queued for the server goes out before the close.
        sendCiphertext(context: context)
        failWaiting(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func failWaiting(_ error: any Error) {
        let queued = waiting
        waiting = []
        flushAsked = false
        for (_, promise) in queued { promise?.fail(error) }
        staged = nil
        let promises = stagedPromises + unflushed
        stagedPromises = []
        unflushed = []
        for promise in promises { promise.fail(error) }
    }
}
