import CIOLoop
import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An event loop of discoverd's own on one thread: epoll over the descriptors it watches and an eventfd, a task
/// queue and timers. It is an `EventLoop`, so promises, `scheduleTask` and ``EventLoopTaskExecutor`` work on it as
/// on NIO's loops; what it adds is ``watch(_:interest:_:)``, readiness of any descriptor, which NIO's loops keep to
/// their own channels.
///
/// Why: a DNS stub miss over DoT is received, sent upstream, read back and answered on one thread when the stub's
/// UDP socket and the upstream's connection are watched by one loop, as in Unbound; across two threads (a UDP
/// worker handing the miss to NIO's loop) every miss paid a second thread's wake-up, 10 to 20 % of a cold miss
/// natively (BENCHMARKS.md, round 13).
///
/// - Tasks run in the order given, after the readiness handlers of the turn; a task queued from the loop itself
///   runs in the same turn's task pass only if queued before it began, otherwise in the next (as NIO's `execute`).
/// - Timers fire in deadline order (ties in scheduling order); a cancelled one fails its promise with
///   `EventLoopError.cancelled`, as NIO's do.
/// - ``shutdownGracefully(queue:_:)`` runs the tasks already queued, fails pending timers, stops the thread and
///   closes the loop's descriptors (not the watched ones: they belong to their owners). A task given to a loop
///   that has stopped is dropped with a line on standard error, as NIO's loops do.
public final class IOLoop: EventLoop, @unchecked Sendable {
    // @unchecked Sendable: `timers` and `timerSerial` are used on the loop's thread only; the task queue, the
    // handlers and the thread's identity are behind their own synchronisation.
    private let epoll: CInt
    private let wake: CInt
    private let name: String
    private let queue = Mutex<(tasks: [@Sendable () -> Void], stopping: Bool)>(([], false))
    private let threadID = Atomic<UInt>(0)
    /// What runs when a watched descriptor is ready: changed from any thread (a DoT connection moves to the loop
    /// of the stub worker that sends on it), called on the loop.
    private let handlers = Mutex<[CInt: @Sendable (Readiness) -> Void]>([:])
    private var timers: [Timer] = []
    private var timerSerial: UInt64 = 0
    private let finished = Mutex<[(DispatchQueue, @Sendable ((any Error)?) -> Void)]?>([])

    private struct Timer {
        var deadline: NIODeadline
        var serial: UInt64
        var fire: () -> Void
        var cancelled: () -> Void
    }

