import NIOCore

/// Where the intermediate replies of one streaming call go: its connection's handler and the call's slot.
struct StreamSlot: Sendable {
    let outbox: NIOLoopBound<VarlinkConnectionHandler>
    let slot: UInt64

    var eventLoop: any EventLoop { outbox.eventLoop }

    /// Queues `buffer` (one message with `continues: true`) on the call. On the connection's event loop.
    func deliver(_ buffer: ByteBuffer) {
        outbox.value.deliver(slot: slot, buffer: buffer)
    }
}

/// The streaming calls that get the same messages, grouped by the event loop of their connection, so that one
/// message costs one job per event loop (each writing and flushing it on every call of that loop) instead of a
/// task wake-up and a job per call.
///
/// Per-call order holds because one sender queues every message, in order, through ``send(_:)``, and an event
/// loop runs its jobs in the order they were queued. Not thread-safe: the owner keeps it behind its lock.
struct StreamFanout {
    /// The calls of one event loop.
    struct Batch {
        let eventLoop: any EventLoop
        fileprivate(set) var targets: [UInt64: StreamSlot] = [:]
    }

    private var batches: [ObjectIdentifier: Batch] = [:]
    /// Subscribed calls, over all event loops.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }
    /// One batch per event loop that has calls.
    var loopBatches: [Batch] { Array(batches.values) }
    /// Every subscribed id.
    var ids: [UInt64] { batches.values.flatMap { $0.targets.keys } }

    /// Adds a call under `id` (unique for the owner's lifetime).
    mutating func add(_ id: UInt64, _ target: StreamSlot) {
        let loop = ObjectIdentifier(target.eventLoop)
        if batches[loop] == nil { batches[loop] = Batch(eventLoop: target.eventLoop) }
        if batches[loop]!.targets.updateValue(target, forKey: id) == nil { count += 1 }
    }

    /// Removes the call `id`, which was added with `target`; returns whether it was there.
    @discardableResult
    mutating func remove(_ id: UInt64, _ target: StreamSlot) -> Bool {
        let loop = ObjectIdentifier(target.eventLoop)
        guard batches[loop]?.targets.removeValue(forKey: id) != nil else { return false }
        count -= 1
        if batches[loop]!.targets.isEmpty { batches[loop] = nil }
        return true
    }

    /// Queues one job per event loop that delivers `bytes` to every call on that loop. Returns at once.
    func send(_ bytes: [UInt8]) {
        for batch in batches.values {
            // One buffer per event loop, shared by its connections (each write keeps its own reader index); not
            // one for all loops, whose threads would contend for its reference count.
            let buffer = ByteBufferAllocator().buffer(bytes: bytes)
            let targets = batch.targets
            batch.eventLoop.execute {
                for target in targets.values { target.deliver(buffer) }
            }
        }
    }

    /// Queues a job on `target`'s event loop that delivers `messages` to it, in order (a late subscriber's
    /// catch-up). Queued before any later ``send(_:)``, so it reaches the call before them.
    static func send(_ messages: [[UInt8]], to target: StreamSlot) {
        guard !messages.isEmpty else { return }
        let buffers = messages.map { ByteBufferAllocator().buffer(bytes: $0) }
        target.eventLoop.execute {
            for buffer in buffers { target.deliver(buffer) }
        }
    }
}
