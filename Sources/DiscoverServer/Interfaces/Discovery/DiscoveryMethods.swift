import DiscoverAPI
import Discovery
import WideAreaDiscovery
import Foundation
import Logging
import NIOConcurrencyHelpers

/// `io.discoverd.Discovery`: the varlink face of ``DiscoveryService``.
///
/// The routes unpack parameters and call the service; the domain-to-wire mapping and the error conversion are in
/// `DiscoveryWire.swift`, the sharing of browse streams in ``BrowseFanout``. The service's synchronous
/// calls wait for Avahi's lock, so they run through ``DiscoveryService/onAvahiThread(_:)``, never on the event loop
/// that runs the call.
public enum DiscoveryMethods {
    /// Registers every method of the interface; calls for a unicast domain go to `wideArea` when given.
    public static func register(
        into routes: inout RouteTable, discovery: DiscoveryService, registrations: RegistrationTable,
        access: AccessControl, wideArea: WideAreaDiscovery? = nil
    ) {
        // Browse streams with the same parameters share one browse, whose events are encoded once for all calls.
        let fanout = BrowseFanout()
        routes.register(Methods.browse, whenReaderTooSlow: .subscriberTooSlow) { parameters, context in
            let subject = DiscoverySubject(type: parameters.type, name: parameters.domain ?? "", parameter: "interface")
            let open: BrowseFanout.Source = {
                try await subject.mapErrors {
                    try await browse(parameters, discovery: discovery, wideArea: wideArea)
                }
            }
            if context.more { return try await stream(parameters, context, fanout: fanout, source: open) }
            let stream = try await open()
            let timeout = Duration.milliseconds(max(1, parameters.timeoutMs ?? 3000))
            return BrowseReply(services: try await collect(stream, timeout: timeout, subject: subject))
        }

        routes.register(Methods.resolveService) { parameters, _ in
            let timeout =
                parameters.timeoutMs.map { Duration.milliseconds(max(1, $0)) } ?? DiscoveryService.defaultTimeout
            let service = try await DiscoverySubject(type: parameters.type, name: parameters.name).mapErrors {
                if let wideArea, let domain = parameters.domain, WideAreaDomain.isUnicast(domain) {
                    return try await wideArea.resolve(name: parameters.name, type: parameters.type, domain: domain)
                }
                return try await discovery.resolve(
                    name: parameters.name, type: parameters.type, domain: parameters.domain, timeout: timeout)
            }
            return ResolveServiceReply(service: service.wire)
        }

        routes.register(Methods.advertise, requiresMore: true) { parameters, context in
            try await access.requireAdvertiser(context.peer)
            if let domain = parameters.domain, WideAreaDomain.isUnicast(domain) {
                try await access.requireWideAreaPublisher(context.peer)
            }
            guard (0...65535).contains(parameters.port) else { throw VarlinkError.invalidParameter("port") }
            let subject = DiscoverySubject(type: parameters.type, name: parameters.name ?? "", parameter: "txt")
            let advertisement: any ServiceRegistration = try await subject.mapErrors {
                if let wideArea, let domain = parameters.domain, WideAreaDomain.isUnicast(domain) {
                    return try wideArea.advertise(
                        name: parameters.name, type: parameters.type, port: parameters.port,
                        txt: parameters.txt ?? [:], subtypes: parameters.subtypes ?? [], domain: domain,
                        host: parameters.host)
                }
                return try await discovery.onAvahiThread {
                    try discovery.advertise(
                        name: parameters.name, type: parameters.type, port: parameters.port,
                        txt: parameters.txt ?? [:], subtypes: parameters.subtypes ?? [], domain: parameters.domain,
                        host: parameters.host)
                }
            }
            let id = advertisement.registrationID
            registrations.add(
                id: id, owner: context.peer.uid, connection: context.connectionID, advertisement: advertisement)
            // The registration lives as long as this call, which lives as long as its connection.
            let reply: Result<AdvertiseReply, any Error>
            do {
                reply = .success(try await follow(advertisement, id: id, requestedName: parameters.name, context))
            } catch {
                reply = .failure(error)
            }
            registrations.remove(id: id)
            _ = try? await discovery.onAvahiThread { advertisement.withdraw() }
            return try reply.get()
        }

        routes.register(Methods.updateAdvertisement) { parameters, context in
            let advertisement = try registrations.owned(id: parameters.id, by: context.peer)
            try await DiscoverySubject(name: parameters.id, parameter: "txt").mapErrors {
                try await discovery.onAvahiThread { try advertisement.updateTXT(parameters.txt) }
            }
            return VarlinkEmpty()
        }

        routes.register(Methods.withdraw) { parameters, context in
            let advertisement = try registrations.owned(id: parameters.id, by: context.peer)
            if let owner = registrations.connection(of: parameters.id), owner != context.connectionID {
                context.logAdminAction(
                    "registration withdrawn by another connection", ["registration": "\(parameters.id)"])
            }
            try await discovery.onAvahiThread { advertisement.withdraw() }
            return VarlinkEmpty()
        }

        routes.register(Methods.browseTypes) { parameters, _ in
            let types = try await DiscoverySubject(parameter: "domain").mapErrors {
                if let wideArea, let domain = parameters.domain, WideAreaDomain.isUnicast(domain) {
                    return try await wideArea.browseTypes(domain: domain)
                }
                return try await discovery.browseTypes(domain: parameters.domain)
            }
            return BrowseTypesReply(types: types)
        }

        routes.register(Methods.browseDomains) { _, _ in
            let local = try await DiscoverySubject().mapErrors { try await discovery.browseDomains() }
            let unicast = await wideArea?.browseDomains() ?? []
            return BrowseDomainsReply(domains: Array(Set(local + unicast)).sorted())
        }
    }