    /// The loop whose thread calls this, if any.
    public static var current: IOLoop? {
        guard let raw = pthread_getspecific(currentKey) else { return nil }
        return Unmanaged<IOLoop>.fromOpaque(raw).takeUnretainedValue()
    }

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Starts the loop's thread.
    /// - Throws: `IOError` when epoll, the eventfd or the thread cannot be made.
    public init(name: String) throws {
        var wake: CInt = -1
        let epoll = cioloop_new(&wake)
        guard epoll >= 0 else { throw IOError(errnoCode: -epoll, reason: "epoll_create1") }
        self.epoll = epoll
        self.wake = wake
        self.name = name
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { argument in
            let loop = Unmanaged<IOLoop>.fromOpaque(argument!).takeRetainedValue()
            loop.run()
            return nil
        }, box.toOpaque())
        guard result == 0 else {
            box.release()
            Glibc.close(wake)
            Glibc.close(epoll)
            throw IOError(errnoCode: result, reason: "pthread_create")
        }
        pthread_detach(thread)
        threadID.store(UInt(thread), ordering: .releasing)
    }

    public var inEventLoop: Bool {
        UInt(pthread_self()) == threadID.load(ordering: .acquiring)
    }

    public func execute(_ task: @escaping @Sendable () -> Void) {
        let (first, refused) = queue.withLock { queue -> (Bool, Bool) in
            if queue.stopping, finished.withLock({ $0 == nil }) { return (false, true) }
            queue.tasks.append(task)
            return (queue.tasks.count == 1, false)
        }
        if refused {
            // As NIO's loops do: the thread is gone, the task is dropped and said so.
            let line = "IOLoop \(name): a task after shutdown was dropped\n"
            _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
            return
        }
        // The loop drains the whole queue each turn: only the first task of a batch needs to wake it, and the
        // loop itself never waits while it runs.
        if first, !inEventLoop { cioloop_wake(wake) }
    }

    public func scheduleTask<T>(deadline: NIODeadline, _ task: @escaping @Sendable () throws -> T) -> Scheduled<T> {
        let promise: EventLoopPromise<T> = makePromise()
        let serial = Mutex<UInt64?>(nil)
        let add: @Sendable () -> Void = { [self] in
            timerSerial += 1
            let number = timerSerial
            serial.withLock { $0 = number }
            insert(
                Timer(
                    deadline: deadline, serial: number,
                    fire: { promise.completeWith(Result { try task() }) },
                    cancelled: { promise.fail(EventLoopError.cancelled) }))
        }
        if inEventLoop { add() } else { execute(add) }
        return Scheduled(promise: promise) { [self] in
            let cancel: @Sendable () -> Void = { [self] in
                guard let number = serial.withLock({ $0 }),
                    let index = timers.firstIndex(where: { $0.serial == number })
                else { return }
                let timer = timers.remove(at: index)
                timer.cancelled()
            }
            if inEventLoop { cancel() } else { execute(cancel) }
        }
    }

    public func scheduleTask<T>(in delay: TimeAmount, _ task: @escaping @Sendable () throws -> T) -> Scheduled<T> {
        scheduleTask(deadline: .now() + delay, task)
    }

    /// On the loop: runs `work` after `delay`, without a promise or a way to cancel it (``scheduleTask(in:_:)``
    /// makes both, half a dozen allocations): for work a loop's handler leaves for later, such as the refreshes
    /// after a stale answer. Dropped, like a pending timer, when the loop stops first.
    public func after(_ delay: TimeAmount, _ work: @escaping () -> Void) {
        precondition(inEventLoop, "IOLoop.after is for the loop's own thread")
        timerSerial += 1
        insert(Timer(deadline: .now() + delay, serial: timerSerial, fire: work, cancelled: {}))
    }

    public func shutdownGracefully(queue callbackQueue: DispatchQueue, _ callback: @escaping @Sendable ((any Error)?) -> Void) {
        let already = finished.withLock { waiting -> Bool in
            guard waiting != nil else { return true }
            waiting!.append((callbackQueue, callback))
            return false
        }
        if already {
            callbackQueue.async { callback(nil) }
            return
        }
        let first = queue.withLock { queue -> Bool in
            defer { queue.stopping = true }
            return !queue.stopping
        }
        if first { cioloop_wake(wake) }
    }

    // MARK: Descriptors (from any thread; the handlers run on the loop)

    /// What a watched descriptor is ready for.
    public struct Readiness: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        public static let read = Readiness(rawValue: Int32(CIOLOOP_READ))
        public static let write = Readiness(rawValue: Int32(CIOLOOP_WRITE))
        /// An error or the peer's hang-up; reported with `read`, so that a read finds it.
        public static let hangup = Readiness(rawValue: Int32(CIOLOOP_HANGUP))
        /// With `read`, in ``watch(_:interest:_:)`` only: of the loops watching one descriptor so, one that waits is
        /// woken, the first to have watched it (EPOLLEXCLUSIVE); the others only when it is busy.
        public static let exclusive = Readiness(rawValue: Int32(CIOLOOP_EXCLUSIVE))
        /// Alone, once, when the loop stops with the descriptor still watched: its owner may move it elsewhere.
        public static let loopStopping = Readiness(rawValue: 1 << 8)
    }

    /// Watches `fd` (level-triggered) for `interest`: `handler` runs on the loop whenever it is ready for it.
    /// - Throws: `IOError` from `epoll_ctl`.
    public func watch(_ fd: CInt, interest: Readiness, _ handler: @escaping @Sendable (Readiness) -> Void) throws {
        // The handler first: an event that comes before epoll_ctl returns finds it.
        handlers.withLock { $0[fd] = handler }
        let result = cioloop_watch(epoll, fd, interest.rawValue, 1)
        guard result == 0 else {
            handlers.withLock { _ = $0.removeValue(forKey: fd) }
            throw IOError(errnoCode: -result, reason: "epoll_ctl")
        }
    }

    /// Changes what a watched descriptor is watched for.
    public func change(_ fd: CInt, interest: Readiness) {
        // Never on a loop that stopped: its epoll descriptor is closed, and its number may be another's now.
        handlers.withLock { handlers in
            if handlers[fd] != nil { _ = cioloop_watch(epoll, fd, interest.rawValue, 0) }
        }
    }

    /// Whether ``shutdownGracefully(queue:_:)`` was called: the loop is stopping or stopped.
    public var isStopping: Bool { queue.withLock { $0.stopping } }

    /// Stops watching `fd` (before its owner closes it).
    /// An event already taken from epoll for it in this turn is dropped.
    public func unwatch(_ fd: CInt) {
        handlers.withLock { handlers in
            if handlers.removeValue(forKey: fd) != nil { _ = cioloop_unwatch(epoll, fd) }
        }
    }

    // MARK: The thread

    private func insert(_ timer: Timer) {
        // Nearly always the latest: a scan from the end.
        var index = timers.endIndex
        while index > 0, timers[index - 1].deadline > timer.deadline { index -= 1 }
        timers.insert(timer, at: index)
    }

    private func run() {
        pthread_setspecific(Self.currentKey, Unmanaged.passUnretained(self).toOpaque())
        cioloop_set_thread_name(name)
        var fds = [CInt](repeating: 0, count: 64)
        var events = [CInt](repeating: 0, count: 64)
        var tasks: [@Sendable () -> Void] = []
        while true {
            let timeout = waitMilliseconds()
            let ready = cioloop_wait(epoll, &fds, &events, CInt(fds.count), timeout)
            for index in 0..<Int(max(ready, 0)) {
                let fd = fds[index]
                if fd == wake {
                    cioloop_drain(wake)
                } else if let handler = handlers.withLock({ $0[fd] }) {
                    handler(Readiness(rawValue: events[index]))
                }
            }
            let stopping = queue.withLock { queue -> Bool in
                swap(&tasks, &queue.tasks)
                return queue.stopping
            }
            for task in tasks { task() }
            tasks.removeAll(keepingCapacity: true)
            fireTimers()
            if stopping, queue.withLock({ $0.tasks.isEmpty }) { break }
        }
        // Descriptors still watched hear that this loop stops (a DoT connection moves to its home loop).
        for (_, handler) in handlers.withLock({ $0 }) { handler(.loopStopping) }
        let pending = timers
        timers = []
        for timer in pending { timer.cancelled() }
        pthread_setspecific(Self.currentKey, nil)
        // Under the handlers' lock: a watch change from another thread never reaches a closed epoll descriptor.
        handlers.withLock { handlers in
            handlers = [:]
            Glibc.close(wake)
            Glibc.close(epoll)
        }
        let callbacks = finished.withLock { waiting -> [(DispatchQueue, @Sendable ((any Error)?) -> Void)] in
            defer { waiting = nil }
            return waiting ?? []
        }
        for (callbackQueue, callback) in callbacks { callbackQueue.async { callback(nil) } }
    }

    /// How long the next wait may be: until the first timer, or forever.
    private func waitMilliseconds() -> CInt {
        if queue.withLock({ !$0.tasks.isEmpty || $0.stopping }) { return 0 }
        guard let first = timers.first else { return -1 }
        let now = NIODeadline.now()
        guard first.deadline > now else { return 0 }
        let nanoseconds = first.deadline.uptimeNanoseconds - now.uptimeNanoseconds
        // Rounded up: a timer never fires early.
        return CInt(min((nanoseconds + 999_999) / 1_000_000, 3_600_000))
    }

    private func fireTimers() {
        guard !timers.isEmpty else { return }
        let now = NIODeadline.now()
        var due = 0
        while due < timers.count, timers[due].deadline <= now { due += 1 }
        guard due > 0 else { return }
        let fired = timers[0..<due]
        timers.removeFirst(due)
        for timer in fired { timer.fire() }
    }
}
