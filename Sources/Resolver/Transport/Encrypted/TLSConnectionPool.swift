import DNSCore
import Logging
import NIOCore
import NIOPosix
import NIOTLS

/// What runs on one established TLS connection of an encrypted upstream: HTTP/2 (``DoHSession``; DoT has its own
/// connection, ``LoopDoTConnection``). The life of the connection itself belongs to ``TLSConnectionPool``.
///
/// Every method is called on the pool's event loop.
protocol TLSSession: AnyObject, Sendable {
    /// Whether queries carry an empty edns-tcp-keepalive option (RFC 7828: DNS over TCP and TLS only).
    static var sendsKeepalive: Bool { get }
    /// Handlers that go behind TLS when the channel is created (DoT's framing; none for DoH).
    func channelHandlers() -> [any ChannelHandler]
    /// The TLS handshake completed and agreed `alpn`: set up what the protocol needs, or throw why the
    /// connection cannot be used (the server refused HTTP/2). `goingAway`, on the connection's loop: the server
    /// said it takes no more queries on this connection (HTTP/2 GOAWAY); the pool sends none there.
    func handshakeCompleted(alpn: String?, channel: any Channel, goingAway: @escaping () -> Void) throws
    /// Sends one query on the ready connection; `completion` gets the reply or why there is none.
    func send(_ query: PendingQuery, completion: TryCompletion, on channel: any Channel)
    /// The try ended (its reply, a timeout, a cancel, the connection's failure): forget it.
    func ended(_ completion: TryCompletion)
    /// The idle time the server allows (RFC 7828 edns-tcp-keepalive in its last reply), if it said one.
    var serverKeepalive: TimeAmount? { get }
}

/// How many connections one upstream may have, and when more than one.
struct TLSPoolPolicy: Sendable {
    /// Connections open at once at the most.
    var maximumConnections: Int
    /// Queries in flight on the least busy connection that make the pool open another (when below the maximum).
    var busyThreshold: Int
    /// How long a connection beyond the first stays open without queries.
    var surplusIdleTimeout: TimeAmount

    /// DoT: one connection, up to 4 while every open one has 100 or more queries waiting; the extra ones close
    /// after 2 s without queries. One pipelined connection (RFC 7766 §6.2.1.1, replies out of order) carries a
    /// normal load: each extra one costs a full handshake on both ends, which on a busy machine is CPU taken from
    /// the queries (dnsperf with 64 queries in flight: 4 connections gave 7 054 misses/s, one 7 172, median of
    /// four alternating rounds, BENCHMARKS.md); a deep queue is what another connection shortens.
    static let dot = TLSPoolPolicy(maximumConnections: 4, busyThreshold: 100, surplusIdleTimeout: .seconds(2))
    /// DoH: one HTTP/2 connection, whose streams already run side by side.
    static let doh = TLSPoolPolicy(maximumConnections: 1, busyThreshold: .max, surplusIdleTimeout: .seconds(2))

    /// The ready connection for the next try, the least busy (the oldest on a tie, so that sequential queries all
    /// use one), and whether another should open: every open one is ready and has ``busyThreshold`` tries, there
    /// are fewer than ``maximumConnections``, and no back-off holds.
    @inline(__always)
    func choose<Link>(
        _ links: [Link], isReady: (Link) -> Bool, inFlight: (Link) -> Int, backingOff: () -> Bool
    ) -> (best: Link?, another: Bool) {
        var best: Link?
        var least = Int.max
        var ready = 0
        for link in links where isReady(link) {
            ready += 1
            let count = inFlight(link)
            if count < least {
                best = link
                least = count
            }
        }
        guard best != nil else { return (nil, false) }
        let another = least >= busyThreshold && links.count < maximumConnections && links.count == ready && !backingOff()
        return (best, another)
    }
}

