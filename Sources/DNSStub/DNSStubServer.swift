import DNSCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The DNS stub's sockets: UDP and TCP on each listen address, served until graceful shutdown.
///
/// UDP gets one socket and one thread per core (SO_REUSEPORT), so every core answers; each thread waits on its
/// socket, takes a batch of datagrams with one recvmmsg and sends the batch's replies with one sendmmsg
/// (``StubUDPWorker``). A UDP socket passed by systemd is one socket for all the threads, each watching it
/// exclusively. TCP is served by the event loops. A listen address that cannot be bound (in use, not permitted) is one
/// warning naming it and the reason; the daemon goes on serving everything else.
public final class DNSStubServer: ServiceLifecycle.Service, Sendable {
    /// A socket handed over by the service manager (socket activation, `LISTEN_FDS`).
    public struct InheritedSocket: Sendable {
        public var descriptor: CInt
        public var isStream: Bool
        public init(descriptor: CInt, isStream: Bool) {
            self.descriptor = descriptor
            self.isStream = isStream
        }
    }

    private let responder: StubResponder
    private let listen: [HostAndPort]
    private let inherited: [InheritedSocket]
    private let group: any EventLoopGroup
    private let logger: Logger
    private let channels = Mutex<[any Channel]>([])
    private let workers = Mutex<[StubUDPWorker]>([])
    private let bound = Mutex<[String]>([])
    /// `bind()` ran (whatever it managed to bind): `run()` does not try again.
    private let didBind = Atomic<Bool>(false)
    /// TCP connections of allowed clients open now (counted at accept, before the caps are checked).
    private let tcpConnections = Atomic<Int>(0)
    /// TCP connections of allowed clients closed at accept because a cap (total or per address) was reached.
    private let tcpRefused = Atomic<Int>(0)
    /// TCP connections open per client address (not loopback), for `maxTCPConnectionsPerAddress`.
    private let tcpByAddress = Mutex<[[UInt8]: Int]>([:])
    /// DNS Cookies when they are on (the responder's; Reload may turn them on or off).
    var cookies: StubCookies? { responder.cookies }

    public init(
        responder: StubResponder, settings: StubSettings, inherited: [InheritedSocket] = [],
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger
    ) {
        self.responder = responder
        self.listen = settings.listen
        self.inherited = inherited
        let beyondLoopback =
            settings.listen.contains { address in
                guard let bytes = AddressRange.parseAddress(address.host) else { return true }
                return !AddressRange.loopback.contains { $0.contains(bytes) }
            } || !inherited.isEmpty
        responder.setListensBeyondLoopback(beyondLoopback)
        self.group = group
        self.logger = logger
    }

    /// What the stub listens on, e.g. `["udp 127.0.0.153:53", "tcp 127.0.0.153:53"]`.
    public var listening: [String] { bound.withLock { $0 } }

    /// The TCP listeners' local addresses (with the port the kernel chose for port 0).
    var tcpLocalAddresses: [SocketAddress] { channels.withLock { $0.compactMap(\.localAddress) } }

    /// What the stub's TCP holds against its caps, for `Status`.
    public struct TCPUsage: Sendable {
        /// Connections of allowed clients open now (loopback included).
        public var connections: Int
        /// Connections closed at accept because `max-tcp` or `max-tcp-per-address` was reached, since start.
        public var refused: Int
        /// The addresses with the most connections open (loopback is exempt from the per-address cap and left
        /// out), most first, at most `count`.
        public var nearestToCap: [(address: String, connections: Int)]
    }

    /// The TCP connections open, refused at a cap, and the addresses nearest to the per-address cap.
    public func tcpUsage(count: Int = 5) -> TCPUsage {
        let nearest = tcpByAddress.withLock { counts in
            Self.nearest(counts, count: count)
        }
        return TCPUsage(
            connections: max(0, tcpConnections.load(ordering: .relaxed)), refused: tcpRefused.load(ordering: .relaxed),
            nearestToCap: nearest.map { (AddressRange.format($0.key), $0.value) })
    }

