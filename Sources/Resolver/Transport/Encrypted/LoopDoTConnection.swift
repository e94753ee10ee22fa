import CTLSShim
import DNSCore
import Logging
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// DNS over TLS to one upstream on discoverd's own loops (``IOLoop``), outside NIO: the kept connections, their
/// life and the queries on them, with the same behaviour as ``TLSConnectionPool`` (which DoH uses, on NIO) and one
/// difference in where the work runs.
///
/// A stub miss is received by a UDP worker's loop, which writes the query itself (``startsAnywhere``), and the
/// connection's socket is watched by the loop of the worker that last sent on it while no other query waited
/// (its owner). A miss at a time is then received, sent, read back and answered on one thread, as in Unbound,
/// and the upstream still has one connection (RFC 7766 §6.2.1). Across two threads, a hand-off to NIO's loop and
/// the reply read there, a cold miss took 10 to 20 % longer natively (BENCHMARKS.md, round 13). Under load the
/// owner stays: the socket moves only while no query waits on it.
///
/// Everything about the connections is behind one lock, since several workers send on them and the owner reads
/// them; tries end (``TryCompletion``) only after the lock is let go, because what a try's end runs (the stub's
/// answer, the next hop of a walk) may start another query. Timers (each try's deadline, the handshake's, the
/// idle close) run on `home`, a loop of the process's own that also serves queries from tasks and the API.
///
/// - Connections open on demand, and another one only when every open one has ``TLSPoolPolicy/busyThreshold``
///   queries waiting (at most ``TLSPoolPolicy/maximumConnections``); the query goes to the least busy ready one.
/// - Connect and handshake are non-blocking, bounded by the try's timeout; a failure starts the back-off
///   (``ReconnectBackoff``), during which tries fail at once with the same reason (stale answers are served).
/// - The certificate is verified as ``TLSClientContext`` says; a failure is ``ExchangeOutcome/insecure(_:)``.
/// - Queries carry an empty edns-tcp-keepalive option and are padded to a multiple of 128 bytes (RFC 7828, 7830,
///   8467); an ID waiting on the connection is never reused; replies are matched in any order.
/// - The queries a worker sends during one receive batch leave with one `write` after the batch, each in a TLS
///   record of its own (``flush(_:_:)`` says why); a query sent while no other waits leaves at once.
/// - Idle close after `idleTimeout` (further connections after ``TLSPoolPolicy/surplusIdleTimeout``), sooner at
///   90 % of the server's keepalive; our close sends close_notify. The server's close ends the tries on the
///   connection with ``EncryptedConnections/closedByServer`` (sent again, RFC 7766 §6.2.3); without a
///   close_notify, or a reset, Status records it as an unclean shutdown or the socket's error.
final class LoopDoTConnection: EncryptedConnection, @unchecked Sendable {
    // @unchecked Sendable: every `var` here and in `Link` is read and written under `lock`.
    let home: IOLoop
    var loop: any EventLoop { home }
    let taskExecutor: EventLoopTaskExecutor
    let server: UpstreamServer
    let address: SocketAddress
    let statistics: UpstreamStatistics
    var startsAnywhere: Bool { true }
    private let tls: TLSClientContext
    private let idleTimeout: TimeAmount
    private let policy: TLSPoolPolicy
    private let logger: Logger
    private let lock = NIOLock()

    /// Open and opening connections, oldest first.
    private var links: [Link] = []
    private var backoff = ReconnectBackoff()
    /// Why the last connect failed before there was a connection (``connectionFailed(_:)``).
    private var immediateFailure: ExchangeOutcome?
    private var serial = 0
    /// Every try's deadline, and the timer on `home` for the earliest.
    private var deadlines = DeadlineQueue()
    private var deadlineTimer: Scheduled<Void>?
    /// Plaintext and ciphertext scratch for reads.
    private var cipherBuffer = [UInt8](repeating: 0, count: 16_384)
    private var plainBuffer = [UInt8](repeating: 0, count: 16_384)

    private enum Phase { case connecting, handshaking, ready, closed }

