import DNSCore
import CStubIO
import Logging
import NIOCore
import NIOPosix
import Resolver
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A UDP socket of the stub, shared by the workers that read it and by late replies (misses answered from a
/// task). Late replies and `close()` take the lock, so a reply never goes to a descriptor number that was closed
/// and reused.
///
/// Late replies leave in batches: while other misses of the socket still wait for theirs, a late reply made on an
/// event loop waits in an outbox until the loop's queued jobs have run (the other replies that the same read of the
/// upstream's connection produced), and the outbox goes out with one `sendmmsg`. The last reply awaited goes out at
/// once, so a miss at a time never waits for company.
final class StubUDPSocket: Sendable {
    let descriptor: CInt
    /// True until ``close()``; late replies check it under the same lock. A socket the service manager passed is
    /// closed too at shutdown: that closes our copy only.
    private let open = Mutex<Bool>(true)
    /// Misses read from this socket whose late reply has not been sent yet (``expectLateReply()``).
    private let awaitingReplies = Atomic<Int>(0)
    /// Late replies waiting for their loop's turn to end; a flush is scheduled exactly while it is not empty.
    private let outbox = Mutex<[([UInt8], Peer)]>([])

    init(descriptor: CInt) {
        self.descriptor = descriptor
    }

    /// Binds a new UDP socket on `address` with SO_REUSEPORT, so that one socket per worker shares the port.
    /// - Throws: `IOError` with the errno of the step that failed.
    static func bind(_ address: HostAndPort) throws -> StubUDPSocket {
        let socketAddress = try SocketAddress(ipAddress: address.host, port: address.port)
        let family = socketAddress.protocol.rawValue
        let fd = Glibc.socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw IOError(errnoCode: errno, reason: "socket") }
        func option(_ level: CInt, _ name: CInt, _ value: CInt) {
            var value = value
            _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<CInt>.size))
        }
        option(SOL_SOCKET, SO_REUSEADDR, 1)
        option(SOL_SOCKET, SO_REUSEPORT, 1)
        option(SOL_SOCKET, SO_RCVBUF, 1 << 21)
        let result: CInt
        switch socketAddress {
        case .v4(let v4):
            var raw = v4.address
            result = withUnsafePointer(to: &raw) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .v6(let v6):
            var raw = v6.address
            result = withUnsafePointer(to: &raw) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        case .unixDomainSocket:
            result = -1
            errno = EAFNOSUPPORT
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw IOError(errnoCode: code, reason: "bind")
        }
        return StubUDPSocket(descriptor: fd)
    }

    /// The bound address, as `ADDR:PORT`.
    var localDescription: String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0 else { return nil }
        let address: SocketAddress?
        switch Int32(storage.ss_family) {
        case AF_INET:
            address = withUnsafeBytes(of: storage) { SocketAddress($0.load(as: sockaddr_in.self), host: "") }
        case AF_INET6:
            address = withUnsafeBytes(of: storage) { SocketAddress($0.load(as: sockaddr_in6.self), host: "") }
        default:
            address = nil
        }
        return address.map(DNSStubServer.describe)
    }

    /// Sends one reply from any thread (never blocks: a full send buffer drops it, as a lost datagram would).
    func send(_ reply: [UInt8], to peer: Peer) {
        open.withLock { open in
            guard open else { return }
            var address = peer.address
            _ = reply.withUnsafeBufferPointer { bytes in
                withUnsafeBytes(of: &address) {
                    cstub_send_to(descriptor, bytes.baseAddress, bytes.count, $0.baseAddress, peer.length)
                }
            }
        }
    }

    /// Counts a miss whose reply will come later, through ``sendLate(_:to:)`` (exactly once).
    func expectLateReply() {
        awaitingReplies.add(1, ordering: .relaxed)
    }

    /// A miss's reply: at once when no other miss of this socket awaits its reply or when not on an event loop;
    /// otherwise into the outbox, sent with the other replies of the loop's turn.
    func sendLate(_ reply: [UInt8], to peer: Peer) {
        let others = awaitingReplies.subtract(1, ordering: .relaxed).newValue
        guard others > 0, let loop = IOLoop.current ?? MultiThreadedEventLoopGroup.currentEventLoop else {
            send(reply, to: peer)
            // The client, nearly always a process on this machine, was woken by that datagram, often on this CPU,
            // where it would wait for what this miss still has to do (the cache entry, the question in flight, the
            // frees): let it run first. Only with nothing else waiting here, so never under load; with no other
            // task on this CPU it returns at once. The client has its answer about 13 µs sooner in the lab; the cold
            // p50 read 0.2 to 0.4 % lower in round 22 and level with and without the yield in round 25's direct
            // comparison (the next miss's wake-ups land elsewhere), and natively level; none beside two busy loops.
            if others == 0 { sched_yield() }
            return
        }
        let schedule = outbox.withLock { outbox in
            outbox.append((reply, peer))
            return outbox.count == 1
        }
        // Runs after the jobs already queued on the loop: the replies they make join this one.
        if schedule { loop.execute { self.flushOutbox() } }
    }

    /// Sends every reply in the outbox, with one `sendmmsg` per 64.
    private func flushOutbox() {
        let replies = outbox.withLock { outbox in
            defer { outbox.removeAll(keepingCapacity: true) }
            return outbox
        }
        guard replies.count > 1 else {
            if let (reply, peer) = replies.first { send(reply, to: peer) }
            return
        }
        var data: [UInt8] = []
        data.reserveCapacity(replies.reduce(0) { $0 + $1.0.count })
        var offsets: [Int] = []
        var lengths: [Int] = []
        var addresses: [sockaddr_storage] = []
        var addressLengths: [UInt32] = []
        offsets.reserveCapacity(replies.count)
        lengths.reserveCapacity(replies.count)
        addresses.reserveCapacity(replies.count)
        addressLengths.reserveCapacity(replies.count)
        for (reply, peer) in replies {
            offsets.append(data.count)
            lengths.append(reply.count)
            data.append(contentsOf: reply)
            addresses.append(peer.address)
            addressLengths.append(peer.length)
        }
        open.withLock { open in
            guard open else { return }
            _ = cstub_send_many(
                descriptor, data, offsets, lengths, addresses, addressLengths, UInt32(replies.count))
        }
    }

    /// A client's address, copied out of a receive batch for a late reply.
    struct Peer: Sendable {
        var address: sockaddr_storage
        var length: UInt32

        init(_ pointer: UnsafeRawPointer, length: UInt32) {
            var address = sockaddr_storage()
            withUnsafeMutableBytes(of: &address) {
                $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: Int(min(length, UInt32($0.count)))))
            }
            self.address = address
            self.length = length
        }
    }

    func close() {
        open.withLock { open in
            guard open else { return }
            open = false
            Glibc.close(descriptor)
        }
    }
}

