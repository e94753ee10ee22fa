import DNSCore
import DiscoverAPI
import Foundation
import Logging
import NIOConcurrencyHelpers
import Resolver

/// `io.discoverd.Resolver`: the varlink face of ``DNSResolver``.
///
/// The routes here only unpack parameters and call the resolver; the domain-to-wire mapping and the error
/// conversion are in `ResolverWire.swift`.
public enum ResolverMethods {
    /// Settings of the interface that are not the resolver's own; changed live on reload.
    public final class Options: Sendable {
        private let box: NIOLockedValueBox<Bool>

        /// - Parameter optimistic: whether expired answers may be served at all (`[resolver] optimistic`).
        public init(optimistic: Bool) { box = NIOLockedValueBox(optimistic) }

        /// Optimistic DNS for the whole daemon; a caller can only switch it off further.
        public var optimistic: Bool {
            get { box.withLockedValue { $0 } }
            set { box.withLockedValue { $0 = newValue } }
        }
    }

    /// Registers every method of the interface.
    public static func register(
        into routes: inout RouteTable, resolver: DNSResolver, options: Options, access: AccessControl
    ) {
        @Sendable func optimistic(_ requested: Bool?) -> Bool { (requested ?? true) && options.optimistic }

        ResolverCacheHits.register(into: &routes, resolver: resolver, optimistic: optimistic)

        // Upstream queries a call makes count against its caller's uid ([limits] upstream-queries-per-client).
        routes.register(Methods.resolveHTTPS) { parameters, context in
            let port = parameters.port ?? 443
            let optimistic = optimistic(parameters.optimistic)
            return try await DNSResolver.$currentClient.withValue(.uid(context.peer.uid)) {
                guard context.more else {
                    return try await resolver.resolveHTTPS(parameters.name, port: port, optimistic: optimistic).wire
                }
                return try await stream(
                    resolver.resolveHTTPSUpdates(parameters.name, port: port, optimistic: optimistic), context: context,
                    wire: \.wire)
            }
        }

        routes.register(Methods.resolveSVCB) { parameters, context in
            try await DNSResolver.$currentClient.withValue(.uid(context.peer.uid)) {
                try await resolver.resolveSVCB(
                    parameters.name, port: parameters.port, optimistic: optimistic(parameters.optimistic)
                ).wire
            }
        }

        routes.register(Methods.resolveAddresses) { parameters, context in
            let family = (parameters.family ?? .any).domain
            let optimistic = optimistic(parameters.optimistic)
            return try await DNSResolver.$currentClient.withValue(.uid(context.peer.uid)) {
                guard context.more else {
                    return try await resolver.resolveAddresses(parameters.name, family: family, optimistic: optimistic)
                        .wire
                }
                return try await stream(
                    resolver.resolveAddressesUpdates(parameters.name, family: family, optimistic: optimistic),
                    context: context, wire: \.wire)
            }
        }

        // Alt-Svc evidence is the caller's: root's counts for everyone, another user's only for that user.
        routes.register(Methods.connectionPlan) { parameters, context in
            try await DNSResolver.$currentClient.withValue(.uid(context.peer.uid)) {
                try await resolver.connectionPlan(
                    host: parameters.host, port: parameters.port ?? 443, optimistic: optimistic(parameters.optimistic),
                    assumeH3: parameters.assumeH3 ?? false, caller: context.peer.uid
                ).wire
            }
        }

        routes.register(Methods.reportAltSvc) { parameters, context in
            try resolver.reportAltSvc(origin: parameters.origin, header: parameters.header, reporter: context.peer.uid)
                .wire
        }

        routes.register(Methods.flush) { parameters, context in
            try await access.requireAdmin(context.peer)
            let flushed = resolver.flush(parameters.name)
            context.logAdminAction(
                "cache flushed", ["dns.name": "\(parameters.name ?? "(all)")", "flushed": "\(flushed)"])
            return FlushReply(flushed: flushed)
        }
    }

    /// The replies of a `more` call: an expired answer (continues), then the network's (final, with `confirmed`).
    /// Each reply is held until the next one shows whether it is the last; a failed refresh still delivers the
    /// expired answer, then its error.
    private static func stream<Domain: Sendable, Reply: Encodable & Sendable>(
        _ updates: AsyncThrowingStream<Domain, any Error>, context: CallContext, wire: (Domain) -> Reply
    ) async throws -> Reply {
        var held: Reply?
        do {
            for try await update in updates {
                if let held { try context.send(held) }
                held = wire(update)
            }
        } catch let error as ResolverError {
            if let held { try context.send(held) }
            throw error
        }
        guard let held else { throw VarlinkError.resolverTimeout }
        return held
    }
}
