import DiscoverAPI
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The varlink listener: owns the socket file, accepts connections up to the limit, and closes them all
/// on graceful shutdown.
final class VarlinkServer: ServiceLifecycle.Service, Sendable {
    struct Settings: Sendable {
        var socketPath: String
        var maxConnections: Int
        var limits: VarlinkConnectionHandler.Limits
        /// A listening socket passed by socket activation, served instead of binding `socketPath` (then only its
        /// name in logs): the server neither creates nor removes the socket file.
        var boundSocket: CInt? = nil
    }

    private let settings: Settings
    private let router: MethodRouter
    private let logger: Logger
    private let group: any EventLoopGroup
    private let registry: ConnectionRegistry

    init(
        settings: Settings, router: MethodRouter, registry: ConnectionRegistry, group: any EventLoopGroup,
        logger: Logger
    ) {
        self.settings = settings
        self.router = router
        self.registry = registry
        self.group = group
        self.logger = logger
    }

    /// Binds the socket. Separate from `run` so start-up errors surface before the daemon reports ready.
    func bind() async throws -> any Channel {
        if settings.boundSocket == nil { try SocketFile.prepare(path: settings.socketPath) }
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 1024)
            // A client may send its calls and shut down its write side (`echo ... | socat`): answer them all.
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            // Above the high mark the connection stops reading new calls until the client reads its replies.
            .childChannelOption(
                ChannelOptions.writeBufferWaterMark,
                value: .init(low: settings.limits.maxSendBuffer / 8, high: settings.limits.maxSendBuffer / 4))
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture { try self.initialize(channel) }
            }
        if let socket = settings.boundSocket {
            let channel = try await bootstrap.withBoundSocket(socket).get()
            logger.info("listening on the passed socket", metadata: ["socket": "\(settings.socketPath)"])
            return channel
        }
        // Bind under a temporary name, set the mode, then rename into place: clients never see the socket
        // before it is mode 0666.
        let directory = (settings.socketPath as NSString).deletingLastPathComponent
        let temporary = directory + "/.d\(getpid())"
        guard temporary.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw SocketFile.Error("socket directory path is too long: \(directory)")
        }
        unlink(temporary)
        let channel = try await bootstrap.bind(unixDomainSocketPath: temporary).get()
        guard chmod(temporary, 0o666) == 0, rename(temporary, settings.socketPath) == 0 else {
            let reason = String(cString: strerror(errno))
            try? await channel.close()
            unlink(temporary)
            throw SocketFile.Error("cannot put the socket in place at \(settings.socketPath): \(reason)")
        }
        logger.info("listening", metadata: ["socket": "\(settings.socketPath)"])
        return channel
    }

    private func initialize(_ channel: any Channel) throws {
        guard let id = registry.admit(channel, limit: settings.maxConnections) else {
            logger.warning("connection limit reached, refusing", metadata: ["limit": "\(settings.maxConnections)"])
            try channel.pipeline.syncOperations.addHandler(RejectHandler(limit: settings.maxConnections))
            return
        }
        let handler = VarlinkConnectionHandler(
            connectionID: id, router: router, limits: settings.limits, registry: registry, logger: logger)
        try channel.pipeline.syncOperations.addHandler(handler)
    }

    /// Serves until graceful shutdown, then closes the listener and every connection and removes the socket.
    func run() async throws {
        let channel = try await bind()
        try await serve(channel)
    }

    func serve(_ channel: any Channel) async throws {
        await withGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
        for child in registry.channels() { try? await child.close() }
        if settings.boundSocket == nil { SocketFile.remove(path: settings.socketPath) }
        logger.info("stopped listening", metadata: ["socket": "\(settings.socketPath)"])
    }
}

/// The open connections and live streams, shared by the listener and `Daemon.Status`.
final class ConnectionRegistry: Sendable {
    private struct State {
        var nextID: UInt64 = 1
        var channels: [UInt64: any Channel] = [:]
        var streams = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Registers a new connection and returns its id, or nil when `limit` connections are open.
    func admit(_ channel: any Channel, limit: Int) -> UInt64? {
        state.withLockedValue { state in
            guard state.channels.count < limit else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.channels[id] = channel
            return id
        }
    }

    func remove(_ id: UInt64) { _ = state.withLockedValue { $0.channels.removeValue(forKey: id) } }
    func channels() -> [any Channel] { state.withLockedValue { Array($0.channels.values) } }
    var connectionCount: Int { state.withLockedValue { $0.channels.count } }
    func addStreams(_ delta: Int) { state.withLockedValue { $0.streams += delta } }
    var streamCount: Int { state.withLockedValue { $0.streams } }
}

/// Answers a connection over the limit with one error, then closes it.
private final class RejectHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let limit: Int

    init(limit: Int) { self.limit = limit }

    func channelActive(context: ChannelHandlerContext) {
        let bytes = VarlinkReply.encode(error: .tooManyConnections(limit: limit))
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes))).assumeIsolated()
            .whenComplete { _ in context.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// The socket file: created in its directory, never stolen from a live daemon.
enum SocketFile {
    struct Error: Swift.Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Creates the directory and removes a stale socket. Fails if a live daemon holds the path.
    static func prepare(path: String) throws {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw Error("socket path is too long (\(path.utf8.count) bytes; Unix sockets allow 107): \(path)")
        }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw Error("cannot create socket directory \(directory): \(error.localizedDescription)")
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw Error("\(path) exists and is not a socket; refusing to replace it")
        }
        if isListening(path: path) {
            throw Error("another discoverd is already listening on \(path)")
        }
        unlink(path)
    }

    /// Whether something accepts connections on the socket.
    static func isListening(path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1)) + [0]
            raw.copyBytes(from: bytes)
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    static func remove(path: String) {
        var info = stat()
        if lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK { unlink(path) }
    }
}