/// The kept TLS connections to one encrypted upstream and their life, shared by DoT and DoH.
///
/// - Connections open on demand: the first query opens one; a query goes on the least busy ready connection
///   (the oldest on a tie, so that sequential queries all use one). When every open connection has
///   ``TLSPoolPolicy/busyThreshold`` queries in flight, another opens, up to ``TLSPoolPolicy/maximumConnections``;
///   the query does not wait for it.
/// - The certificate is always verified (``TLSClientContext``): a failure ends the tries with
///   ``ExchangeOutcome/insecure(_:)`` and nothing is sent in clear text.
/// - Idle close: the first connection after `idleTimeout` without queries, further ones after
///   ``TLSPoolPolicy/surplusIdleTimeout``; either sooner when the server's edns-tcp-keepalive (RFC 7828 §3.3.2)
///   allows less (then at 90% of the server's timeout). A connection the server closed is reopened by the next query.
/// - A failed connect or handshake starts a back-off (``ReconnectBackoff``: 250 ms doubling up to 8 s) during
///   which tries fail at once with the same reason, so the resolver serves stale answers instead of waiting.
/// - Bookkeeping: connections opened and open, handshakes and resumed ones, failures with their reason
///   (``UpstreamStatistics``).
///
/// Not generic over the session type: a generic pool ran unspecialised behind ``EncryptedConnection`` and asked the
/// runtime for its nested types' metadata on every query (BENCHMARKS.md, round 9).
final class TLSConnectionPool: EncryptedConnection, @unchecked Sendable {
    // @unchecked Sendable: every `var` below (and every `Link`) is read and written only on `loop` (each entry
    // point hops there first; `preconditionInEventLoop` guards `start`).
    let loop: any EventLoop
    let taskExecutor: EventLoopTaskExecutor
    let address: SocketAddress
    let server: UpstreamServer
    let statistics: UpstreamStatistics
    private let tls: TLSClientContext
    private let idleTimeout: TimeAmount
    private let policy: TLSPoolPolicy
    private let makeSession: () -> any TLSSession
    /// The session type's ``TLSSession/sendsKeepalive``.
    private let sendsKeepalive: Bool
    private let logger: Logger

    /// Open and opening connections, oldest first.
    private var links: [Link] = []
    private var backoff = ReconnectBackoff()

    /// One TLS connection and the tries on it. @unchecked Sendable: used on `loop` only.
    private final class Link: TryHolder, @unchecked Sendable {
        let session: any TLSSession
        var channel: (any Channel)?
        var ready = false
        var retired = false
        /// The server takes no more queries here (GOAWAY): it closes once the tries on it have ended.
        var draining = false
        /// Tries waiting for the connection to be ready.
        var queued: [(PendingQuery, TryCompletion)] = []
        /// Every try on this connection not yet ended, by a serial number.
        var tries: [Int: TryCompletion] = [:]
        /// The idle-close timer, armed when the last try ended. A try that starts leaves it armed: when it fires
        /// on a connection in use, or before the idle time since `idleSince` is over, it re-arms instead of
        /// closing (no timer cancelled and made again on every query).
        var idleClose: Scheduled<Void>?
        /// When the last try ended (meaningful while `tries` is empty).
        var idleSince = NIODeadline.now()
        /// What the connection has heard from the server (its pipeline's ``TLSLinkEvents``), the timeout of the
        /// latest try, and what the pool does with a connection a try timed out on with nothing heard for as long.
        weak var events: TLSLinkEvents?
        var tryTimeout = TimeAmount.zero
        var stoppedAnswering: ((Link) -> Void)?

        init(session: any TLSSession) { self.session = session }

        func timedOut(_ number: Int) {
            guard let completion = tries[number] else { return }
            let silent =
                ready && !draining
                && events.map {
                    EncryptedConnections.silent(since: $0.lastHeard, timeout: tryTimeout, now: .now())
                } == true
            completion.succeed(.timedOut)
            if silent { stoppedAnswering?(self) }
        }
        func waits(_ number: Int) -> Bool { tries[number] != nil }
    }

    private var serial = 0
    /// When each try times out; one timer for all of them instead of one scheduled and cancelled per query.
    private lazy var deadlines = TryDeadlines(loop: loop)