    /// A Browse with `more`: follows the browse shared by every call with the same parameters, started with
    /// `source` when there is none, until the call is cancelled or the browse ends.
    static func stream(
        _ parameters: BrowseParameters, _ context: CallContext, fanout: BrowseFanout,
        source: @escaping BrowseFanout.Source
    ) async throws -> BrowseReply {
        let subject = DiscoverySubject(type: parameters.type, name: parameters.domain ?? "", parameter: "interface")
        try await subject.mapErrors {
            try await fanout.follow(BrowseFanout.Key(parameters), to: context.stream, source: source)
        }
        // Cancelled (the client left, or its reader fell behind), or the discovery service shut down.
        try Task.checkCancellation()
        throw VarlinkError.avahiUnavailable
    }

    /// Starts a browse: through Avahi, or in a unicast domain; without a domain, the link and the unicast browse
    /// domains (RFC 6763 §11) as one stream.
    static func browse(
        _ parameters: BrowseParameters, discovery: DiscoveryService, wideArea: WideAreaDiscovery?
    ) async throws -> AsyncThrowingStream<BrowseEvent, any Error> {
        if let wideArea, let domain = parameters.domain, WideAreaDomain.isUnicast(domain) {
            return try wideArea.browse(
                type: parameters.type, domain: domain, subtype: parameters.subtype, resolve: parameters.resolve ?? false)
        }
        let local = try await discovery.onAvahiThread {
            try discovery.browse(
                type: parameters.type, domain: parameters.domain, subtype: parameters.subtype,
                interface: parameters.interface, resolve: parameters.resolve ?? false)
        }
        guard let wideArea, parameters.domain == nil, parameters.interface == nil else { return local }
        var streams = [local]
        for domain in await wideArea.defaultBrowseDomains() {
            if let unicast = try? wideArea.browse(
                type: parameters.type, domain: domain, subtype: parameters.subtype, resolve: parameters.resolve ?? false)
            {
                streams.append(unicast)
            }
        }
        return MergedBrowse.merge(streams)
    }

    /// Streams an advertisement's events until it fails, is withdrawn, or the call is cancelled.
    static func follow(
        _ advertisement: any ServiceRegistration, id: String, requestedName: String?, _ context: CallContext
    ) async throws -> AdvertiseReply {
        var name = requestedName ?? ""
        for await event in advertisement.events {
            switch event {
            case .registered(let registered):
                name = registered
                try context.send(AdvertiseReply(event: .registered, id: id, name: registered))
            case .renamed(let renamed):
                name = renamed
                try context.send(AdvertiseReply(event: .renamed, id: id, name: renamed))
            case .failed(let error):
                return AdvertiseReply(event: .failed, id: id, name: name, error: error.message)
            }
        }
        try Task.checkCancellation()
        return AdvertiseReply(event: .withdrawn, id: id, name: name)
    }

    /// The services present once Avahi says all-for-now, or when `timeout` passes.
    static func collect(
        _ stream: AsyncThrowingStream<BrowseEvent, any Error>, timeout: Duration, subject: DiscoverySubject
    ) async throws -> [DiscoverAPI.Service] {
        let found = NIOLockedValueBox([String: DiscoverAPI.Service]())
        try await subject.mapErrors {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await event in stream {
                        switch event {
                        case .added(let service), .changed(let service):
                            found.withLockedValue { $0[service.key] = service.wire }
                        case .removed(let service):
                            _ = found.withLockedValue { $0.removeValue(forKey: service.key) }
                        case .allForNow:
                            return
                        }
                    }
                }
                group.addTask { try await Task.sleep(for: timeout) }
                try await group.next()
                group.cancelAll()
            }
        }
        return found.withLockedValue { $0.values.sorted { ($0.name, $0.domain) < ($1.name, $1.domain) } }
    }
}
