import CAvahi
import DNSSDModel
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Thread-local marker: the `AvahiThreadedPoll` whose lock the current thread holds (or `nil`).
///
/// The poll thread runs Avahi callbacks with the lock held, and nothing else; so a callback marks its thread once and
/// the mark stays (`withLocked` on that thread then runs the body directly instead of deadlocking on the
/// non-recursive lock).
private let lockOwnerKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()

/// Owns one `AvahiThreadedPoll`: the thread that runs the Avahi client's D-Bus I/O and every Avahi callback.
///
/// Lock rule (docs/DESIGN.md): every call into Avahi happens inside `withLocked { }`, except in Avahi callbacks, which run
/// on the poll thread with the lock already held; the lock is not recursive, so `withLocked` detects both cases.
///
/// Waiting rule: the poll thread holds the lock while it dispatches, and Avahi calls made under it may wait for a
/// D-Bus round trip to avahi-daemon. Code reached from Swift tasks, whose executor may be an event loop that must
/// not block, takes the lock through ``performLocked(_:)`` or ``withLockedOffloaded(_:)``: the wait then happens
/// on `waiter`, a serial queue of this poll's own.
final class ThreadedPoll: @unchecked Sendable {
    // @unchecked Sendable: `pointer` never changes; lock/unlock/start/stop of an AvahiThreadedPoll are thread-safe
    // (Avahi's own mutex), and `phase` is a Mutex.
    let pointer: OpaquePointer
    private enum Phase { case created, running, stopped }
    private let phase = Mutex(Phase.created)
    /// Where waits for the lock go when they come from async code (one thread: the lock serialises them anyway).
    private let waiter = DispatchQueue(label: "discoverd.avahi.waiter")

    /// Creates the poll; its thread starts with ``start()``, not here.
    /// - Throws: `DNSSDError.avahiFailure` if Avahi cannot create it.
    init() throws(DNSSDError) {
        guard let pointer = avahi_threaded_poll_new() else {
            throw DNSSDError(.avahiFailure, "avahi_threaded_poll_new failed")
        }
        self.pointer = pointer
    }

    /// Starts the poll thread, once: returns true when this call started it, false when it runs or ran already.
    /// - Throws: `DNSSDError.avahiFailure` if Avahi cannot start the thread.
    func start() throws(DNSSDError) -> Bool {
        let first = self.phase.withLock { phase in
            guard phase == .created else { return false }
            phase = .running
            return true
        }
        guard first else { return false }
        let rc = avahi_threaded_poll_start(self.pointer)
        guard rc >= 0 else {
            self.phase.withLock { $0 = .stopped }
            throw DNSSDError(.avahiFailure, "avahi_threaded_poll_start failed (\(rc))")
        }
        return true
    }

    /// The `AvahiPoll` vtable to hand to `avahi_client_new`.
    var api: UnsafePointer<AvahiPoll> {
        avahi_threaded_poll_get(self.pointer)
    }

    /// True when the calling thread holds this poll's lock (inside `withLocked` or an Avahi callback).
    var isLockedByCurrentThread: Bool {
        pthread_getspecific(lockOwnerKey) == UnsafeMutableRawPointer(self.pointer)
    }

    /// Called first thing in every Avahi callback: the poll thread holds the lock whenever it runs our code.
    func enterCallback() {
        if !self.isLockedByCurrentThread {
            pthread_setspecific(lockOwnerKey, UnsafeRawPointer(self.pointer))
        }
    }

    /// Runs `body` holding the poll lock; runs it directly if this thread already holds it.
    func withLocked<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        if self.isLockedByCurrentThread {
            return try body()
        }
        avahi_threaded_poll_lock(self.pointer)
        pthread_setspecific(lockOwnerKey, UnsafeRawPointer(self.pointer))
        defer {
            pthread_setspecific(lockOwnerKey, nil)
            avahi_threaded_poll_unlock(self.pointer)
        }
        return try body()
    }

    /// Runs `body` holding the lock: at once when this thread already holds it (an Avahi callback), otherwise later
    /// on the waiting queue. Never blocks the caller. For work that needs no result: unsubscribing, cancelling,
    /// timers.
    func performLocked(_ body: @escaping @Sendable () -> Void) {
        if self.isLockedByCurrentThread {
            body()
            return
        }
        self.waiter.async { self.withLocked(body) }
    }

    /// Runs `body` holding the lock on the waiting queue and returns its result, without blocking the caller's
    /// thread while the lock is busy.
    func withLockedOffloaded<Result: Sendable>(
        _ body: @escaping @Sendable () throws -> Result
    ) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            self.waiter.async {
                continuation.resume(with: Swift.Result { try self.withLocked(body) })
            }
        }
    }

    /// Runs `body` (which takes the lock itself, or calls methods that do) on the waiting queue.
    func offloaded<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            self.waiter.async { continuation.resume(with: Swift.Result { try body() }) }
        }
    }

    /// Stops the poll thread. Must not be called from the poll thread or with the lock held.
    func stop() {
        guard !self.isLockedByCurrentThread else { return }
        let wasRunning = self.phase.withLock { phase in
            defer { phase = .stopped }
            return phase == .running
        }
        if wasRunning { avahi_threaded_poll_stop(self.pointer) }
    }

    deinit {
        if self.isLockedByCurrentThread {
            // Released from inside a callback: stopping would join our own thread. Leak rather than deadlock.
            return
        }
        self.stop()
        avahi_threaded_poll_free(self.pointer)
    }
}

/// The userdata of one Avahi object: a Swift closure recovered in the C callback with `Unmanaged.fromOpaque`.
///
/// Retain rule: the handle that creates the Avahi object passes `Unmanaged.passRetained(box)` as userdata and
/// releases it only after `avahi_*_free` returned, holding the poll lock. Callbacks run with that lock held, so a
/// callback can never see a released box; it uses `takeUnretainedValue()` and never releases.
final class CallbackBox<Event>: @unchecked Sendable {
    // @unchecked Sendable: both fields are immutable; `handler` is only invoked on the poll thread with the poll lock
    // held, so whatever it captures is only touched under that lock.
    let poll: ThreadedPoll
    let handler: (Event) -> Void

    init(poll: ThreadedPoll, handler: @escaping (Event) -> Void) {
        self.poll = poll
        self.handler = handler
    }

    /// Recovers the box from a callback's userdata (unretained) and marks the poll thread as lock holder.
    static func fromCallback(_ userdata: UnsafeMutableRawPointer?) -> CallbackBox<Event>? {
        guard let userdata else { return nil }
        let box = Unmanaged<CallbackBox<Event>>.fromOpaque(userdata).takeUnretainedValue()
        box.poll.enterCallback()
        return box
    }
}
