import DiscoverAPI
import Discovery
import Foundation
import Logging
import NIOConcurrencyHelpers

/// `io.discoverd.Discovery`: the varlink face of ``DiscoveryService``.
enum DiscoveryMethods {
    static func register(
        into routes: inout RouteTable, discovery: DiscoveryService, registrations: RegistrationTable, state: DaemonState
    ) {
        // Every subscriber of a browse gets the same event: encode it once for all of them.
        let encodedEvents = EncodedEventCache()
        routes.register(Methods.browse) { parameters, context in
            let subject = DiscoverySubject(type: parameters.type, name: parameters.domain ?? "", parameter: "interface")
            let stream = try await mapErrors(subject) {
                try discovery.browse(
                    type: parameters.type, domain: parameters.domain, subtype: parameters.subtype,
                    interface: parameters.interface, resolve: parameters.resolve ?? false)
            }
            if context.more {
                do {
                    for try await event in stream { context.send(encoded: try encodedEvents.bytes(for: event)) }
                } catch let error as DiscoveryError {
                    throw error.varlink(subject)
                }
                // The stream only ends when the discovery service shuts down.
                throw VarlinkError.avahiUnavailable
            }
            let timeout = Duration.milliseconds(max(1, parameters.timeoutMs ?? 3000))
            return BrowseReply(services: try await collect(stream, timeout: timeout, subject: subject))
        }

        routes.register(Methods.resolveService) { parameters, _ in
            let timeout = parameters.timeoutMs.map { Duration.milliseconds(max(1, $0)) } ?? DiscoveryService.defaultTimeout
            let service = try await mapErrors(DiscoverySubject(type: parameters.type, name: parameters.name)) {
                try await discovery.resolve(name: parameters.name, type: parameters.type, domain: parameters.domain, timeout: timeout)
            }
            return ResolveServiceReply(service: service.wire)
        }

        routes.register(Methods.advertise, requiresMore: true) { parameters, context in
            if let group = state.configuration.advertiseGroup, !context.peer.isRootOrMember(of: group) {
                throw VarlinkError.permissionDenied
            }
            guard (0...65535).contains(parameters.port) else { throw VarlinkError.invalidParameter("port") }
            let subject = DiscoverySubject(type: parameters.type, name: parameters.name ?? "", parameter: "txt")
            let advertisement = try await mapErrors(subject) {
                try discovery.advertise(
                    name: parameters.name, type: parameters.type, port: parameters.port, txt: parameters.txt ?? [:],
                    subtypes: parameters.subtypes ?? [], domain: parameters.domain, host: parameters.host)
            }
            let id = String(advertisement.id)
            registrations.add(id: id, owner: context.peer.uid, connection: context.connectionID, advertisement: advertisement)
            // The registration lives as long as this call, which lives as long as its connection.
            defer {
                registrations.remove(id: id)
                advertisement.withdraw()
            }
            var name = parameters.name ?? ""
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

        routes.register(Methods.updateAdvertisement) { parameters, context in
            let advertisement = try registrations.owned(id: parameters.id, by: context.peer)
            try await mapErrors(DiscoverySubject(name: parameters.id, parameter: "txt")) {
                try advertisement.updateTXT(parameters.txt)
            }
            return VarlinkEmpty()
        }

        routes.register(Methods.withdraw) { parameters, context in
            let advertisement = try registrations.owned(id: parameters.id, by: context.peer)
            if let owner = registrations.connection(of: parameters.id), owner != context.connectionID {
                context.logAdminAction(
                    "registration withdrawn by another connection", ["registration": "\(parameters.id)"])
            }
            advertisement.withdraw()
            return VarlinkEmpty()
        }

        routes.register(Methods.browseTypes) { parameters, _ in
            let types = try await mapErrors(DiscoverySubject(parameter: "domain")) {
                try await discovery.browseTypes(domain: parameters.domain)
            }
            return BrowseTypesReply(types: types)
        }

        routes.register(Methods.browseDomains) { _, _ in
            BrowseDomainsReply(domains: try await mapErrors(DiscoverySubject()) { try await discovery.browseDomains() })
        }
    }

    /// The services present once Avahi says all-for-now, or when `timeout` passes.
    static func collect(
        _ stream: AsyncThrowingStream<BrowseEvent, any Error>, timeout: Duration, subject: DiscoverySubject
    ) async throws -> [DiscoverAPI.Service] {
        let found = NIOLockedValueBox([String: DiscoverAPI.Service]())
        do {
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
        } catch let error as DiscoveryError {
            throw error.varlink(subject)
        }
        return found.withLockedValue { $0.values.sorted { ($0.name, $0.domain) < ($1.name, $1.domain) } }
    }

    static func mapErrors<T>(_ subject: DiscoverySubject, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DiscoveryError {
            throw error.varlink(subject)
        }
    }
}

/// The wire bytes of recent browse events, so a thousand subscribers of one type cost one encoding per event.
final class EncodedEventCache: Sendable {
    private static let capacity = 256
    private let entries = NIOLockedValueBox([BrowseEvent: [UInt8]]())

