import DiscoverAPI
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The varlink listener: owns the socket file, accepts connections up to the limit, and on graceful shutdown
/// drains them: stops accepting, lets the calls already read finish (streams are ended) for at most
/// `drainTimeout`, then closes what is left.
///
/// `run()` binds the socket path and serves it. A listening socket made elsewhere (socket activation) is served
/// with ``adopt(descriptor:)`` and ``serve(_:removingSocketFile:)``. The limits can change while it runs
/// (``updateLimits(maxConnections:connection:)``); they apply to connections accepted afterwards.
public final class VarlinkServer: ServiceLifecycle.Service, Sendable {
    /// Where to listen and how much each connection may cost.
    public struct Settings: Sendable, Equatable {
        /// The socket path (created mode 0666, removed at shutdown).
        public var socketPath: String
        /// Connections served at once; one more gets `TooManyConnections`.
        public var maxConnections: Int
        /// What each connection may cost.
        public var limits: ConnectionLimits
        /// What each uid may hold; nil: no per-uid caps (only `maxConnections`).
        public var perUID: PerUIDLimits?

        /// Creates settings.
        public init(socketPath: String, maxConnections: Int, limits: ConnectionLimits, perUID: PerUIDLimits? = nil) {
            self.socketPath = socketPath
            self.maxConnections = maxConnections
            self.limits = limits
            self.perUID = perUID
        }
    }

    private let settings: NIOLockedValueBox<Settings>
    private let router: MethodRouter
    private let logger: Logger
    private let group: any EventLoopGroup
    private let registry: ConnectionRegistry
    /// Whether a peer may take the reserve above `maxConnections` (root, the admin group).
    private let mayUseReserve: @Sendable (PeerCredentials) -> Bool
    private let drainTimeout: Duration

    /// Creates a server; nothing is bound until ``run()`` or ``bind()``.
    /// - Parameter drainTimeout: how long open calls may take to finish at shutdown before their connections are
    ///   closed anyway.
    /// - Parameter mayUseReserve: whether a peer may take ``PerUIDLimits/reserve`` (default: root only).
    public init(
        settings: Settings, router: MethodRouter, registry: ConnectionRegistry, group: any EventLoopGroup,
        logger: Logger, drainTimeout: Duration = .seconds(5),
        mayUseReserve: @escaping @Sendable (PeerCredentials) -> Bool = { $0.isRoot }
    ) {
        self.mayUseReserve = mayUseReserve
        self.settings = NIOLockedValueBox(settings)
        self.router = router
        self.registry = registry
        self.group = group
        self.logger = logger
        self.drainTimeout = drainTimeout
    }

    /// The settings in effect.
    public var currentSettings: Settings { settings.withLockedValue { $0 } }

    /// Changes the limits for connections accepted from now on (open connections keep theirs).
    public func updateLimits(maxConnections: Int, connection limits: ConnectionLimits, perUID: PerUIDLimits? = nil) {
        settings.withLockedValue {
            $0.maxConnections = maxConnections
            $0.limits = limits
            if let perUID { $0.perUID = perUID }
        }
    }

    /// What the uids nearest to a per-uid cap hold (for `Status`).
    public func nearestToCaps(count: Int = 5) -> [(uid: UInt32, usage: ConnectionRegistry.Usage)] {
        guard let perUID = currentSettings.perUID else { return [] }
        return registry.nearestToCaps(perUID, count: count)
    }

