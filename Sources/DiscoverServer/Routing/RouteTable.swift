import DiscoverAPI

/// Collects routes while the daemon wires its components together; ``MethodRouter`` freezes them.
public struct RouteTable: Sendable {
    var routes: [String: MethodRouter.Route] = [:]

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
        routes[method.name] = MethodRouter.Route(requiresMore: requiresMore, readerTooSlow: whenReaderTooSlow) {
            call, context in
            let parameters = try call.parameters(P.self)
            return try VarlinkReply.encode(try await body(parameters, context))
        }
    }
}