    /// One TLS connection and the tries on it. @unchecked Sendable: used under the connection's lock only.
    private final class Link: TryHolder, @unchecked Sendable {
        let fd: CInt
        var tls: OpaquePointer?
        var phase = Phase.connecting
        var owner: IOLoop
        var interest: IOLoop.Readiness
        /// Tries waiting for the connection to be ready.
        var queued: [Waiting] = []
        /// Every try on this connection not yet ended, by a serial number.
        var tries: [Int: TryCompletion] = [:]
        /// The tries whose query was written, by message ID (a struct: a tuple is copied through the runtime).
        var pending: [UInt16: Waiting] = [:]
        /// Replies cut from the plaintext.
        var splitter = DoTFrameSplitter()
        /// Plaintext written since the last flush, and whether a flush is scheduled.
        var staged: [UInt8] = []
        var flushScheduled = false
        /// Ciphertext the socket did not take yet.
        var unsent: [UInt8] = []
        var setupTimer: Scheduled<Void>?
        /// The try's timeout that opened it: bounds the connect, then the handshake.
        let setupTimeout: TimeAmount
        var idleClose: Scheduled<Void>?
        var idleSince = NIODeadline.now()
        var serverKeepalive: TimeAmount?
        /// When the server last sent anything on it, and the timeout of the latest try: a try that times out with
        /// nothing heard for that long finds the connection dead (``stoppedAnswering(_:_:)``).
        var lastHeard = NIODeadline.now()
        var tryTimeout = TimeAmount.zero

        /// ``TryHolder``: the deadline queue asks under the connection's lock; a due try is ended by the
        /// connection after the lock is let go, not here.
        func waits(_ number: Int) -> Bool { tries[number] != nil }
        func timedOut(_ number: Int) {}

        init(fd: CInt, tls: OpaquePointer, owner: IOLoop, setupTimeout: TimeAmount) {
            self.fd = fd
            self.tls = tls
            self.owner = owner
            self.setupTimeout = setupTimeout
            interest = .write
        }
    }

    /// Tries to end once the lock is let go, with their outcomes.
    private struct Endings {
        /// A struct, not a tuple: an array of tuples is copied and destroyed through the runtime's generic tuple
        /// witnesses, about 2 000 instructions per miss (callgrind, BENCHMARKS.md round 15).
        private struct Ending {
            let completion: TryCompletion
            let outcome: ExchangeOutcome
        }
        private var list: [Ending] = []
        /// The replies these tries got, freed with the endings after they ran (a stub's answer leaves first).
        var frames: [Frame] = []
        mutating func add(_ completion: TryCompletion, _ outcome: ExchangeOutcome) {
            list.append(Ending(completion: completion, outcome: outcome))
        }
        /// Ends the tries in order. Each ending is moved out of the list, not copied: a copy of an outcome took a
        /// reference count of each array of its parsed reply.
        mutating func run() {
            guard !list.isEmpty else { return }
            var taken: [Ending] = []
            swap(&taken, &list)
            taken.reverse()
            while let ending = taken.popLast() { ending.completion.succeed(ending.outcome) }
        }
    }

    /// A query written on a connection and the try that waits for its reply.
    private struct Waiting {
        let query: PendingQuery
        let completion: TryCompletion
    }

    /// A whole reply cut from the plaintext, with the try that waits for it.
    private struct Frame {
        let waiting: Waiting
        let bytes: [UInt8]
        /// Its try took it as the answer: its EDNS keepalive counts (``noteKeepalive(_:_:)``).
        var accepted = false
    }

    init(
        server: UpstreamServer, address: SocketAddress, tls: TLSClientContext, statistics: UpstreamStatistics,
        idleTimeout: Duration, policy: TLSPoolPolicy, home: IOLoop, logger: Logger
    ) {
        self.server = server
        self.address = address
        self.tls = tls
        self.statistics = statistics
        self.idleTimeout = TimeAmount(idleTimeout)
        self.policy = policy
        self.home = home
        self.taskExecutor = EventLoopTaskExecutor(loop: home)
        var logger = logger
        logger[metadataKey: "dns.server"] = "\(server)"
        self.logger = logger
    }

    deinit {
        // Dropped without shutdown(): the sockets must not stay open and watched.
        for link in links where link.phase != .closed {
            link.owner.unwatch(link.fd)
            Glibc.close(link.fd)
            if let connection = link.tls { ctls_connection_free(connection) }
            link.tls = nil
            link.phase = .closed
            link.setupTimer?.cancel()
            link.idleClose?.cancel()
        }
        deadlineTimer?.cancel()
    }

    /// Closes every connection (on reload, when the upstream is gone); waiting tries fail.
    func shutdown() {
        var endings = Endings()
        lock.withLock {
            for link in links { closeCleanly(link, &endings) }
        }
        endings.run()
    }

    // MARK: Tries

