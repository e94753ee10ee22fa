import DiscoverAPI
import Logging

/// Maps method names to handlers and turns every outcome into exactly one final reply.
///
/// Built once at start-up from a ``RouteTable`` and immutable afterwards, so it is shared by every connection.
public struct MethodRouter: Sendable {
    typealias Handler = @Sendable (VarlinkCall, CallContext) async throws -> [UInt8]
    typealias ImmediateHandler = @Sendable (VarlinkCall, PeerCredentials) -> ImmediateReply?

    struct Route: Sendable {
        var requiresMore: Bool
        /// The final reply of a stream whose reader falls behind (see ``RouteTable/register(_:requiresMore:whenReaderTooSlow:_:)``).
        var readerTooSlow: VarlinkError?
        var handler: Handler
    }

    private let routes: [String: Route]
    private let immediate: [String: ImmediateHandler]
    /// Parameter types the call scanner reads in one pass, by method.
    let scannable: [String: any ScannableParameters.Type]
    private let logger: Logger

    /// Freezes the routes of `table`.
    public init(_ table: RouteTable, logger: Logger) {
        self.routes = table.routes
        self.immediate = table.immediate
        self.scannable = table.scannable
        self.logger = logger
    }

    /// Decodes a call message: in one pass for the methods whose parameters the scanner reads, else with Codable.
    func decode(_ message: ArraySlice<UInt8>) throws(VarlinkError) -> VarlinkCall {
        try VarlinkCall.decode(message, scannable: scannable)
    }

    /// The synchronous answer to a one-shot call, when its method has one and it applies (a cache hit); nil sends
    /// the call to ``dispatch(_:context:)``.
    func immediateReply(_ call: VarlinkCall, peer: PeerCredentials) -> ImmediateReply? {
        guard !call.more, !call.oneway, let handler = immediate[call.method] else { return nil }
        return handler(call, peer)
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
        } catch let error as any VarlinkErrorConvertible {
            return VarlinkReply.encode(error: error.varlinkError)
        } catch is CancellationError {
            return nil
        } catch {
            logger.error("method failed", metadata: ["method": "\(call.method)", "error": "\(error)"])
            return VarlinkReply.encode(error: .internalError(reason: String(describing: error)))
        }
    }

    /// The final reply a streaming call of `method` gets when its reader falls behind, or nil when the method
    /// declares none (the connection is then closed).
    func readerTooSlowError(for method: String) -> VarlinkError? {
        routes[method]?.readerTooSlow
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