    /// The `count` entries with the most connections, most first; ties by address bytes, so the order is stable.
    static func nearest(_ counts: [[UInt8]: Int], count: Int) -> [(key: [UInt8], value: Int)] {
        counts.sorted { lhs, rhs in
            lhs.value != rhs.value ? lhs.value > rhs.value : lhs.key.lexicographicallyPrecedes(rhs.key)
        }.prefix(count).map { $0 }
    }

    /// Binds every listen address and adopts inherited sockets. Failures are logged, not thrown.
    public func bind() async {
        didBind.store(true, ordering: .relaxed)
        for socket in inherited {
            do {
                if socket.isStream {
                    let channel = try await tcpBootstrap().withBoundSocket(socket.descriptor).get()
                    adopt(channel, "tcp \(channel.localAddress.map(Self.describe) ?? "fd \(socket.descriptor)")")
                } else {
                    // Every receive and send on it is MSG_DONTWAIT, whatever O_NONBLOCK systemd set.
                    let udp = StubUDPSocket(descriptor: socket.descriptor)
                    // One worker per core on the one socket, each watching it exclusively: a datagram wakes one of
                    // them, the first while it waits (a query at a time stays on one thread), another while it is
                    // busy (BENCHMARKS.md, round 26).
                    try await startWorkers(Array(repeating: udp, count: Self.threads))
                    bound.withLock { $0.append("udp \(udp.localDescription ?? "fd \(socket.descriptor)")") }
                }
            } catch {
                logger.warning(
                    "DNS stub: cannot use the socket passed by the service manager",
                    metadata: ["fd": "\(socket.descriptor)", "error": "\(error)"])
            }
        }
        for address in listen {
            await bind(address)
        }
    }

    private func bind(_ address: HostAndPort) async {
        var failures: [(transport: String, reason: String)] = []
        do {
            // One UDP socket per core, all on the same port (SO_REUSEPORT): the kernel spreads datagrams.
            var sockets: [StubUDPSocket] = []
            do {
                for _ in 0..<Self.threads { sockets.append(try StubUDPSocket.bind(address)) }
                try await startWorkers(sockets)
            } catch {
                for socket in sockets { socket.close() }
                throw error
            }
            bound.withLock { $0.append("udp \(address)") }
        } catch {
            failures.append(("UDP", Self.reason(error)))
        }
        do {
            let channel = try await tcpBootstrap().bind(host: address.host, port: address.port).get()
            adopt(channel, "tcp \(address)")
        } catch {
            failures.append(("TCP", Self.reason(error)))
        }
        // One warning per address: "UDP and TCP" when both failed for the same reason.
        let reasons = Set(failures.map(\.reason))
        let groups: [(String, String)] =
            reasons.count == 1 && failures.count == 2
            ? [("UDP and TCP", failures[0].reason)] : failures.map { ($0.transport, $0.reason) }
        for (transport, reason) in groups {
            logger.warning(
                "DNS stub: cannot listen on \(address) (\(transport)): \(reason); the varlink API keeps serving",
                metadata: ["address": "\(address)", "transport": "\(transport)"])
        }
    }

    private static func reason(_ error: any Error) -> String {
        guard let io = error as? IOError else { return "\(error)" }
        var reason = String(cString: strerror(io.errnoCode))
        if io.errnoCode == EACCES {
            reason += " (ports below 1024 need root, CAP_NET_BIND_SERVICE or a socket from systemd)"
        }
        return reason
    }

    private func adopt(_ channel: any Channel, _ description: String?) {
        channels.withLock { $0.append(channel) }
        if let description { bound.withLock { $0.append(description) } }
    }

    /// UDP threads per socket address: one per core.
    static var threads: Int { max(1, System.coreCount) }