    func start(_ query: PendingQuery, timeout: TimeAmount, completion: TryCompletion) {
        guard let padded = query.padded(keepalive: true) else {
            completion.succeed(.failed("the query cannot carry EDNS padding"))
            return
        }
        var endings = Endings()
        let placed = lock.withLock { () -> (Link, Int)? in
            guard let link = pick(timeout: timeout, completion: completion, &endings) else { return nil }
            serial &+= 1
            link.tries[serial] = completion
            link.tryTimeout = timeout
            addDeadline(.now() + timeout, link: link, number: serial)
            if link.phase == .ready {
                send(padded, completion: completion, on: link, &endings)
            } else {
                link.queued.append(Waiting(query: padded, completion: completion))
            }
            return (link, serial)
        }
        if let (link, number) = placed {
            // After the lock: a try that ended meanwhile runs this at once, and it takes the lock.
            completion.onEnd { [self] completion in tryEnded(link, number: number, completion) }
        }
        endings.run()
    }

    private func tryEnded(_ link: Link, number: Int, _ completion: TryCompletion) {
        lock.withLock {
            link.tries[number] = nil
            let id = UInt16(truncatingIfNeeded: completion.tag)
            if link.pending[id]?.completion === completion { link.pending[id] = nil }
            if link.tries.isEmpty {
                link.idleSince = .now()
                armIdleClose(link)
            }
        }
    }

    /// The connection for the next try, opening one when there is none (or all are busy); nil when the try
    /// already ended (a back-off refused it, or the connect failed at once).
    private func pick(timeout: TimeAmount, completion: TryCompletion, _ endings: inout Endings) -> Link? {
        let (best, another) = policy.choose(
            links, isReady: { $0.phase == .ready }, inFlight: { $0.tries.count },
            backingOff: { backoff.refusal() != nil })
        if let best {
            if another {
                logger.debug(
                    "opening another connection under load",
                    metadata: ["dns.in-flight": "\(best.tries.count)", "dns.connections": "\(links.count + 1)"])
                _ = connect(timeout: timeout, &endings)
            }
            return best
        }
        if let opening = links.first { return opening }
        if let refusal = backoff.refusal() {
            endings.add(completion, refusal)
            return nil
        }
        guard let link = connect(timeout: timeout, &endings) else {
            endings.add(completion, immediateFailure ?? .failed("connect failed"))
            return nil
        }
        return link
    }

    /// Writes one query (a new ID when its own waits on the connection already). The lone query on a
    /// connection leaves at once, from a socket that moves to the sender's loop; others wait for the end of the
    /// sender's batch.
    private func send(_ query: PendingQuery, completion: TryCompletion, on link: Link, _ endings: inout Endings) {
        let alone = link.pending.isEmpty
        var query = query
        while link.pending[query.id] != nil { query = query.withID(QueryID.random()) }
        link.pending[query.id] = Waiting(query: query, completion: completion)
        completion.tag = Int(query.id)
        let wire = query.wire
        link.staged.append(UInt8(truncatingIfNeeded: wire.count >> 8))
        link.staged.append(UInt8(truncatingIfNeeded: wire.count))
        link.staged.append(contentsOf: wire)
        if alone {
            move(link, to: IOLoop.current ?? link.owner)
            flush(link, &endings)
            return
        }
        // A stub worker's loop that stopped (its listener went away on a reload) watches nothing any more.
        if link.owner.isStopping { move(link, to: home) }
        if !link.flushScheduled {
            link.flushScheduled = true
            // After the tasks and readiness handlers of this turn of the sender's loop: the rest of its batch.
            (IOLoop.current ?? home).execute { [self] in
                var endings = Endings()
                lock.withLock {
                    link.flushScheduled = false
                    flush(link, &endings)
                }
                endings.run()
            }
        }
    }

    /// Hands the socket's watch to `loop` (the sender's, while nothing else waits on the connection).
    private func move(_ link: Link, to target: IOLoop) {
        let loop = target.isStopping ? home : target
        guard link.owner !== loop, link.phase != .closed else { return }
        let old = link.owner
        do {
            old.unwatch(link.fd)
            try watch(link, on: loop)
            link.owner = loop
        } catch {
            // Stay where it was.
            try? watch(link, on: old)
        }
    }

    private func watch(_ link: Link, on loop: IOLoop) throws {
        try loop.watch(link.fd, interest: link.interest) { [weak self, link] readiness in
            self?.ready(link, readiness)
        }
    }