    init<Session: TLSSession>(
        server: UpstreamServer, address: SocketAddress, tls: TLSClientContext, statistics: UpstreamStatistics,
        idleTimeout: Duration, policy: TLSPoolPolicy, loop: any EventLoop, logger: Logger,
        makeSession: @escaping () -> Session
    ) {
        self.server = server
        self.address = address
        self.tls = tls
        self.statistics = statistics
        self.idleTimeout = TimeAmount(idleTimeout)
        self.policy = policy
        self.loop = loop
        self.taskExecutor = EventLoopTaskExecutor(loop: loop)
        self.makeSession = makeSession
        self.sendsKeepalive = Session.sendsKeepalive
        var logger = logger
        logger[metadataKey: "dns.server"] = "\(server)"
        self.logger = logger
    }

    /// Closes every connection (on reload, when the upstream is gone); waiting tries fail.
    func shutdown() {
        loop.execute {
            for link in self.links {
                link.idleClose?.cancel()
                link.channel?.close(promise: nil)
            }
        }
    }

    func start(_ query: PendingQuery, timeout: TimeAmount, completion: TryCompletion) {
        loop.preconditionInEventLoop()
        guard let padded = query.padded(keepalive: sendsKeepalive) else {
            completion.succeed(.failed("the query cannot carry EDNS padding"))
            return
        }
        guard let link = pick(timeout: timeout, completion: completion) else { return }
        serial &+= 1
        let number = serial
        link.tries[number] = completion
        link.tryTimeout = timeout
        deadlines.add(loop.now + timeout, link: link, number: number)
        completion.onEnd { completion in
            link.tries[number] = nil
            link.session.ended(completion)
            if link.tries.isEmpty {
                link.idleSince = .now()
                if link.draining {
                    link.channel?.close(promise: nil)
                } else {
                    self.armIdleClose(link)
                }
            }
        }
        if link.ready, let channel = link.channel {
            link.session.send(padded, completion: completion, on: channel)
        } else {
            link.queued.append((padded, completion))
        }
    }

    /// The connection for the next try, opening one when there is none (or all are busy); nil when the try
    /// already ended (a back-off refused it).
    private func pick(timeout: TimeAmount, completion: TryCompletion) -> Link? {
        let (best, another) = policy.choose(
            links, isReady: { $0.ready }, inFlight: { $0.tries.count }, backingOff: { backoff.refusal() != nil })
        if let best {
            if another {
                logger.debug(
                    "opening another connection under load",
                    metadata: ["dns.in-flight": "\(best.tries.count)", "dns.connections": "\(links.count + 1)"])
                _ = connect(timeout: timeout)
            }
            return best
        }
        if let opening = links.first { return opening }
        if let refusal = backoff.refusal() {
            completion.succeed(refusal)
            return nil
        }
        return connect(timeout: timeout)
    }