    /// Starts one worker per socket, all or none: when a thread cannot be created, the ones already running are
    /// stopped before the error returns (their sockets are closed by the caller).
    private func startWorkers(_ sockets: [StubUDPSocket]) async throws {
        var started: [StubUDPWorker] = []
        let number = workers.withLock { $0.count }
        for (index, socket) in sockets.enumerated() {
            let worker = StubUDPWorker(
                socket: socket, responder: responder, name: "dns-udp-\(number + index)", logger: logger)
            do {
                try await worker.start()
            } catch {
                for running in started { await running.stop() }
                throw error
            }
            started.append(worker)
        }
        workers.withLock { $0.append(contentsOf: started) }
    }

    /// Stops every UDP thread, then closes the sockets.
    private func stopWorkers() async {
        let all = workers.withLock { list in
            defer { list = [] }
            return list
        }
        for worker in all { await worker.stop() }
        for worker in all { worker.socket.close() }
    }

    private func tcpBootstrap() -> ServerBootstrap {
        let responder = self.responder
        let server = self
        return ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.writeBufferWaterMark, value: .init(low: 32 * 1024, high: 64 * 1024))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The access list at accept: a stranger's connection is closed at once, before it can hold a
                    // slot or send a byte we would read.
                    let client = StubClient(channel.remoteAddress)
                    guard responder.isAllowed(client) else {
                        responder.countRefusedConnection()
                        channel.close(promise: nil)
                        return
                    }
                    let open = server.tcpConnections.wrappingAdd(1, ordering: .relaxed).newValue
                    channel.closeFuture.whenComplete { _ in server.tcpConnections.wrappingSubtract(1, ordering: .relaxed) }
                    // The caps and the idle timeout as Reload last set them (for connections accepted from now on).
                    let settings = responder.settings
                    guard open <= settings.maxTCPConnections,
                        server.admitTCP(client, limit: settings.maxTCPConnectionsPerAddress, channel: channel)
                    else {
                        server.tcpRefused.wrappingAdd(1, ordering: .relaxed)
                        channel.close(promise: nil)
                        return
                    }
                    try channel.pipeline.syncOperations.addHandler(
                        StubTCPHandler(responder: responder, idleTimeout: DNSStubServer.timeAmount(settings.tcpIdleTimeout)))
                }
            }
    }

    /// A `Duration` as NIO's `TimeAmount`.
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// Counts a TCP connection of `client` against its address's cap (loopback is exempt); the count is given back
    /// when the channel closes.
    private func admitTCP(_ client: StubClient, limit: Int, channel: any Channel) -> Bool {
        guard !client.isLoopback, let key = client.bytes else { return true }
        let admitted = tcpByAddress.withLock { counts in
            guard counts[key, default: 0] < limit else { return false }
            counts[key, default: 0] += 1
            return true
        }
        guard admitted else { return false }
        channel.closeFuture.whenComplete { _ in
            self.tcpByAddress.withLock { counts in
                counts[key, default: 1] -= 1
                if counts[key] == 0 { counts[key] = nil }
            }
        }
        return true
    }

    /// Binds (if `bind()` was not called yet) and serves until graceful shutdown, then closes every socket.
    public func run() async throws {
        if !didBind.load(ordering: .relaxed) { await bind() }
        let open = channels.withLock { $0 }
        let serving = !open.isEmpty || workers.withLock { !$0.isEmpty }
        if serving {
            logger.info("DNS stub listening", metadata: ["on": "\(listening.joined(separator: ", "))"])
        }
        await withGracefulShutdownHandler {
            for channel in open { try? await channel.closeFuture.get() }
            // The UDP threads have no future to wait on: wait for the shutdown itself.
            if serving { try? await gracefulShutdown() }
        } onGracefulShutdown: {
            for channel in open { channel.close(promise: nil) }
        }
        await stopWorkers()
        if !serving { try? await gracefulShutdown() }
    }

    /// Closes every socket without a graceful shutdown (tests that bind without `run()`).
    func closeAll() async {
        for channel in channels.withLock({ $0 }) { try? await channel.close() }
        await stopWorkers()
    }

    static func describe(_ address: SocketAddress) -> String {
        guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }
}