    func bytes(for event: BrowseEvent) throws -> [UInt8] {
        if let cached = entries.withLockedValue({ $0[event] }) { return cached }
        let bytes = try VarlinkReply.encode(event.wire, continues: true)
        entries.withLockedValue { entries in
            // Events are short-lived: when full, start over rather than track recency.
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[event] = bytes
        }
        return bytes
    }
}

/// Advertisements made over the API, by id, with the uid that made them (API.md: only the owner or root may
/// update or withdraw).
final class RegistrationTable: Sendable {
    private struct Entry {
        var owner: UInt32
        var connection: UInt64
        var advertisement: Advertisement
    }

    private let entries = NIOLockedValueBox([String: Entry]())

    func add(id: String, owner: UInt32, connection: UInt64, advertisement: Advertisement) {
        entries.withLockedValue { $0[id] = Entry(owner: owner, connection: connection, advertisement: advertisement) }
    }

    /// The connection that made registration `id`.
    func connection(of id: String) -> UInt64? { entries.withLockedValue { $0[id]?.connection } }

    func remove(id: String) {
        _ = entries.withLockedValue { $0.removeValue(forKey: id) }
    }

    var count: Int { entries.withLockedValue { $0.count } }

    /// The advertisement, if `peer` owns it or is root.
    func owned(id: String, by peer: PeerCredentials) throws(VarlinkError) -> Advertisement {
        guard let entry = entries.withLockedValue({ $0[id] }) else { throw .notFound(id) }
        guard peer.isRoot || peer.uid == entry.owner else { throw .permissionDenied }
        return entry.advertisement
    }
}

/// What a Discovery call was about, to name it in errors.
struct DiscoverySubject {
    var type: String = ""
    var name: String = ""
    /// The parameter an `invalidParameter` error is about.
    var parameter: String = "parameters"
}

extension DiscoveryError {
    /// The varlink error of API.md for this error.
    func varlink(_ subject: DiscoverySubject) -> VarlinkError {
        switch code {
        case .invalidServiceType: return .invalidServiceType(subject.type, reason: message)
        case .invalidName: return .invalidServiceName(subject.name, reason: message)
        case .notFound: return .notFound(subject.name)
        case .timeout: return .discoveryTimeout
        case .nameConflict: return .nameConflict(subject.name)
        case .invalidParameter: return .invalidParameter(subject.parameter)
        case .subscriberTooSlow: return VarlinkError(name: "io.discoverd.Discovery.SubscriberTooSlow")
        default: return .avahiUnavailable
        }
    }
}

extension Discovery.Service {
    var key: String { "\(name)\u{0}\(type)\u{0}\(domain)" }

    var wire: DiscoverAPI.Service {
        DiscoverAPI.Service(
            name: name, type: type, domain: domain, interfaces: interfaces, host: host, port: port,
            addresses: addresses, txt: txt, txtRaw: txtRaw.map { $0.map { Data($0).base64EncodedString() } })
    }
}

extension BrowseEvent {
    var wire: BrowseReply {
        switch self {
        case .added(let service): BrowseReply(event: .added, service: service.wire)
        case .removed(let service): BrowseReply(event: .removed, service: service.wire)
        case .changed(let service): BrowseReply(event: .changed, service: service.wire)
        case .allForNow: BrowseReply(event: .allForNow)
        }
    }
}
