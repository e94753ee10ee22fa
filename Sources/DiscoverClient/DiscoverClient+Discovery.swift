import DNSSDModel
import NIOConcurrencyHelpers

extension DiscoverClient {
    /// Browses for services of a type until the iterating task ends it (like NWBrowser). The events are the
    /// library's own (`DNSSDModel.BrowseEvent`), so code written against `DiscoveryService` reads the same.
    ///
    /// ```swift
    /// for try await change in client.browse("_tictactoe._tcp", resolve: true) { ... }
    /// ```
    public func browse(
        _ type: String, domain: String? = nil, subtype: String? = nil, interface: String? = nil, resolve: Bool = false
    ) -> AsyncThrowingStream<BrowseEvent, any Error> {
        let replies = stream(
            Methods.browse,
            BrowseParameters(type: type, domain: domain, subtype: subtype, interface: interface, resolve: resolve))
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await reply in replies {
                        switch (reply.event, reply.service) {
                        case (.added?, let service?): continuation.yield(.added(service))
                        case (.removed?, let service?): continuation.yield(.removed(service))
                        case (.changed?, let service?): continuation.yield(.changed(service))
                        case (.allForNow?, _): continuation.yield(.allForNow)
                        default: continue
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The services present once the network has answered (all-for-now), or after `timeoutMs`.
    public func services(
        ofType type: String, domain: String? = nil, resolve: Bool = true, timeoutMs: Int? = nil
    ) async throws -> [DNSSDService] {
        try await call(
            Methods.browse, BrowseParameters(type: type, domain: domain, resolve: resolve, timeoutMs: timeoutMs)
        ).services ?? []
    }

    /// Resolves one service instance (host, port, addresses, TXT).
    public func resolveService(name: String, type: String, domain: String? = nil, timeoutMs: Int? = nil)
        async throws -> DNSSDService
    {
        try await call(
            Methods.resolveService,
            ResolveServiceParameters(name: name, type: type, domain: domain, timeoutMs: timeoutMs)
        ).service
    }

    /// Advertises a service; returns once it is registered. The advertisement lives as long as the returned
    /// object (or until ``ServiceAdvertisement/withdraw()``), like a `DNSServiceRef` or an `NWListener`.
    /// A `nil` TXT value is a boolean attribute (`key` without `=`, RFC 6763 §6.4).
    /// - Throws: ``DiscoverError`` (`invalidServiceType`, `invalidServiceName`, `avahiUnavailable`, ...).
    public func advertise(
        name: String? = nil, type: String, port: Int, txt: [String: String?] = [:], subtypes: [String] = [],
        domain: String? = nil, host: String? = nil
    ) async throws -> ServiceAdvertisement {
        let bytes = try VarlinkCall.encode(
            method: Methods.advertise.name,
            parameters: AdvertiseParameters(
                name: name, type: type, port: port, txt: txt.isEmpty ? nil : txt,
                subtypes: subtypes.isEmpty ? nil : subtypes, domain: domain, host: host),
            more: true)
        let connection = try await VarlinkConnection.connect(path: socketPath)
        let (replies, repliesContinuation) = AsyncThrowingStream<VarlinkReplyMessage, any Error>.makeStream()
        connection.stream(bytes, into: repliesContinuation)
        let (events, eventsContinuation) = AsyncThrowingStream<AdvertiseReply, any Error>.makeStream()
        let currentName = NIOLockedValueBox("")
        // One task reads every reply: the first answers this call, the rest become `events`.
        let first: AdvertiseReply
        do {
            first = try await withCheckedThrowingContinuation { (firstReply: CheckedContinuation<AdvertiseReply, any Error>) in
                Task {
                    var waiting: CheckedContinuation<AdvertiseReply, any Error>? = firstReply
                    do {
                        for try await message in replies {
                            let reply = try Self.decode(message, as: AdvertiseReply.self)
                            currentName.withLockedValue { $0 = reply.name }
                            if let pending = waiting {
                                waiting = nil
                                pending.resume(returning: reply)
                            } else {
                                eventsContinuation.yield(reply)
                            }
                        }
                        waiting?.resume(
                            throwing: DiscoverError(code: .connectionClosed, message: "discoverd closed the connection"))
                        eventsContinuation.finish()
                    } catch {
                        if let pending = waiting { pending.resume(throwing: error) }
                        eventsContinuation.finish(throwing: error)
                    }
                }
            }
            guard first.event == .registered else {
                throw DiscoverError(
                    code: .nameConflict, parameters: ["name": .string(first.name)],
                    message: "advertisement failed: \(first.error ?? first.event.rawValue)")
            }
        } catch {
            connection.close()
            throw error
        }
        return ServiceAdvertisement(id: first.id, connection: connection, name: currentName, events: events)
    }

    /// Replaces the TXT record of an advertisement (owner or root only); `nil` values are boolean attributes.
    public func updateAdvertisement(id: String, txt: [String: String?]) async throws {
        _ = try await call(Methods.updateAdvertisement, UpdateAdvertisementParameters(id: id, txt: txt))
    }

    /// Withdraws an advertisement by id (owner or root only).
    public func withdraw(id: String) async throws {
        _ = try await call(Methods.withdraw, WithdrawParameters(id: id))
    }

    /// The service types seen in a domain.
    public func serviceTypes(domain: String? = nil) async throws -> [String] {
        try await call(Methods.browseTypes, BrowseTypesParameters(domain: domain)).types
    }

    /// The browse domains Avahi knows.
    public func browseDomains() async throws -> [String] {
        try await call(Methods.browseDomains, VarlinkEmpty()).domains
    }
}

/// A registered advertisement. It is withdrawn when this object is released or ``withdraw()`` is called.
public final class ServiceAdvertisement: Sendable {
    /// The daemon's id for this registration (for `updateAdvertisement` and `withdraw` from elsewhere).
    public let id: String
    private let connection: VarlinkConnection
    private let state: NIOLockedValueBox<String>
    /// Later events: `renamed` after a collision, then `failed` or `withdrawn`. Meant for one consumer.
    public let events: AsyncThrowingStream<AdvertiseReply, any Error>

    init(
        id: String, connection: VarlinkConnection, name: NIOLockedValueBox<String>,
        events: AsyncThrowingStream<AdvertiseReply, any Error>
    ) {
        self.id = id
        self.connection = connection
        self.state = name
        self.events = events
    }

    /// The name as registered (after any collision rename seen on `events`).
    public var name: String { state.withLockedValue { $0 } }

    /// Withdraws the advertisement (closes its connection).
    public func withdraw() { connection.close() }

    deinit { connection.close() }
}