    private func connect(timeout: TimeAmount) -> Link {
        let link = Link(session: makeSession())
        links.append(link)
        let tls = self.tls
        let address = self.address
        statistics.connectionOpened()
        let events = TLSLinkEvents { [weak self, link] event in
            self?.linkEvent(event, link: link)
        }
        link.events = events
        link.stoppedAnswering = { [weak self] link in self?.stoppedAnswering(link) }
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler: TLSClientHandler
                    do {
                        handler = try tls.handler(remote: address)
                    } catch {
                        throw TLSSetupError(underlying: error)
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                    try channel.pipeline.syncOperations.addHandler(events)
                    try channel.pipeline.syncOperations.addHandlers(link.session.channelHandlers())
                }
            }
            .connect(to: address)
        connected.whenComplete { result in
            switch result {
            case .success(let channel):
                link.channel = channel
                channel.closeFuture.whenComplete { _ in self.closed(link) }
                // A server that accepts but never finishes the handshake (its accept queue full, a middlebox
                // eating the ClientHello) must not hold a connection that counts as open and never idles out.
                self.loop.scheduleTask(in: timeout) { [weak self, weak link] in
                    guard let self, let link, !link.ready, !link.retired, self.links.contains(where: { $0 === link })
                    else { return }
                    self.connectFailed(
                        link, .failed("TLS handshake not finished after \(timeout.nanoseconds / 1_000_000) ms"))
                    channel.close(promise: nil)
                }
            case .failure(let error as TLSSetupError):
                self.retire(link)
                self.connectFailed(link, tls.outcome(for: error.underlying))
            case .failure(let error):
                self.retire(link)
                self.connectFailed(link, .failed("connect", error))
            }
        }
        return link
    }

    private func linkEvent(_ event: TLSLinkEvents.Event, link: Link) {
        switch event {
        case .handshakeCompleted(let version, let resumed, let keyPin, let alpn, let channel):
            handshakeCompleted(link, version: version, resumed: resumed, keyPin: keyPin, alpn: alpn, channel: channel)
        case .error(let error, let channel):
            let outcome = tls.outcome(for: error)
            if !link.ready {
                connectFailed(link, outcome)
            } else {
                // After GOAWAY the server may close without close_notify: HTTP/2 said it was done already, so
                // that is no failure of the upstream.
                if !(link.draining && (error as? TLSClientError) == .uncleanShutdown) {
                    statistics.connectionFailed(outcome.reason)
                }
                // Out of the pool before its tries end: the ones sent again must not pick it (the close future
                // completes a loop turn later).
                retire(link)
                fail(link, EncryptedConnections.endingTries(outcome))
            }
            channel.close(promise: nil)
        }
    }

    private func handshakeCompleted(
        _ link: Link, version: String?, resumed: Bool, keyPin: String?, alpn: String?, channel: any Channel
    ) {
        backoff.succeeded()
        statistics.handshake(version: version, server: server, pinned: tls.pinned, keyPin: keyPin, resumed: resumed)
        do {
            try link.session.handshakeCompleted(alpn: alpn, channel: channel) { [weak self, weak link] in
                guard let self, let link else { return }
                self.drain(link)
            }
        } catch {
            connectFailed(link, .failed("\(error)"))
            channel.close(promise: nil)
            return
        }
        link.ready = true
        let waiting = link.queued
        link.queued = []
        for (query, completion) in waiting where !completion.isEnded {
            link.session.send(query, completion: completion, on: channel)
        }
    }

    /// A connect or a handshake failed: every try on the connection fails with `outcome`, and a back-off starts.
    private func connectFailed(_ link: Link, _ outcome: ExchangeOutcome) {
        let delay = backoff.failed(outcome)
        logger.info(
            "encrypted upstream not reachable",
            metadata: ["reason": "\(outcome.reason)", "dns.retry-ms": "\(delay.nanoseconds / 1_000_000)"])
        statistics.connectionFailed(outcome.reason)
        links.removeAll { $0 === link }
        fail(link, outcome)
    }

    /// A try timed out and the server has sent nothing on its connection for as long: closed as dead, its other
    /// tries sent again on the next connection, as ``LoopDoTConnection`` does for DoT (the reasons are there).
    private func stoppedAnswering(_ link: Link) {
        guard link.ready, let channel = link.channel else { return }
        EncryptedConnections.reportStoppedAnswering(
            timeout: link.tryTimeout, waiting: link.tries.count, logger: logger, statistics: statistics)
        retire(link)
        fail(link, .failed(EncryptedConnections.abandoned))
        channel.close(promise: nil)
    }

    private func fail(_ link: Link, _ outcome: ExchangeOutcome) {
        let waiting = link.tries.values
        link.queued = []
        for completion in waiting { completion.succeed(outcome) }
    }

    private func closed(_ link: Link) {
        let wasReady = link.ready
        retire(link)
        if !link.tries.isEmpty {
            fail(link, .failed(wasReady ? EncryptedConnections.closedByServer : "the server closed the connection during the TLS handshake"))
        }
    }

    /// The server said it takes no more queries on `link` (HTTP/2 GOAWAY, RFC 9113 §6.8): the next query opens
    /// another connection, and this one closes when the tries on it have their answers (or failed, and were sent
    /// again: ``DoHSession``).
    private func drain(_ link: Link) {
        guard !link.draining else { return }
        link.draining = true
        logger.debug(
            "the server is closing the connection (GOAWAY)", metadata: ["dns.in-flight": "\(link.tries.count)"])
        retire(link)
        if link.tries.isEmpty { link.channel?.close(promise: nil) }
    }

    /// Takes the connection out of the pool and the count of open ones, once.
    private func retire(_ link: Link) {
        links.removeAll { $0 === link }
        link.ready = false
        link.idleClose?.cancel()
        link.idleClose = nil
        guard !link.retired else { return }
        link.retired = true
        statistics.connectionClosed()
    }

    /// Closes `link` once it has had no try for its idle time: ours (the first connection's, or the shorter one
    /// of those opened under load) or the server's keepalive, whichever is shorter.
    private func armIdleClose(_ link: Link) {
        guard link.tries.isEmpty, link.idleClose == nil, link.ready, let channel = link.channel else { return }
        link.idleClose = loop.scheduleTask(deadline: link.idleSince + idleTime(link)) {
            link.idleClose = nil
            // In use again: armed anew when its last try ends.
            guard link.tries.isEmpty, link.ready else { return }
            let idle = self.idleTime(link)
            guard NIODeadline.now() >= link.idleSince + idle else {
                // Tries came and went since the timer was armed: wait for the rest of the idle time.
                self.armIdleClose(link)
                return
            }
            self.logger.debug("closing idle connection", metadata: ["dns.idle-ms": "\(idle.nanoseconds / 1_000_000)"])
            // Out of the pool first: NIO completes the close future a loop turn after the close, and a query that
            // picked the connection in between went out on a closed channel, failed, and was sent again.
            self.retire(link)
            channel.close(promise: nil)
        }
    }

    /// How long `link` may stay without tries.
    private func idleTime(_ link: Link) -> TimeAmount {
        var idle = links.first === link ? idleTimeout : min(idleTimeout, policy.surplusIdleTimeout)
        // RFC 7828 §3.3.2: close before the server's timeout runs out (at 90% of it), so that a query is never
        // sent just as the server closes (RFC 7766 §6.2.3).
        if let keepalive = link.session.serverKeepalive { idle = min(idle, .nanoseconds(keepalive.nanoseconds / 10 * 9)) }
        return idle
    }
}

