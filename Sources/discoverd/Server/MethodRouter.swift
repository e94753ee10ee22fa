import DiscoverAPI
import Logging

/// Maps method names to handlers and turns every outcome into exactly one final reply.
///
/// Built once at start-up from a ``RouteTable`` and immutable afterwards, so it is shared by every connection.
struct MethodRouter: Sendable {
    typealias Handler = @Sendable (VarlinkCall, CallContext) async throws -> [UInt8]

    struct Route: Sendable {
        var requiresMore: Bool
        var handler: Handler
    }

    private let routes: [String: Route]
    private let logger: Logger

    init(_ table: RouteTable, logger: Logger) {
        self.routes = table.routes
        self.logger = logger
    }

    /// Runs the call and returns its final reply (NUL-terminated), or nil when the call was cancelled.
    func dispatch(_ call: VarlinkCall, context: CallContext) async -> [UInt8]? {
        guard let route = routes[call.method] else {
            return VarlinkReply.encode(error: Self.missingMethodError(call))
        }
        if route.requiresMore && !call.more {
            return VarlinkReply.encode(error: .expectedMore)
        }
        do {
            return try await route.handler(call, context)
        } catch let error as VarlinkError {
            return VarlinkReply.encode(error: error)
        } catch is CancellationError {
            return nil
        } catch {
            logger.error("method failed", metadata: ["method": "\(call.method)", "error": "\(error)"])
            return VarlinkReply.encode(error: .internalError(String(describing: error)))
        }
    }

    /// Which standard error an unrouted method gets: unknown interface, unknown method, or known but not offered.
    static func missingMethodError(_ call: VarlinkCall) -> VarlinkError {
        let interface = String(call.interface)
        guard InterfaceDescriptions.description(of: interface) != nil else { return .interfaceNotFound(interface) }
        guard InterfaceDescriptions.methods(of: interface).contains(String(call.member)) else {
            return .methodNotFound(call.method)
        }
        return .methodNotImplemented(call.method)
    }
}

/// Collects routes while the daemon wires its components together.
struct RouteTable {
    fileprivate var routes: [String: MethodRouter.Route] = [:]

    /// Registers a typed method. For streams, the body sends intermediate replies with ``CallContext/send(_:)``
    /// and returns the last one.
    mutating func register<P, R>(
        _ method: VarlinkMethod<P, R>, requiresMore: Bool = false,
        _ body: @escaping @Sendable (P, CallContext) async throws -> R
    ) {
        routes[method.name] = MethodRouter.Route(requiresMore: requiresMore) { call, context in
            let parameters = try call.parameters(P.self)
            return try VarlinkReply.encode(try await body(parameters, context))
        }
    }
}

extension VarlinkError {
    /// A failure inside the daemon that no interface names; the message is for humans.
    static func internalError(_ reason: String) -> VarlinkError {
        VarlinkError(name: "io.discoverd.Daemon.InternalError", parameters: ["reason": .string(reason)])
    }
}
