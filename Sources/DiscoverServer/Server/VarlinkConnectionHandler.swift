import DiscoverAPI
import Foundation
import Logging
import NIOCore

/// One client connection: splits messages, runs calls, and writes replies strictly in call order.
///
/// Pipelined one-shot calls run concurrently; their replies are held until every earlier call has
/// answered. A `more` call is a barrier: calls behind it start only when its stream ends, as varlink
/// requires. When too many calls are queued, or the client does not read its replies, the handler stops
/// reading (back-pressure, nothing lost).
///
/// The slow-reader rule, the only one: when a stream's replies pile up unsent past `maxSendBuffer` bytes, the
/// stream ends. Its task is cancelled and, when its method declares one (`Browse`: `SubscriberTooSlow`), that
/// error is its final reply and the connection goes on; otherwise the connection is closed. Other connections
/// never wait for it. All state is confined to the channel's event loop.
///
/// The hot path: a call the router can answer synchronously (a cache hit, see
/// ``RouteTable/registerImmediate(_:_:)``) is answered here, without a `Task`: written at once when no earlier call
/// is waiting for its reply (no slot at all), else queued in its slot like any other reply. Replies written while a
/// read batch is being handled are flushed once, when the batch ends.
final class VarlinkConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    typealias Limits = ConnectionLimits

    /// A class, not a struct: `CircularBuffer`'s subscript copies its element on every access, and a stream's
    /// slot is looked at for each of its replies.
    private final class Slot {
        let id: UInt64
        let call: VarlinkCall?
        let more: Bool
        let oneway: Bool
        var output: [[UInt8]] = []
        var outputBytes = 0
        var started = false
        var done = false
        var task: Task<Void, Never>?
        /// The final reply when this stream's reader falls behind; nil closes the connection instead.
        var readerTooSlow: VarlinkError?
        /// The call holds one of its uid's call slots (``ConnectionRegistry/takeCall(uid:limit:)``) until done.
        var counted = false
        /// Bytes of the message while the call waits to start (the input budget).
        var queuedBytes = 0

        init(id: UInt64, call: VarlinkCall?) {
            self.id = id
            self.call = call
            self.more = call?.more ?? false
            self.oneway = call?.oneway ?? false
        }
    }

    let connectionID: UInt64
    private let router: MethodRouter
    private let limits: Limits
    private let logger: Logger
    private let registry: ConnectionRegistry

    private var framer: VarlinkFramer
    /// See ``init(connectionID:router:limits:registry:logger:peer:writableUnderLimit:)``.
    private let writableUnderLimit: Bool
    private var slots = CircularBuffer<Slot>()
    private var nextSlotID: UInt64 = 0
    /// Id of the first slot not yet started. Calls start strictly in order, so started slots are a prefix.
    private var nextToStart: UInt64 = 0
    /// Started `more` calls that have not finished: while one exists, nothing after it may start.
    private var openStreams = 0
    private var peer = PeerCredentials.unknown
    private var context: ChannelHandlerContext?
    private var readingPaused = false
    private var closing = false
    /// The client shut down its write side: close once every call has answered.
    private var inputClosed = false
    /// The server is shutting down (`ChannelShouldQuiesceEvent`): no new calls are read, streams are ended, the
    /// connection closes once the calls already read have answered.
    private var quiescing = false
    /// Inside `channelRead`: replies are written now and flushed once in `channelReadComplete`.
    private var inReadBatch = false
    private var flushPending = false
    /// Work that waits until the replies before it are on their way (refreshes of stale answers).
    private var afterFlush: [@Sendable () -> Void] = []
    /// Calls one uid may have in flight over all its connections; nil: no per-uid accounting (tests).
    private let callsPerUID: Int?
    /// Calls of this connection holding one of its uid's slots.
    private var countedCalls = 0
    /// Bytes of calls decoded and not yet started.
    private var queuedInputBytes = 0
    /// When a call last arrived or ended (the idle timeout counts from it).
    private var lastActivity = NIODeadline.now()
    private var idleTimer: Scheduled<Void>?

    /// - Parameter peer: who is calling until `SO_PEERCRED` says otherwise (tests over channels without a socket).
    /// - Parameter writableUnderLimit: the channel's high water mark is below `limits.maxSendBuffer` (as
    ///   ``VarlinkServer`` sets it up), so a writable channel with no reply held cannot be over the limit.
    init(
        connectionID: UInt64, router: MethodRouter, limits: Limits, registry: ConnectionRegistry, logger: Logger,
        peer: PeerCredentials = .unknown, writableUnderLimit: Bool = false, callsPerUID: Int? = nil
    ) {
        self.callsPerUID = callsPerUID
        self.writableUnderLimit = writableUnderLimit
        self.connectionID = connectionID
        self.router = router
        self.limits = limits
        self.registry = registry
        self.logger = logger
        self.peer = peer
        self.framer = VarlinkFramer(maxMessageSize: limits.maxMessageSize)
    }

    /// Replies finished but held behind an earlier unanswered call (for tests).
    var heldReplyCount: Int { slots.filter { $0.done && !$0.output.isEmpty }.count }
    /// Bytes of replies held, finished or not (for tests).
    var heldReplyBytes: Int { slots.reduce(0) { $0 + $1.outputBytes } }
    /// Whether the handler has stopped reading (for tests).
    var isReadingPaused: Bool { readingPaused }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// Lets go of the context: it holds this handler, so keeping it would keep both, and the pipeline and the
    /// framer's buffer with them, after the channel is gone (0.7 KB for every connection ever closed).
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        readPeerCredentials(context: context)
        lastActivity = context.eventLoop.now
        armIdleTimer(context: context, at: lastActivity + (limits.idleTimeout ?? .zero))
        context.fireChannelActive()
    }

    /// Closes the connection once it has had no call and no stream for `idleTimeout`.
    private func armIdleTimer(context: ChannelHandlerContext, at deadline: NIODeadline) {
        guard let timeout = limits.idleTimeout else { return }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(deadline: deadline) {
            let handler = bound.value
            guard !handler.closing else { return }
            let context = loopBoundContext.value
            let now = context.eventLoop.now
            if !handler.slots.isEmpty || handler.openStreams > 0 || handler.framer.bufferedByteCount > 0 {
                handler.lastActivity = now
            }
            if now - handler.lastActivity >= timeout {
                handler.logger.debug(
                    "idle connection closed",
                    metadata: ["connection": "\(handler.connectionID)", "peer": "\(handler.peer)"])
                handler.closing = true
                handler.cancelAll()
                context.close(promise: nil)
            } else {
                handler.armIdleTimer(context: context, at: handler.lastActivity + timeout)
            }
        }
    }

    private func readPeerCredentials(context: ChannelHandlerContext) {
        guard let provider = context.channel as? SocketOptionProvider else { return }
        let future: EventLoopFuture<KernelPeerCredentials> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET),
            name: NIOBSDSocket.Option(rawValue: SO_PEERCRED))
        // On the channel's own loop this future is already complete, so no call can start before it.
        future.assumeIsolated().whenSuccess { credentials in
            self.peer = PeerCredentials(uid: credentials.uid, gid: credentials.gid, pid: credentials.pid)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing, !quiescing else { return }
        let buffer = unwrapInboundIn(data)
        lastActivity = context.eventLoop.now
        inReadBatch = true
        framer.append(buffer.readableBytesView)
        decodeQueuedMessages(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inReadBatch = false
        if flushPending {
            flushPending = false
            context.flush()
        }
        runAfterFlush()
        context.fireChannelReadComplete()
    }

    private func runAfterFlush() {
        guard !afterFlush.isEmpty else { return }
        let work = afterFlush
        afterFlush.removeAll()
        for item in work { item() }
    }

    /// Turns buffered bytes into queued calls, up to the queue limit; the rest waits in the framer.
    private func decodeQueuedMessages(context: ChannelHandlerContext) {
        // The input budget: a client cannot make us hold more of its calls than this, however many it pipelines.
        while !quiescing, slots.count < limits.maxQueuedCalls && queuedInputBytes < limits.maxInputBuffer {
            let message: ArraySlice<UInt8>?
            do {
                message = try framer.next()
            } catch {
                guard case .messageTooLarge(let limit) = error else { return }
                logger.notice("message too large, closing", metadata: ["connection": "\(connectionID)", "peer": "\(peer)"])
                fail(with: .messageTooLarge(limit: limit), context: context)
                return
            }
            guard let message else { break }
            enqueue(message, context: context)
        }
        startEligibleCalls()
        flushReady(context: context)
        updateReading(context: context)
    }

    /// Stops reading while too many calls are queued or the client is not reading its replies, so a
    /// client can neither grow our memory nor lose a call; resumes when both drain.
    private func updateReading(context: ChannelHandlerContext) {
        let shouldPause =
            slots.count >= limits.maxQueuedCalls || (!context.channel.isWritable && openStreams == 0)
            || queuedInputBytes + framer.bufferedByteCount >= limits.maxInputBuffer
        if shouldPause && !readingPaused {
            readingPaused = true
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        } else if !shouldPause && readingPaused {
            readingPaused = false
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if !closing { updateReading(context: context) }
        context.fireChannelWritabilityChanged()
    }

    private func enqueue(_ message: ArraySlice<UInt8>, context: ChannelHandlerContext) {
        let call: VarlinkCall
        do {
            // Nothing before this call is unanswered, so its synchronous answer (a cache hit) is next on the wire.
            switch try router.route(message, peer: peer, answerNow: slots.isEmpty) {
            case .answered(let immediate):
                writeImmediate(immediate, context: context)
                return
            case .call(let decoded):
                call = decoded
            }
        } catch {
            appendAnswered(VarlinkReply.encode(error: error))
            return
        }
        // Per-uid fairness: past its uid's cap of calls in flight, a call is answered at once with an error; the
        // connection, and everyone else's, goes on.
        var counted = false
        if let callsPerUID {
            guard registry.takeCall(uid: peer.uid, limit: callsPerUID) else {
                appendAnswered(VarlinkReply.encode(error: .tooManyCalls(limit: callsPerUID)))
                return
            }
            counted = true
            countedCalls += 1
        }
        let slot = Slot(id: nextSlotID, call: call)
        slot.counted = counted
        slot.queuedBytes = message.count
        queuedInputBytes += message.count
        slots.append(slot)
        nextSlotID += 1
    }

    /// Queues an answer that needs no call (an error): the framing is intact, so the connection stays usable.
    private func appendAnswered(_ reply: [UInt8]) {
        let slot = Slot(id: nextSlotID, call: nil)
        nextSlotID += 1
        slot.output = [reply]
        slot.started = true
        slot.done = true
        slots.append(slot)
    }

    /// Marks the slot at `index` done and gives back its uid's call slot.
    private func markDone(_ index: CircularBuffer<Slot>.Index) {
        let slot = slots[index]
        slot.done = true
        if slot.counted {
            slot.counted = false
            countedCalls -= 1
            registry.releaseCalls(uid: peer.uid, count: 1)
        }
    }

    /// Writes the synchronous answer of a call with nothing unanswered before it, without a slot.
    private func writeImmediate(_ immediate: ImmediateReply, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(immediate.message), promise: nil)
        if let afterWrite = immediate.afterWrite { afterFlush.append(afterWrite) }
        if inReadBatch {
            flushPending = true
        } else {
            context.flush()
            runAfterFlush()
        }
    }

    /// Starts queued calls in order, stopping behind an unfinished `more` call.
    private func startEligibleCalls() {
        while openStreams == 0, let index = index(of: nextToStart) {
            nextToStart += 1
            if slots[index].started { continue }
            start(at: index)
        }
    }

    /// Where the slot with this id is: ids are consecutive from the head, so this is O(1).
    private func index(of id: UInt64) -> CircularBuffer<Slot>.Index? {
        // Slots are appended with consecutive ids and removed from the head only.
        let count = UInt64(slots.count)
        let first = nextSlotID &- count
        guard count > 0, id >= first, id - first < count else { return nil }
        return slots.index(slots.startIndex, offsetBy: Int(id - first))
    }

    private func start(at index: CircularBuffer<Slot>.Index) {
        guard let call = slots[index].call, let context else { return }
        slots[index].started = true
        queuedInputBytes -= slots[index].queuedBytes
        slots[index].queuedBytes = 0
        if let immediate = router.immediateReply(call, peer: peer) {
            slots[index].output.append(immediate.bytes)
            slots[index].outputBytes += immediate.message.readableBytes
            markDone(index)
            if let afterWrite = immediate.afterWrite { afterFlush.append(afterWrite) }
            return
        }
        let slotID = slots[index].id
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        let callContext = CallContext(
            peer: peer, more: call.more, connectionID: connectionID, slotID: slotID, outbox: bound)
        let router = self.router
        let registry = self.registry
        if call.more {
            registry.addStreams(1)
            openStreams += 1
            slots[index].readerTooSlow = router.readerTooSlowError(for: call.method)
        }
        slots[index].task = Task {
            let reply = await router.dispatch(call, context: callContext)
            if call.more { registry.addStreams(-1) }
            // Tasks run on the event loops (see Discoverd.run), usually on this connection's: then the reply is
            // written right away instead of queueing one more job.
            if loop.inEventLoop {
                bound.value.finish(slot: slotID, reply: reply)
            } else {
                loop.execute { bound.value.finish(slot: slotID, reply: reply) }
            }
        }
    }

    /// An intermediate reply of a streaming call.
    func deliver(slot id: UInt64, bytes: [UInt8]) {
        guard !closing, let context, let index = index(of: id) else { return }
        if slots[index].oneway || slots[index].done { return }
        slots[index].output.append(bytes)
        slots[index].outputBytes += bytes.count
        flushReady(context: context)
        enforceSendBuffer(slot: id, context: context)
    }

    /// An intermediate reply of a streaming call, as a buffer shared with other connections (``StreamFanout``).
    ///
    /// A stream at the head with nothing held (the usual case: calls behind a stream wait for it) is written as it
    /// is, without a copy; otherwise the reply is held like any other.
    func deliver(slot id: UInt64, buffer: ByteBuffer) {
        guard !closing, let context, let index = index(of: id) else { return }
        let slot = slots[index]
        guard index == slots.startIndex, slot.output.isEmpty else {
            deliver(slot: id, bytes: Array(buffer.readableBytesView))
            return
        }
        if slot.oneway || slot.done { return }
        context.write(wrapOutboundOut(buffer), promise: nil)
        if inReadBatch {
            flushPending = true
        } else {
            context.flush()
            runAfterFlush()
        }
        enforceSendBuffer(slot: id, context: context)
    }

    /// The final reply of a call (nil when it was cancelled or was oneway).
    func finish(slot id: UInt64, reply: [UInt8]?) {
        // A stream ended as too slow is already done; its cancelled task still reports back.
        guard !closing, let context, let index = index(of: id), !slots[index].done else { return }
        if let reply, !slots[index].oneway {
            slots[index].output.append(reply)
            slots[index].outputBytes += reply.count
        }
        if slots[index].more { openStreams -= 1 }
        markDone(index)
        slots[index].task = nil
        lastActivity = context.eventLoop.now
        flushReady(context: context)
        // Calls held back by the queue limit or by a finished stream can go now.
        decodeQueuedMessages(context: context)
        closeIfIdle(context: context)
    }

    /// Writes the output of the head call, and of every finished call after it.
    private func flushReady(context: ChannelHandlerContext) {
        var wrote = false
        while !slots.isEmpty {
            let head = slots.startIndex
            if !slots[head].output.isEmpty {
                for bytes in slots[head].output {
                    context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
                }
                slots[head].output.removeAll(keepingCapacity: true)
                slots[head].outputBytes = 0
                wrote = true
            }
            guard slots[head].done else { break }
            slots.removeFirst()
        }
        if wrote {
            if inReadBatch { flushPending = true } else { context.flush() }
        }
        if !inReadBatch { runAfterFlush() }
    }

    /// Ends the stream of slot `id` when its reader has fallen more than `maxSendBuffer` bytes behind.
    private func enforceSendBuffer(slot id: UInt64, context: ChannelHandlerContext) {
        let held = slots.reduce(0) { $0 + $1.outputBytes }
        // Below its high water mark the channel is writable: with nothing held the limit is not reached, and the
        // option look-up (once per subscriber per stream message, a Browse event to 1000 streams) is skipped.
        if writableUnderLimit, held == 0, context.channel.isWritable { return }
        let queued = (try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
        guard queued + held > limits.maxSendBuffer, let index = index(of: id) else { return }
        var metadata: Logger.Metadata = [
            "connection": "\(connectionID)", "peer": "\(peer)", "bytes": "\(queued + held)",
            "method": "\(slots[index].call?.method ?? "")",
        ]
        guard let error = slots[index].readerTooSlow else {
            logger.notice("reader too slow for its stream, dropping connection", metadata: metadata)
            closing = true
            cancelAll()
            context.close(promise: nil)
            return
        }
        metadata["error"] = "\(error.name)"
        logger.notice("reader too slow for its stream, ending the stream", metadata: metadata)
        slots[index].task?.cancel()
        slots[index].task = nil
        let reply = VarlinkReply.encode(error: error)
        slots[index].output.append(reply)
        slots[index].outputBytes += reply.count
        markDone(index)
        openStreams -= 1
        flushReady(context: context)
        // Calls held behind the stream can start now.
        decodeQueuedMessages(context: context)
        closeIfIdle(context: context)
    }

    private func fail(with error: VarlinkError, context: ChannelHandlerContext) {
        closing = true
        cancelAll()
        let bytes = VarlinkReply.encode(error: error)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes))).assumeIsolated()
            .whenComplete { _ in context.close(promise: nil) }
    }

    private func cancelAll() {
        // Refreshes elected by answered stale hits still run: the cache waits for them.
        runAfterFlush()
        for slot in slots { slot.task?.cancel() }
        slots.removeAll()
        openStreams = 0
        queuedInputBytes = 0
        if countedCalls > 0 {
            registry.releaseCalls(uid: peer.uid, count: countedCalls)
            countedCalls = 0
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            closeIfIdle(context: context)
        }
        if event is ChannelShouldQuiesceEvent {
            quiesce(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Graceful shutdown of this connection (Hummingbird's quiescing): reads no new call; one-shot calls already
    /// read run to their reply; streams (which would run forever) are cancelled, so their calls end; then, when
    /// nothing is left to answer, the connection closes. The server closes what is still open after its drain time.
    private func quiesce(context: ChannelHandlerContext) {
        guard !quiescing else { return }
        quiescing = true
        inputClosed = true
        for slot in slots where slot.more && slot.started && !slot.done { slot.task?.cancel() }
        closeIfIdle(context: context)
    }

    private func closeIfIdle(context: ChannelHandlerContext) {
        if inputClosed && slots.isEmpty && !closing {
            closing = true
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing = true
        cancelAll()
        idleTimer?.cancel()
        idleTimer = nil
        registry.remove(connectionID, uid: callsPerUID == nil ? nil : peer.uid)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["connection": "\(connectionID)", "error": "\(error)"])
        context.close(promise: nil)
    }
}
