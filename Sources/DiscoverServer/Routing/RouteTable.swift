import DiscoverAPI

/// Collects routes while the daemon wires its components together; ``MethodRouter`` freezes them.
public struct RouteTable: Sendable {
    var routes: [String: MethodRouter.Route] = [:]
    /// Methods whose parameters ``VarlinkCallScanner`` can read, with their parameter types.
    var scannable: [String: any ScannableParameters.Type] = [:]
    /// Synchronous answers tried on the event loop before a method's handler runs in a task.
    var immediate: [String: MethodRouter.ImmediateHandler] = [:]
    /// The synchronous answers of methods with scannable parameters, tried on the message itself (no call built).
    var hot: [MethodRouter.HotRoute] = []

    /// An empty table.
    public init() {}

    /// Registers a typed method. For streams, the body sends intermediate replies with ``CallContext/send(_:)``
    /// and returns the last one.
    ///
    /// - Parameters:
    ///   - method: the method's name and wire types.
    ///   - requiresMore: answer calls without `more` with `org.varlink.service.ExpectedMore`.
    ///   - whenReaderTooSlow: the final reply of a stream whose reader lets more than the connection's send-buffer
    ///     limit pile up: the call is cancelled, this error ends its stream and the connection goes on. Without
    ///     one, such a connection is closed.
    ///   - body: the handler; what it throws is answered through ``VarlinkErrorConvertible``.
    public mutating func register<P, R>(
        _ method: VarlinkMethod<P, R>, requiresMore: Bool = false, whenReaderTooSlow: VarlinkError? = nil,
        _ body: @escaping @Sendable (P, CallContext) async throws -> R
    ) {
        if let scannable = P.self as? any ScannableParameters.Type { self.scannable[method.name] = scannable }
        routes[method.name] = MethodRouter.Route(requiresMore: requiresMore, readerTooSlow: whenReaderTooSlow) {
            call, context in
            let parameters = try call.parameters(P.self)
            return try VarlinkReply.encode(try await body(parameters, context))
        }
    }

    /// Registers a synchronous answer for one-shot calls of a method registered with ``register(_:requiresMore:whenReaderTooSlow:_:)``:
    /// `body` runs on the connection's event loop and must not block. When it returns nil (a cache miss, or
    /// parameters it does not handle) the call takes the method's normal handler, in a task, as if `body` did not
    /// exist; so `body` must only answer what the handler would answer the same way.
    public mutating func registerImmediate<P, R>(
        _ method: VarlinkMethod<P, R>, _ body: @escaping @Sendable (P, PeerCredentials) -> ImmediateReply?
    ) {
        addImmediate(method, body)
    }

    /// ``registerImmediate(_:_:)`` for a method whose parameters the call scanner reads: its messages are answered
    /// from their bytes, the method name compared in place and the parameters read straight into `P`.
    public mutating func registerImmediate<P: ScannableParameters, R>(
        _ method: VarlinkMethod<P, R>, _ body: @escaping @Sendable (P, PeerCredentials) -> ImmediateReply?
    ) {
        addImmediate(method, body)
        hot.removeAll { $0.method == method.name }
        hot.append(
            MethodRouter.HotRoute(method: method.name) { parameters, peer in
                guard let parameters = P(scanned: parameters) else { return .unread }
                return body(parameters, peer).map(MethodRouter.HotOutcome.answered) ?? .unanswered
            })
    }

    private mutating func addImmediate<P, R>(
        _ method: VarlinkMethod<P, R>, _ body: @escaping @Sendable (P, PeerCredentials) -> ImmediateReply?
    ) {
        immediate[method.name] = { call, peer in
            // Read by the call scanner (the hot path): cast here, where P is known, not in generic code.
            if let parameters = call.decodedParameters as? P { return body(parameters, peer) }
            guard let parameters = try? call.parameters(P.self) else { return nil }
            return body(parameters, peer)
        }
    }
}
