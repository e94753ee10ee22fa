@_exported import DiscoverAPI
import NIOConcurrencyHelpers
import NIOCore

/// An async client of discoverd.
///
/// One-shot calls share one connection and may run concurrently (the daemon pipelines them and answers
/// in order). Each stream gets a connection of its own, because closing the connection is how varlink
/// ends a call: cancelling the task that iterates a stream ends the call in the daemon too.
///
/// ```swift
/// let client = DiscoverClient()
/// let status = try await client.status()
/// for try await event in client.stream(Methods.browse, BrowseParameters(type: "_tictactoe._tcp")) { ... }
/// ```
public final class DiscoverClient: Sendable {
    /// The socket this client talks to.
    public let socketPath: String
    private let shared = NIOLockedValueBox<Task<VarlinkConnection, any Error>?>(nil)

    /// Creates a client. Connecting happens on the first call.
    /// - Parameter socketPath: the daemon's socket; default by docs/API.md: `$DISCOVERD_SOCKET`, else the
    ///   per-user or system default path.
    public init(socketPath: String? = nil) {
        self.socketPath = SocketPath.clientDefault(explicit: socketPath)
    }

    deinit {
        if let task = shared.withLockedValue({ $0 }) {
            Task { try? await task.value.close() }
        }
    }

    /// Calls a method and returns its reply.
    /// - Throws: ``DiscoverError``: the daemon's error, or `daemonUnreachable` / `connectionClosed`.
    public func call<P, R>(_ method: VarlinkMethod<P, R>, _ parameters: P) async throws -> R {
        let bytes = try VarlinkCall.encode(method: method.name, parameters: parameters)
        let reply = try await sharedCall(bytes)
        return try Self.decode(reply, as: R.self)
    }

    /// Calls a method with `more: true` and yields each reply until the final one.
    ///
    /// The call runs on a connection of its own; ending the iteration (or cancelling its task) closes it.
    public func stream<P, R: Sendable>(_ method: VarlinkMethod<P, R>, _ parameters: P) -> AsyncThrowingStream<R, any Error> {
        let path = socketPath
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    let bytes = try VarlinkCall.encode(method: method.name, parameters: parameters, more: true)
                    let connection = try await VarlinkConnection.connect(path: path)
                    defer { connection.close() }
                    let (replies, repliesContinuation) = AsyncThrowingStream<VarlinkReplyMessage, any Error>.makeStream()
                    connection.stream(bytes, into: repliesContinuation)
                    try await withTaskCancellationHandler {
                        for try await reply in replies {
                            continuation.yield(try Self.decode(reply, as: R.self))
                        }
                    } onCancel: {
                        connection.close()
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Closes the shared connection. Later calls connect again.
    public func close() async {
        let task = shared.withLockedValue { state in
            defer { state = nil }
            return state
        }
        if let connection = try? await task?.value { connection.close() }
    }

    private func sharedCall(_ bytes: [UInt8]) async throws -> VarlinkReplyMessage {
        let connection = try await sharedConnection()
        return try await connection.call(bytes)
    }

    private func sharedConnection() async throws -> VarlinkConnection {
        let path = socketPath
        let task = shared.withLockedValue { state -> Task<VarlinkConnection, any Error> in
            if let existing = state { return existing }
            let fresh = Task { try await VarlinkConnection.connect(path: path) }
            state = fresh
            return fresh
        }
        do {
            let connection = try await task.value
            if connection.isActive { return connection }
        } catch {
            shared.withLockedValue { if $0 == task { $0 = nil } }
            throw error
        }
        // The daemon closed the connection (restart): connect again once.
        shared.withLockedValue { if $0 == task { $0 = nil } }
        let fresh = try await VarlinkConnection.connect(path: path)
        shared.withLockedValue { $0 = Task { fresh } }
        return fresh
    }

    static func decode<R: Decodable>(_ reply: VarlinkReplyMessage, as type: R.Type) throws -> R {
        if let error = reply.varlinkError { throw DiscoverError(error) }
        do {
            return try reply.parameters(R.self)
        } catch {
            throw DiscoverError(code: .protocolError, message: "unexpected reply from discoverd: \(error)")
        }
    }
}

extension DiscoverClient {
    /// `io.discoverd.Daemon.Status`.
    public func status() async throws -> StatusReply {
        try await call(Methods.status, StatusParameters())
    }

    /// `io.discoverd.Daemon.Status` with `more`: a fresh status every `interval`, until the iteration ends.
    public func watchStatus(every interval: Duration = .seconds(1)) -> AsyncThrowingStream<StatusReply, any Error> {
        let milliseconds = max(1, Int(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000))
        return stream(Methods.status, StatusParameters(intervalMs: milliseconds))
    }

    /// `org.varlink.service.GetInfo`.
    public func info() async throws -> ServiceInfo {
        try await call(Methods.getInfo, VarlinkEmpty())
    }

    /// `org.varlink.service.GetInterfaceDescription`: the varlink IDL of an interface.
    public func interfaceDescription(_ interface: String) async throws -> String {
        try await call(Methods.getInterfaceDescription, InterfaceDescriptionParameters(interface: interface)).description
    }

    /// Calls any method with untyped parameters and returns the untyped reply (like `varlinkctl call`).
    public func rawCall(method: String, parameters: [String: JSONValue]) async throws -> JSONValue {
        let bytes = try VarlinkCall.encode(method: method, parameters: parameters)
        return try Self.decode(try await sharedCall(bytes), as: JSONValue.self)
    }

    /// Like ``rawCall(method:parameters:)`` with `more: true`.
    public func rawStream(method: String, parameters: [String: JSONValue]) -> AsyncThrowingStream<JSONValue, any Error> {
        stream(VarlinkMethod<RawParameters, JSONValue>(method), RawParameters(parameters))
    }
}

/// Untyped parameters for ``DiscoverClient/rawStream(method:parameters:)``.
struct RawParameters: VarlinkParameters {
    enum CodingKeys: String, CodingKey, CaseIterable { case _none }
    var values: [String: JSONValue]
    init(_ values: [String: JSONValue]) { self.values = values }
    init(from decoder: any Decoder) throws { values = try [String: JSONValue](from: decoder) }
    func encode(to encoder: any Encoder) throws { try values.encode(to: encoder) }
}