/// One loop serving DNS over UDP on one socket (an ``IOLoop``, a thread of its own per core).
///
/// When the socket is readable it takes up to ``batch`` datagrams at once (`recvmmsg`); answers each (cache hits on
/// this thread, from stored bytes); sends every reply of the batch with one `sendmmsg`; and only then starts the
/// refreshes its stale answers elected. An idle stub answers a query with three system calls (wait, receive,
/// send); a busy one moves 32 datagrams per call each way. A miss over DoT is written upstream from here, and its
/// reply read here too while no other query waits on the connection (``LoopDoTConnection``): a miss at a time
/// stays on one thread, as in Unbound. Other misses are answered later from a task through
/// ``StubUDPSocket/send(_:to:)``.
///
/// The worker used to be a plain thread blocked in `recvmmsg`, two system calls a query instead of three; a DoT
/// miss then crossed to NIO's loop and back, which cost 10 to 20 % of a cold miss (BENCHMARKS.md, round 13).
final class StubUDPWorker: @unchecked Sendable {
    /// Datagrams per receive and per send.
    static let batch = 32
    /// Bytes per datagram slot: a query larger than this is cut (and then malformed); a UDP reply is at most
    /// ``StubReply/ourPayloadSize``.
    static let slotSize = 4096

    let socket: StubUDPSocket
    private let responder: StubResponder
    private let logger: Logger
    private let name: String
    /// The worker's loop, from ``start()``.
    private var loop: IOLoop?
    /// The receive batch; on the loop only (nil once stopped).
    private var batch: OpaquePointer?
    private var failures = 0