/// A TLS handler could not be made for a new connection.
struct TLSSetupError: Error {
    var underlying: any Error
}

/// Reports the TLS handshake and pipeline errors of one pooled connection (it sits right behind TLS).
/// @unchecked Sendable: made for one channel, then used on its event loop only.
final class TLSLinkEvents: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    enum Event {
        case handshakeCompleted(version: String?, resumed: Bool, keyPin: String?, alpn: String?, channel: any Channel)
        case error(any Error, channel: any Channel)
    }

    private let report: (Event) -> Void
    /// When the server last sent anything (decrypted), or the handshake completed.
    private(set) var lastHeard = NIODeadline.now()

    init(report: @escaping (Event) -> Void) {
        self.report = report
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastHeard = .now()
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let alpn) = event {
            lastHeard = .now()
            let tls = try? context.pipeline.syncOperations.handler(type: TLSClientHandler.self)
            report(
                .handshakeCompleted(
                    version: tls?.tlsVersion, resumed: tls?.resumed ?? false, keyPin: tls?.keyPin, alpn: alpn,
                    channel: context.channel))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        report(.error(error, channel: context.channel))
    }
}

/// Reconnect back-off after a failed connect or handshake: 250 ms, doubling, at most 8 s.
struct ReconnectBackoff {
    private var failures = 0
    private var until: NIODeadline = .distantPast
    private var last: ExchangeOutcome?

    /// Records a failure and returns the delay before the next connect.
    mutating func failed(_ outcome: ExchangeOutcome) -> TimeAmount {
        failures += 1
        let delay = TimeAmount.milliseconds(min(8000, 250 << min(failures - 1, 6)))
        until = .now() + delay
        last = outcome
        return delay
    }

    mutating func succeeded() {
        failures = 0
        until = .distantPast
        last = nil
    }

    /// The outcome of a try made during the back-off, or nil when a connect may be made.
    func refusal() -> ExchangeOutcome? {
        guard NIODeadline.now() < until, let last else { return nil }
        switch last {
        case .insecure(let reason): return .insecure("\(reason) (retrying after a back-off)")
        default: return .failed("\(last.reason) (retrying after a back-off)")
        }
    }
}