    private func setInterest(_ link: Link, _ interest: IOLoop.Readiness) {
        guard link.interest != interest, link.phase != .closed else { return }
        link.interest = interest
        link.owner.change(link.fd, interest: interest)
    }

    // MARK: Deadlines

    private func addDeadline(_ at: NIODeadline, link: Link, number: Int) {
        guard let armAt = deadlines.add(at, holder: link, number: number) else { return }
        armDeadlines(armAt)
    }

    private func armDeadlines(_ at: NIODeadline) {
        deadlineTimer?.cancel()
        deadlineTimer = home.scheduleTask(deadline: at) { [self] in
            var endings = Endings()
            lock.withLock {
                deadlineTimer = nil
                let now = NIODeadline.now()
                let (due, next) = deadlines.fire(now: now)
                var silent: [Link] = []
                for (holder, number) in due {
                    guard let link = holder as? Link, let completion = link.tries[number] else { continue }
                    endings.add(completion, .timedOut)
                    if link.phase == .ready, !silent.contains(where: { $0 === link }),
                        EncryptedConnections.silent(since: link.lastHeard, timeout: link.tryTimeout, now: now)
                    {
                        silent.append(link)
                    }
                }
                for link in silent { stoppedAnswering(link, &endings) }
                if let next { armDeadlines(next) }
            }
            endings.run()
        }
    }

    // MARK: Connecting

    /// Opens a connection (non-blocking connect, then the handshake): nil when the socket cannot even be made or
    /// the connect fails at once (the back-off then holds the reason).
    private func connect(timeout: TimeAmount, _ endings: inout Endings) -> Link? {
        statistics.connectionOpened()
        /// The connect could not even start: what was made is let go, and the back-off holds `outcome`.
        func abandon(_ outcome: ExchangeOutcome, fd: CInt? = nil, connection: OpaquePointer? = nil) -> Link? {
            if let connection { ctls_connection_free(connection) }
            if let fd { Glibc.close(fd) }
            statistics.connectionClosed()
            connectionFailed(outcome)
            return nil
        }
        let family: CInt
        switch address {
        case .v4: family = AF_INET
        case .v6: family = AF_INET6
        case .unixDomainSocket:
            return abandon(.failed("connect: not an IP address"))
        }
        let fd = Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return abandon(.failed("connect: \(Self.errorText(errno))")) }
        var one: CInt = 1
        _ = setsockopt(fd, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
        let connection: OpaquePointer
        do {
            connection = try tls.connection(remote: address)
        } catch {
            return abandon(tls.outcome(for: error), fd: fd)
        }
        let result = address.withSockAddr { pointer, length in Glibc.connect(fd, pointer, socklen_t(length)) }
        let code = errno
        if result != 0, code != EINPROGRESS {
            return abandon(.failed("connect: \(Self.errorText(code))"), fd: fd, connection: connection)
        }
        let link = Link(fd: fd, tls: connection, owner: IOLoop.current ?? home, setupTimeout: timeout)
        do {
            try watch(link, on: link.owner)
        } catch {
            return abandon(.failed("connect", error), fd: fd, connection: connection)
        }
        links.append(link)
        armSetupTimer(link)
        if result == 0 {
            connected(link, &endings)
            // Refused at once (a local port without a listener): the tries get the reason, not a closed link.
            if link.phase == .closed { return nil }
        }
        return link
    }

    /// Bounds the connect, then (armed again when it is done) the handshake, each by the try's timeout: a server
    /// that accepts but never finishes the handshake (its accept queue full, a middlebox eating the ClientHello)
    /// must not hold a connection that counts as open and never idles out.
    private func armSetupTimer(_ link: Link) {
        link.setupTimer?.cancel()
        let timeout = link.setupTimeout
        link.setupTimer = home.scheduleTask(in: timeout) { [weak self, weak link] in
            guard let self, let link else { return }
            var endings = Endings()
            self.lock.withLock {
                guard link.phase == .connecting || link.phase == .handshaking else { return }
                let reason =
                    link.phase == .connecting
                    ? "connect: timed out after \(timeout.nanoseconds / 1_000_000) ms"
                    : "TLS handshake not finished after \(timeout.nanoseconds / 1_000_000) ms"
                self.connectFailed(link, .failed(reason), &endings)
            }
            endings.run()
        }
    }