    private func makeBootstrap() -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 1024)
            // A client may send its calls and shut down its write side (`echo ... | socat`): answer them all.
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture { try self.initialize(channel) }
            }
    }

    /// Binds the socket. Separate from `run` so start-up errors surface before the daemon reports ready.
    public func bind() async throws -> any Channel {
        let socketPath = currentSettings.socketPath
        try SocketFile.prepare(path: socketPath)
        // Bind under a temporary name, set the mode, then rename into place: clients never see the socket
        // before it is mode 0666.
        let directory = (socketPath as NSString).deletingLastPathComponent
        let temporary = directory + "/.d\(getpid())"
        guard temporary.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw SocketFile.Error("socket directory path is too long: \(directory)")
        }
        unlink(temporary)
        let channel = try await makeBootstrap().bind(unixDomainSocketPath: temporary).get()
        guard chmod(temporary, 0o666) == 0, rename(temporary, socketPath) == 0 else {
            let reason = String(cString: strerror(errno))
            try? await channel.close()
            unlink(temporary)
            throw SocketFile.Error("cannot put the socket in place at \(socketPath): \(reason)")
        }
        logger.info("listening", metadata: ["socket": "\(socketPath)"])
        return channel
    }

    /// Takes over a listening Unix socket someone else bound (a descriptor passed by systemd's socket activation).
    public func adopt(descriptor: CInt) async throws -> any Channel {
        let channel = try await makeBootstrap().withBoundSocket(descriptor).get()
        logger.info("listening on an inherited socket", metadata: ["fd": "\(descriptor)"])
        return channel
    }

    /// Sets up a freshly accepted connection: the varlink handler, or a one-error refusal over the limit.
    func initialize(_ channel: any Channel) throws {
        let settings = currentSettings
        guard let perUID = settings.perUID else {
            guard let id = registry.admit(channel, limit: settings.maxConnections) else {
                logger.warning("connection limit reached, refusing", metadata: ["limit": "\(settings.maxConnections)"])
                try channel.pipeline.syncOperations.addHandler(RejectHandler(error: .tooManyConnections(limit: settings.maxConnections, scope: "total")))
                return
            }
            try addHandler(channel, id: id, settings: settings, peer: .unknown)
            return
        }
        let peer = Self.peerCredentials(channel)
        // Root has no per-uid share: uid 0 can stop the daemon anyway, and every system service shares it. It
        // counts in the total and may take the reserve.
        let accounted = !peer.isRoot
        switch registry.admit(
            channel, uid: accounted ? peer.uid : nil, limits: perUID, total: settings.maxConnections,
            privileged: mayUseReserve(peer))
        {
        case .success(let id):
            try addHandler(channel, id: id, settings: settings, peer: peer, callsPerUID: accounted ? perUID.maxCalls : nil)
        case .failure(let error):
            let (limit, scope) =
                switch error.refusal {
                case .total(let limit): (limit, "total")
                case .perUID(let limit): (limit, "uid")
                }
            // Once per refused connection: a flood of them is rate-limited by the journal, not here.
            logger.notice(
                "connection limit reached, refusing",
                metadata: ["limit": "\(limit)", "scope": "\(scope)", "peer": "\(peer)"])
            try channel.pipeline.syncOperations.addHandler(
                RejectHandler(error: .tooManyConnections(limit: limit, scope: scope)))
        }
    }

    /// `SO_PEERCRED` of a freshly accepted connection, read on its event loop (the initializer runs there, so the
    /// option future is already complete).
    static func peerCredentials(_ channel: any Channel) -> PeerCredentials {
        guard let provider = channel as? SocketOptionProvider else { return .unknown }
        let future: EventLoopFuture<KernelPeerCredentials> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET),
            name: NIOBSDSocket.Option(rawValue: SO_PEERCRED))
        final class Box { var value = PeerCredentials.unknown }
        let box = Box()
        future.assumeIsolated().whenSuccess { box.value = PeerCredentials(uid: $0.uid, gid: $0.gid, pid: $0.pid) }
        return box.value
    }

    private func addHandler(
        _ channel: any Channel, id: UInt64, settings: Settings, peer: PeerCredentials, callsPerUID: Int? = nil
    ) throws {
        // Above the high mark the connection stops reading new calls until the client reads its replies.
        let send = settings.limits.maxSendBuffer
        try channel.syncOptions?.setOption(
            ChannelOptions.writeBufferWaterMark, value: .init(low: send / 8, high: send / 4))
        let handler = VarlinkConnectionHandler(
            connectionID: id, router: router, limits: settings.limits, registry: registry, logger: logger,
            peer: peer, writableUnderLimit: true, callsPerUID: callsPerUID)
        try channel.pipeline.syncOperations.addHandler(handler)
    }

    /// Serves until graceful shutdown, then drains the connections (see the type) and removes the socket.
    public func run() async throws {
        let channel = try await bind()
        try await serve(channel)
    }

    /// Serves a bound listener until graceful shutdown, then stops accepting and drains the connections.
    /// - Parameter removingSocketFile: remove the socket path at the end (false for an adopted socket).
    public func serve(_ channel: any Channel, removingSocketFile: Bool = true) async throws {
        await withGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
        await drain(registry.channels())
        let socketPath = currentSettings.socketPath
        if removingSocketFile { SocketFile.remove(path: socketPath) }
        logger.info("stopped listening", metadata: ["socket": "\(socketPath)"])
    }
}

extension VarlinkServer {
    /// Asks every connection to quiesce (``VarlinkConnectionHandler`` finishes its calls, then closes), waits for
    /// them for at most `drainTimeout`, then closes the rest.
    func drain(_ connections: [any Channel]) async {
        if !connections.isEmpty {
            logger.info("draining connections", metadata: ["connections": "\(connections.count)"])
        }
        for connection in connections { connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        let timeout = drainTimeout
        let logger = self.logger
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for connection in connections { try? await connection.closeFuture.get() }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let drained = await group.next() ?? true
            group.cancelAll()
            guard !drained else { return }
            // The waiting child ends once these are closed (a close future cannot be cancelled).
            let left = connections.filter(\.isActive)
            logger.info("closing connections still busy after the drain", metadata: ["connections": "\(left.count)"])
            for connection in left { connection.close(promise: nil) }
        }
    }
}

/// Answers a connection over the limit with one error, then closes it.
final class RejectHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let error: VarlinkError

    init(error: VarlinkError) { self.error = error }

    func channelActive(context: ChannelHandlerContext) {
        let bytes = VarlinkReply.encode(error: error)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes))).assumeIsolated()
            .whenComplete { _ in context.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
