import DNSSD
import DNSSDModel
import DiscoverAPI
import Foundation
import Logging
import WideAreaDiscovery

/// `io.discoverd.Discovery`: the varlink face of ``ServiceDiscovery``.
///
/// The routes unpack parameters, call the facade (which chooses mDNS or unicast DNS and keeps Avahi's thread rule)
/// and build the reply; the error conversion is in `DiscoveryWire.swift`, the sharing of browse streams between
/// calls in ``BrowseFanout``.
public enum DiscoveryMethods {
    /// Registers every method of the interface.
    public static func register(
        into routes: inout RouteTable, discovery: ServiceDiscovery, registrations: RegistrationTable,
        access: AccessControl
    ) {
        // Browse streams with the same parameters share one browse, whose events are encoded once for all calls.
        let fanout = BrowseFanout()
        routes.register(Methods.browse, whenReaderTooSlow: .subscriberTooSlow) { parameters, context in
            let subject = DiscoverySubject(type: parameters.type, name: parameters.domain ?? "", parameter: "interface")
            if context.more {
                let open: BrowseFanout.Source = { sink in
                    try await subject.mapErrors {
                        try await discovery.browse(
                            type: parameters.type, domain: parameters.domain, subtype: parameters.subtype,
                            interface: parameters.interface, resolve: parameters.resolve ?? false, sink: sink)
                    }
                }
                return try await stream(parameters, context, fanout: fanout, source: open)
            }
            let services = try await subject.mapErrors {
                try await discovery.services(
                    type: parameters.type, domain: parameters.domain, subtype: parameters.subtype,
                    interface: parameters.interface, resolve: parameters.resolve ?? false,
                    timeout: .milliseconds(max(1, parameters.timeoutMs ?? 3000)))
            }
            return BrowseReply(services: services)
        }

        routes.register(Methods.resolveService) { parameters, _ in
            let timeout =
                parameters.timeoutMs.map { Duration.milliseconds(max(1, $0)) } ?? ServiceDiscovery.defaultTimeout
            let service = try await DiscoverySubject(type: parameters.type, name: parameters.name).mapErrors {
                try await discovery.resolve(
                    name: parameters.name, type: parameters.type, domain: parameters.domain, timeout: timeout)
            }
            return ResolveServiceReply(service: service)
        }

        routes.register(Methods.advertise, requiresMore: true) { parameters, context in
            try await access.requireAdvertiser(context.peer)
            if let domain = parameters.domain, WideAreaDomain.isUnicast(domain) {
                try await access.requireWideAreaPublisher(context.peer)
            }
            guard (0...65535).contains(parameters.port) else { throw VarlinkError.invalidParameter("port") }
            let subject = DiscoverySubject(type: parameters.type, name: parameters.name ?? "", parameter: "txt")
            let registration = try await subject.mapErrors {
                try await discovery.advertise(
                    name: parameters.name, type: parameters.type, port: parameters.port, txt: parameters.txt ?? [:],
                    subtypes: parameters.subtypes ?? [], domain: parameters.domain, host: parameters.host)
            }
            let id = registration.registrationID
            registrations.add(
                id: id, owner: context.peer.uid, connection: context.connectionID, advertisement: registration)
            // The registration lives as long as this call, which lives as long as its connection.
            let reply: Result<AdvertiseReply, any Error>
            do {
                reply = .success(try await follow(registration, id: id, requestedName: parameters.name, context))
            } catch {
                reply = .failure(error)
            }
            registrations.remove(id: id)
            await discovery.withdraw(registration)
            return try reply.get()
        }

        routes.register(Methods.updateAdvertisement) { parameters, context in
            let registration = try registrations.owned(id: parameters.id, by: context.peer)
            try await DiscoverySubject(name: parameters.id, parameter: "txt").mapErrors {
                try await discovery.updateTXT(of: registration, to: parameters.txt)
            }
            return VarlinkEmpty()
        }

        routes.register(Methods.withdraw) { parameters, context in
            let registration = try registrations.owned(id: parameters.id, by: context.peer)
            if let owner = registrations.connection(of: parameters.id), owner != context.connectionID {
                context.logAdminAction(
                    "registration withdrawn by another connection", ["registration": "\(parameters.id)"])
            }
            await discovery.withdraw(registration)
            return VarlinkEmpty()
        }

        routes.register(Methods.browseTypes) { parameters, _ in
            let types = try await DiscoverySubject(parameter: "domain").mapErrors {
                try await discovery.browseTypes(domain: parameters.domain)
            }
            return BrowseTypesReply(types: types)
        }

        routes.register(Methods.browseDomains) { _, _ in
            BrowseDomainsReply(domains: try await DiscoverySubject().mapErrors { try await discovery.browseDomains() })
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
}