    /// A connect or handshake failed: the back-off starts, and the log and the statistics say why.
    private func connectionFailed(_ outcome: ExchangeOutcome) {
        immediateFailure = outcome
        let delay = backoff.failed(outcome)
        logger.info(
            "encrypted upstream not reachable",
            metadata: ["reason": "\(outcome.reason)", "dns.retry-ms": "\(delay.nanoseconds / 1_000_000)"])
        statistics.connectionFailed(outcome.reason)
    }

    private func connected(_ link: Link, _ endings: inout Endings) {
        var error: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        _ = getsockopt(link.fd, SOL_SOCKET, SO_ERROR, &error, &length)
        guard error == 0 else {
            connectFailed(link, .failed("connect: \(Self.errorText(error))"), &endings)
            return
        }
        link.phase = .handshaking
        armSetupTimer(link)
        setInterest(link, .read)
        advanceHandshake(link, &endings)
    }

    private func advanceHandshake(_ link: Link, _ endings: inout Endings) {
        guard let connection = link.tls else { return }
        let result = ctls_handshake(connection)
        if result < 0 {
            let error = TLSClientHandler.failure(connection, verification: true)
            writeCiphertext(link, &endings)
            connectFailed(link, tls.outcome(for: error), &endings)
            return
        }
        writeCiphertext(link, &endings)
        guard result == 1, link.phase == .handshaking else { return }
        handshakeCompleted(link, connection, &endings)
    }

    private func handshakeCompleted(_ link: Link, _ connection: OpaquePointer, _ endings: inout Endings) {
        link.phase = .ready
        link.setupTimer?.cancel()
        link.setupTimer = nil
        backoff.succeeded()
        statistics.handshake(
            version: ctls_version(connection).map { String(cString: $0) }, server: server, pinned: tls.pinned,
            keyPin: TLSClientHandler.peerPin(connection), resumed: ctls_session_reused(connection) != 0)
        let waiting = link.queued
        link.queued = []
        for queued in waiting where !queued.completion.isEnded {
            send(queued.query, completion: queued.completion, on: link, &endings)
        }
        // Application data (or a session ticket) may have come with the last handshake flight.
        readPlaintext(link, &endings)
        if link.tries.isEmpty { armIdleClose(link) }
    }

    /// A connect or a handshake failed: every try on the connection fails with `outcome`, a back-off starts, and
    /// the connection closes.
    private func connectFailed(_ link: Link, _ outcome: ExchangeOutcome, _ endings: inout Endings) {
        connectionFailed(outcome)
        fail(link, outcome, &endings)
        close(link, &endings)
    }

    // MARK: Reading and writing

    /// The owner's loop found the socket ready.
    private func ready(_ link: Link, _ readiness: IOLoop.Readiness) {
        var endings = Endings()
        lock.withLock {
            guard link.phase != .closed else { return }
            if readiness.contains(.loopStopping) {
                // A stub worker's loop stops (its listener went away on a reload): the home loop reads from now on.
                if link.owner.inEventLoop { move(link, to: home) }
                return
            }
            if link.phase == .connecting {
                // Writable, or an error (a refused connect reports EPOLLERR, maybe without EPOLLOUT): the
                // connect is over either way, and SO_ERROR says how.
                connected(link, &endings)
            } else if readiness.contains(.write) {
                writeOut(link, &endings)
            }
            if readiness.contains(.read), link.phase == .handshaking || link.phase == .ready {
                readIn(link, &endings)
            }
        }
        endings.run()
        if !endings.frames.isEmpty { noteKeepalive(link, endings.frames) }
    }

    /// RFC 7828 §3.3.2: the server's timeout, in units of 100 ms, bounds how long the connection stays idle. Read
    /// after the answers went out: scanning a reply's options once more is not worth a client's wait (BENCHMARKS.md,
    /// round 22). A changed timeout re-arms an idle close armed meanwhile, so that the connection is still closed
    /// before the server's timeout runs out.
    private func noteKeepalive(_ link: Link, _ frames: [Frame]) {
        var timeout: UInt16?
        for frame in frames where frame.accepted {
            if let given = EDNSPadding.keepaliveTimeout(in: frame.bytes) { timeout = given }
        }
        guard let timeout else { return }
        let keepalive = TimeAmount.milliseconds(Int64(timeout) * 100)
        lock.withLock {
            guard link.phase != .closed, link.serverKeepalive != keepalive else { return }
            link.serverKeepalive = keepalive
            if let armed = link.idleClose {
                armed.cancel()
                link.idleClose = nil
                armIdleClose(link)
            }
        }
    }

