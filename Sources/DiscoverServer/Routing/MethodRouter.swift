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

    /// A synchronous answer read from the message itself (see ``RouteTable/registerImmediate(_:_:)``).
    struct HotRoute: Sendable {
        /// The method's name, UTF-8.
        let name: [UInt8]
        let method: String
        let answer: @Sendable (ScannedObject, PeerCredentials) -> HotOutcome

        init(method: String, answer: @escaping @Sendable (ScannedObject, PeerCredentials) -> HotOutcome) {
            self.name = Array(method.utf8)
            self.method = method
            self.answer = answer
        }
    }

    enum HotOutcome {
        case answered(ImmediateReply)
        /// The parameters were read and the handler had no synchronous answer (a cache miss).
        case unanswered
        /// The scanner does not read these parameters: the call is decoded the long way.
        case unread
    }

    /// A call decoded, or answered already.
    enum Routed {
        case answered(ImmediateReply)
        case call(VarlinkCall)
    }

    private let routes: [String: Route]
    private let immediate: [String: ImmediateHandler]
    private let hot: [HotRoute]
    /// Parameter types the call scanner reads in one pass, by method.
    let scannable: [String: any ScannableParameters.Type]
    private let logger: Logger

    /// Freezes the routes of `table`.
    public init(_ table: RouteTable, logger: Logger) {
        self.routes = table.routes
        self.immediate = table.immediate
        self.hot = table.hot
        self.scannable = table.scannable
        self.logger = logger
    }

    /// Decodes a call message: in one pass for the methods whose parameters the scanner reads, else with Codable.
    func decode(_ message: ArraySlice<UInt8>) throws(VarlinkError) -> VarlinkCall {
        try VarlinkCall.decode(message, scannable: scannable)
    }

    /// Decodes a call message and, when `answerNow`, gives it its synchronous answer if it has one (a cache hit).
    ///
    /// The hot methods are answered from the message's bytes: the method name compared in place, the parameters
    /// read straight into their type, no ``VarlinkCall`` built. Any other message, or one the scanner does not
    /// read, is decoded and then tried with ``immediateReply(_:peer:)``.
    func route(_ message: ArraySlice<UInt8>, peer: PeerCredentials, answerNow: Bool) throws(VarlinkError) -> Routed {
        var tried = false
        if answerNow, !hot.isEmpty {
            let outcome = message.withUnsafeBufferPointer { bytes -> HotOutcome in
                guard let envelope = VarlinkCallScanner.envelope(bytes), !envelope.more, !envelope.oneway else {
                    return .unread
                }
                for route in hot where route.name.withUnsafeBufferPointer({ envelope.isMethod($0, in: bytes) }) {
                    return route.answer(envelope.parameters(in: bytes), peer)
                }
                return .unread
            }
            switch outcome {
            case .answered(let reply): return .answered(reply)
            case .unanswered: tried = true
            case .unread: break
            }
        }
        let call = try decode(message)
        if answerNow, !tried, let reply = immediateReply(call, peer: peer) { return .answered(reply) }
        return .call(call)
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