    init(socket: StubUDPSocket, responder: StubResponder, name: String, logger: Logger) {
        self.socket = socket
        self.responder = responder
        self.name = name
        self.logger = logger
    }

    /// Starts the worker's loop and watches the socket on it.
    /// - Throws: `IOError` when the loop or its receive batch cannot be made, or the socket cannot be watched.
    func start() async throws {
        let loop = try IOLoop(name: name)
        self.loop = loop
        do {
            try await loop.submit {
                guard let batch = cstub_batch_new(UInt32(Self.batch), Self.slotSize) else {
                    throw IOError(errnoCode: ENOMEM, reason: "receive batch")
                }
                self.batch = batch
                try self.watchSocket(on: loop)
            }.get()
        } catch {
            await stop()
            throw error
        }
    }

    /// Stops watching the socket and stops the loop (the tasks already queued on it run first).
    func stop() async {
        guard let loop else { return }
        self.loop = nil
        try? await loop.submit {
            loop.unwatch(self.socket.descriptor)
            if let batch = self.batch { cstub_batch_free(batch) }
            self.batch = nil
        }.get()
        try? await loop.shutdownGracefully()
    }

    private func watchSocket(on loop: IOLoop) throws {
        // Exclusive: where workers share a socket (one passed by systemd), a datagram wakes one of them, the first
        // while it waits, not all (a herd that woke every UDP thread for each query); a stub's own sockets have one
        // worker each, and there it changes nothing.
        try loop.watch(socket.descriptor, interest: [.read, .exclusive]) { _ in self.receive(on: loop) }
    }

    /// The socket is readable: takes what is there (up to ``batch`` datagrams, without waiting) and answers it.
    private func receive(on loop: IOLoop) {
        guard let batch else { return }
        let received = cstub_batch_receive_now(batch, socket.descriptor)
        if received < 0 {
            let code = -received
            if code == EINTR || code == EAGAIN || code == EWOULDBLOCK { return }
            failures += 1
            if failures == 1 || failures % 10_000 == 0 {
                logger.warning(
                    "DNS stub: receiving failed", metadata: ["error": "\(String(cString: strerror(code)))"])
            }
            // A lasting error (out of memory) must not become a busy loop: the socket rests for a millisecond.
            loop.unwatch(socket.descriptor)
            loop.after(.milliseconds(1)) { [self] in
                // Stopped meanwhile: the batch is gone.
                guard self.batch != nil else { return }
                try? watchSocket(on: loop)
            }
            return
        }
        guard received > 0 else { return }
        let fd = socket.descriptor
        let socket = self.socket
        var refreshes = PendingRefreshes()
        // Once per batch: Reload may turn cookies on or off.
        let cookies = responder.cookies
        for index in 0..<UInt32(received) {
            var length = 0
            let data = cstub_batch_datagram(batch, index, &length)
            let bytes = [UInt8](UnsafeBufferPointer(start: data, count: length))
            var senderLength: UInt32 = 0
            guard let sender = cstub_batch_sender(batch, index, &senderLength) else { continue }
            let client = StubClient(sockaddr: sender)
            let outcome = responder.handle(
                bytes, client: client, overTCP: false, cookies: cookies, refreshes: &refreshes
            ) {
                let peer = StubUDPSocket.Peer(sender, length: senderLength)
                socket.expectLateReply()
                return { reply in socket.sendLate(reply, to: peer) }
            }
            guard case .reply(let reply) = outcome else { continue }
            let queued = reply.withUnsafeBufferPointer { cstub_batch_queue_reply(batch, index, $0.baseAddress, $0.count) }
            if queued != 0 { socket.send(reply, to: StubUDPSocket.Peer(sender, length: senderLength)) }
        }
        _ = cstub_batch_send(batch, fd)
        responder.startRefreshes(refreshes)
    }
}