    /// Reads what the socket has (a few records at most per turn; level-triggered readiness brings the rest).
    private func readIn(_ link: Link, _ endings: inout Endings) {
        for _ in 0..<4 {
            guard let connection = link.tls, link.phase == .handshaking || link.phase == .ready else { return }
            let count = cipherBuffer.withUnsafeMutableBytes { Glibc.read(link.fd, $0.baseAddress, $0.count) }
            if count < 0 {
                let code = errno
                if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return }
                brokenConnection(link, .failed("read: \(Self.errorText(code))"), &endings)
                return
            }
            if count == 0 {
                // The server closed its side without a close_notify.
                brokenConnection(link, tls.outcome(for: TLSClientError.uncleanShutdown), &endings)
                return
            }
            link.lastHeard = .now()
            let fed = cipherBuffer.withUnsafeBufferPointer { ctls_feed(connection, $0.baseAddress, count) }
            guard fed == 0 else {
                brokenConnection(link, tls.outcome(for: TLSClientError.failed("out of memory")), &endings)
                return
            }
            if link.phase == .handshaking {
                advanceHandshake(link, &endings)
            } else {
                readPlaintext(link, &endings)
            }
            if count < cipherBuffer.count { return }
        }
    }

    /// Decrypts what was fed, cuts it into replies and ends their tries; the caller (``ready(_:_:)``) notes the
    /// server's keepalive once the endings ran.
    private func readPlaintext(_ link: Link, _ endings: inout Endings) {
        var frames: [Frame] = []
        // How the connection ended in these reads (a TLS failure, or the server's close_notify): acted on after the
        // replies read before it ended their tries, which would otherwise fail with their answer in hand and go out
        // again (a server that closes after so many queries sends its last replies with its close_notify).
        var broken: ExchangeOutcome?
        var closeNotify = false
        while link.phase == .ready, let connection = link.tls {
            // Nothing buffered: no read can give anything.
            guard ctls_readable(connection) > 0 else { break }
            let count = plainBuffer.withUnsafeMutableBufferPointer {
                ctls_read(connection, $0.baseAddress, $0.count)
            }
            if count > 0 {
                cutFrames(link, plainBuffer[0..<Int(count)], into: &frames)
                continue
            }
            if count == -1 {
                broken = tls.outcome(for: TLSClientHandler.failure(connection, verification: false))
            }
            closeNotify = count == -2
            break
        }
        // Each frame is read in place (a copy of one took four reference counts).
        for index in frames.indices {
            switch frames[index].waiting.query.classify(frames[index].bytes, overTCP: true) {
            case .accept(let message):
                frames[index].accepted = true
                endings.add(frames[index].waiting.completion, .response(message))
            case .truncated: break
            case .drop(let reason): logger.debug("dropped DoT message", metadata: ["dns.reason": "\(reason)"])
            }
        }
        if let broken {
            brokenConnection(link, broken, &endings)
        } else if closeNotify, let connection = link.tls {
            // The server's close_notify: answer it and close; the tries still on it are sent again.
            ctls_shutdown(connection)
            writeCiphertext(link, &endings)
            close(link, &endings)
        } else if link.phase == .ready {
            // Post-handshake messages (a key update) may need an answer.
            writeCiphertext(link, &endings)
        }
        // Nearly always the only read of this turn: the array is handed over, not copied.
        if endings.frames.isEmpty { endings.frames = frames } else { endings.frames += frames }
    }

    /// Matches each whole reply in `plaintext` (with what came before) to the query waiting for it.
    private func cutFrames(
        _ link: Link, _ plaintext: ArraySlice<UInt8>, into frames: inout [Frame]
    ) {
        // Each reply is copied out of the plaintext once, and only when a query waits for it.
        link.splitter.forEachFrame(in: plaintext) { frame in
            guard frame.count >= 2 else { return }
            let id = UInt16(frame[frame.startIndex]) << 8 | UInt16(frame[frame.startIndex + 1])
            guard let waiting = link.pending[id] else {
                logger.debug("dropped DoT reply for no waiting query", metadata: ["dns.id": "\(id)"])
                return
            }
            frames.append(Frame(waiting: waiting, bytes: Array(frame)))
        }
    }

    /// Encrypts what was staged, each query in a TLS record of its own (one `SSL_write` each), and sends the
    /// records together. Several queries in one record are valid TLS, but dnsdist 1.7 (Debian 12's) reads only the
    /// first and leaves the rest in OpenSSL's buffer until its read timeout closes the connection, 2 s later (in the
    /// lab a query met that four times in a row, and its client got a SERVFAIL); Unbound, systemd-resolved and kdig
    /// send a record per query too.
    private func flush(_ link: Link, _ endings: inout Endings) {
        guard link.phase == .ready, let connection = link.tls else { return }
        if !link.staged.isEmpty {
            let whole = link.staged.withUnsafeBufferPointer { staged -> Bool in
                var offset = 0
                while offset + 2 <= staged.count {
                    let length = min(2 + (Int(staged[offset]) << 8 | Int(staged[offset + 1])), staged.count - offset)
                    let written = ctls_write(connection, staged.baseAddress! + offset, length)
                    guard Int(written) == length else { return false }
                    offset += length
                }
                return true
            }
            guard whole else {
                let error = TLSClientHandler.failure(connection, verification: false)
                brokenConnection(link, tls.outcome(for: error), &endings)
                return
            }
            link.staged.removeAll(keepingCapacity: true)
        }
        writeCiphertext(link, &endings)
    }

    /// Moves what OpenSSL has for the server into `unsent` and writes it.
    private func writeCiphertext(_ link: Link, _ endings: inout Endings) {
        guard let connection = link.tls else { return }
        let count = ctls_pending(connection)
        if count > 0 {
            let start = link.unsent.count
            link.unsent.append(contentsOf: repeatElement(0, count: count))
            let taken = link.unsent.withUnsafeMutableBufferPointer {
                ctls_take(connection, $0.baseAddress! + start, count)
            }
            link.unsent.removeLast(count - taken)
        }
        writeOut(link, &endings)
    }

    /// Writes `unsent` until the socket takes no more; the rest waits for the socket to be writable.
    private func writeOut(_ link: Link, _ endings: inout Endings) {
        var offset = 0
        while offset < link.unsent.count {
            let written = link.unsent.withUnsafeBytes {
                Glibc.write(link.fd, $0.baseAddress! + offset, $0.count - offset)
            }
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { break }
                brokenConnection(link, .failed("write: \(Self.errorText(code))"), &endings)
                return
            }
            offset += written
        }
        if offset == link.unsent.count {
            link.unsent.removeAll(keepingCapacity: true)
            if link.phase == .handshaking || link.phase == .ready { setInterest(link, .read) }
        } else {
            link.unsent.removeFirst(offset)
            setInterest(link, link.phase == .connecting ? .write : [.read, .write])
        }
    }

    // MARK: Ending

    /// The established connection failed (or the server went away without close_notify), and it closes. Status
    /// records why; the tries on it end as when the server closes it (``EncryptedConnections/closedByServer``, sent
    /// again on the next connection, RFC 7766 §6.2.3): a server that stops after so many queries on a connection
    /// (dnsdist's `setMaxTCPQueriesPerConnection`) resets it with queries unread, and a query is safe to ask again.
    /// A TLS verification failure (``ExchangeOutcome/insecure(_:)``) ends them as it is.
    private func brokenConnection(_ link: Link, _ outcome: ExchangeOutcome, _ endings: inout Endings) {
        guard link.phase != .closed else { return }
        if link.phase != .ready {
            connectFailed(link, outcome, &endings)
            return
        }
        statistics.connectionFailed(outcome.reason)
        fail(link, EncryptedConnections.endingTries(outcome), &endings)
        close(link, &endings)
    }

    /// A try timed out and the server has sent nothing on its connection for as long: it hung, or the path lost
    /// the connection without a reset (a NAT's or a load balancer's state), and the kernel would go on taking
    /// queries for it until TCP gives up, many minutes later. The connection is closed as dead, as Unbound closes
    /// such a stream. Its other tries are sent again on the next connection (``EncryptedConnections/abandoned``),
    /// where a server that is only slow answers them and one that is not there fails the connect or the handshake,
    /// which starts the back-off.
    private func stoppedAnswering(_ link: Link, _ endings: inout Endings) {
        EncryptedConnections.reportStoppedAnswering(
            timeout: link.tryTimeout, waiting: link.tries.count, logger: logger, statistics: statistics)
        fail(link, .failed(EncryptedConnections.abandoned), &endings)
        closeCleanly(link, &endings)
    }

    private func fail(_ link: Link, _ outcome: ExchangeOutcome, _ endings: inout Endings) {
        for completion in link.tries.values { endings.add(completion, outcome) }
        link.queued = []
    }

    /// Our close: close_notify first (best effort), then the socket.
    private func closeCleanly(_ link: Link, _ endings: inout Endings) {
        if link.phase == .ready, let connection = link.tls {
            ctls_shutdown(connection)
            writeCiphertext(link, &endings)
        }
        close(link, &endings)
    }

    /// Closes the socket and frees the TLS state; tries still on the connection fail as when the server closes it.
    private func close(_ link: Link, _ endings: inout Endings) {
        guard link.phase != .closed else { return }
        let wasReady = link.phase == .ready
        link.phase = .closed
        link.owner.unwatch(link.fd)
        Glibc.close(link.fd)
        if let connection = link.tls {
            ctls_connection_free(connection)
            link.tls = nil
        }
        link.setupTimer?.cancel()
        link.setupTimer = nil
        link.idleClose?.cancel()
        link.idleClose = nil
        link.staged = []
        link.unsent = []
        links.removeAll { $0 === link }
        // Once: a closed link never comes here again (the guard above).
        statistics.connectionClosed()
        if !link.tries.isEmpty {
            fail(
                link,
                .failed(
                    wasReady
                        ? EncryptedConnections.closedByServer
                        : "the server closed the connection during the TLS handshake"), &endings)
        }
    }

    /// Closes `link` once it has had no try for its idle time: ours (the first connection's, or the shorter one
    /// of those opened under load) or the server's keepalive, whichever is shorter.
    private func armIdleClose(_ link: Link) {
        guard link.tries.isEmpty, link.idleClose == nil, link.phase == .ready else { return }
        link.idleClose = home.scheduleTask(deadline: link.idleSince + idleTime(link)) { [weak self, weak link] in
            guard let self, let link else { return }
            var endings = Endings()
            self.lock.withLock {
                link.idleClose = nil
                guard link.tries.isEmpty, link.phase == .ready else { return }
                let idle = self.idleTime(link)
                guard NIODeadline.now() >= link.idleSince + idle else {
                    self.armIdleClose(link)
                    return
                }
                self.logger.debug(
                    "closing idle connection", metadata: ["dns.idle-ms": "\(idle.nanoseconds / 1_000_000)"])
                self.closeCleanly(link, &endings)
            }
            endings.run()
        }
    }

    private func idleTime(_ link: Link) -> TimeAmount {
        var idle = links.first === link ? idleTimeout : min(idleTimeout, policy.surplusIdleTimeout)
        // RFC 7828 §3.3.2: close before the server's timeout runs out (at 90% of it), so that a query is never
        // sent just as the server closes (RFC 7766 §6.2.3).
        if let keepalive = link.serverKeepalive { idle = min(idle, .nanoseconds(keepalive.nanoseconds / 10 * 9)) }
        return idle
    }

    private static func errorText(_ code: CInt) -> String {
        String(cString: strerror(code))
    }
}