extension ExchangeOutcome {
    /// The failure text of an outcome that is not a response.
    var reason: String {
        switch self {
        case .response: "response"
        case .truncated: "truncated"
        case .timedOut: "timeout"
        case .failed(let reason), .insecure(let reason): reason
        case .cancelled: "cancelled"
        }
    }
}

/// The deadlines of a connection's tries, in order, for one timer armed at the earliest (an event loop's timer costs
/// an allocation, a heap insert and a cancel per query; here a try costs an append). When the timer fires, the due
/// tries still waiting are returned, tries that ended are dropped, and the timer is to be armed for the first try
/// still waiting: under steady traffic it fires about once per timeout, not once per query. Whoever owns it keeps
/// it safe: ``TryDeadlines`` on its pool's loop, ``LoopDoTConnection`` under its lock.
struct DeadlineQueue {
    // Not generic: a generic one paid for runtime metadata and unspecialized array code per query.
    private struct Entry {
        var at: NIODeadline
        var holder: any TryHolder
        var number: Int
    }
    private var entries: [Entry] = []
    private var head = 0
    /// When the owner's timer is armed for, if it is.
    private(set) var armedAt: NIODeadline?

    /// Adds a try's deadline; returns when the owner must arm its timer (again), or nil when the armed one comes
    /// first.
    mutating func add(_ at: NIODeadline, holder: any TryHolder, number: Int) -> NIODeadline? {
        // Nearly always the latest (every try of an upstream has the same timeout): an append.
        var index = entries.endIndex
        while index > head, entries[index - 1].at > at { index -= 1 }
        entries.insert(Entry(at: at, holder: holder, number: number), at: index)
        if let armedAt, armedAt <= at { return nil }
        armedAt = at
        return at
    }

    /// The timer fired at `now`: the tries due and still waiting, and when to arm the timer next (nil: nothing waits).
    mutating func fire(now: NIODeadline) -> (due: [(holder: any TryHolder, number: Int)], next: NIODeadline?) {
        armedAt = nil
        var due: [(holder: any TryHolder, number: Int)] = []
        while head < entries.count {
            let entry = entries[head]
            if entry.at <= now {
                head += 1
                if entry.holder.waits(entry.number) { due.append((entry.holder, entry.number)) }
            } else if !entry.holder.waits(entry.number) {
                // Ended already (nearly every try does, long before its deadline): it needs no timer, and
                // dropping it here lets the next one fire for a try still waiting instead of chasing each
                // ended one a query apart.
                head += 1
            } else {
                break
            }
        }
        if head == entries.count {
            entries.removeAll(keepingCapacity: entries.count <= 1024)
            head = 0
            return (due, nil)
        }
        if head >= 256, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        armedAt = entries[head].at
        return (due, entries[head].at)
    }
}

/// A pool's ``DeadlineQueue`` and its timer on the pool's loop; a due try gets ``ExchangeOutcome/timedOut``. Used
/// on the pool's loop only.
final class TryDeadlines {
    private let loop: any EventLoop
    private var queue = DeadlineQueue()
    private var timer: Scheduled<Void>?

    init(loop: any EventLoop) {
        self.loop = loop
    }

    func add(_ at: NIODeadline, link: any TryHolder, number: Int) {
        guard let armAt = queue.add(at, holder: link, number: number) else { return }
        arm(armAt)
    }

    private func arm(_ at: NIODeadline) {
        timer?.cancel()
        // Holds this object until it fires: tries still waiting time out even after the pool is let go.
        timer = loop.scheduleTask(deadline: at) { self.due() }
    }

    private func due() {
        timer = nil
        let (due, next) = queue.fire(now: loop.now)
        for (holder, number) in due { holder.timedOut(number) }
        if let next { arm(next) }
    }
}

/// What ``TryDeadlines`` asks of a connection: end a try that is still waiting.
protocol TryHolder: AnyObject {
    func timedOut(_ number: Int)
    /// Whether the try is still waiting.
    func waits(_ number: Int) -> Bool
}