/// Cuts the plaintext of a DoT connection into DNS messages (RFC 1035 §4.2.2: a 2-byte length, then the message),
/// however the reads split it; only a partial message is kept for the next read.
struct DoTFrameSplitter {
    /// The start of a message whose rest has not come yet.
    private var carry: [UInt8] = []

    /// Takes `bytes` and gives `body` every message now whole, in order, as a slice of what was read: the caller
    /// copies what it keeps, and nothing else is copied (a DoT read's replies, BENCHMARKS.md, round 22).
    mutating func forEachFrame(in bytes: ArraySlice<UInt8>, _ body: (ArraySlice<UInt8>) -> Void) {
        if carry.isEmpty {
            // Nearly every DoT read: whole replies, one record each; nothing is copied twice.
            let rest = Self.cut(bytes, body)
            if !rest.isEmpty { carry = Array(rest) }
        } else {
            carry.append(contentsOf: bytes)
            let rest = Self.cut(carry[...], body)
            carry = Array(rest)
        }
    }

    private static func cut(_ bytes: ArraySlice<UInt8>, _ body: (ArraySlice<UInt8>) -> Void) -> ArraySlice<UInt8> {
        var rest = bytes
        while rest.count >= 2 {
            let start = rest.startIndex
            let length = Int(rest[start]) << 8 | Int(rest[start + 1])
            guard rest.count >= 2 + length else { break }
            body(rest[(start + 2)..<(start + 2 + length)])
            rest = rest[(start + 2 + length)...]
        }
        return rest
    }
}
