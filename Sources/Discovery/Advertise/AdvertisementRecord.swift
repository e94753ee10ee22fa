import CAvahi
import DNSSDModel
import Logging

/// What an advertisement publishes, validated.
struct AdvertisementSpec: Sendable {
    var requestedName: String?
    var type: String
    var port: UInt16
    var txt: TXTRecord
    /// Full subtype names for Avahi, e.g. `_printer._sub._http._tcp`.
    var subtypes: [String]
    var domain: String?
    var host: String?
}

/// The live state of one advertisement: its entry group, current name and event stream.
///
/// Registration follows Avahi's rules: register when the client is RUNNING; on a collision pick
/// `avahi_alternative_service_name` and register again; when avahi-daemon restarts, register again under the
/// requested name.
final class AdvertisementRecord: @unchecked Sendable {
    // @unchecked Sendable: all mutable state is only touched with the poll lock held (`withLocked`, Avahi callbacks
    // and client events); `id`, `client` and `logger` are immutable.
    static let maximumRenames = 32

    let id: UInt64
    private let client: AvahiClientHandle
    private let logger: Logger
    private(set) var spec: AdvertisementSpec
    private let continuation: AsyncStream<AdvertisementEvent>.Continuation
    private var group: EntryGroupHandle?
    /// The name being registered (after renames).
    private var currentName: String?
    /// The last name reported to the owner (`registered` / `renamed`).
    private(set) var announcedName: String?
    private(set) var isEnded = false
    var onEnd: ((UInt64) -> Void)?

    init(
        id: UInt64,
        spec: AdvertisementSpec,
        client: AvahiClientHandle,
        logger: Logger,
        continuation: AsyncStream<AdvertisementEvent>.Continuation
    ) {
        self.id = id
        self.spec = spec
        self.client = client
        var logger = logger
        logger[metadataKey: "dnssd.type"] = "\(spec.type)"
        logger[metadataKey: "advertisement"] = "\(id)"
        self.logger = logger
        self.continuation = continuation
    }

    // MARK: - Lock held

    /// Creates the entry group and commits the service under the requested name (renamed on a local conflict).
    /// - Throws: `avahiUnavailable` unless avahi-daemon is running, or the Avahi error.
    func register() throws(DNSSDError) {
        guard !self.isEnded, self.group == nil else { return }
        let avahiClient = try self.client.runningClient()
        // After an avahi-daemon restart, come back under the name the network last saw (after collision
        // renames), so same-named advertisements do not swap names.
        var name = self.announcedName ?? self.spec.requestedName ?? ""
        if self.announcedName == nil && self.spec.requestedName == nil {
            guard let host = avahi_client_get_host_name(avahiClient) else {
                throw DNSSDError.fromAvahi(avahi_client_errno(avahiClient), "cannot read the host name")
                    ?? DNSSDError(.avahiFailure, "cannot read the host name")
            }
            name = String(cString: host)
        }
        let group = try EntryGroupHandle(client: self.client) { [weak self] event in
            self?.handleGroup(event)
        }
        self.group = group
        do {
            try self.fill(group, startingWith: name)
        } catch {
            group.close()
            self.group = nil
            throw error
        }
    }

    /// Withdraws the records but keeps the advertisement, to register again when Avahi is back.
    func suspend() {
        self.group?.close()
        self.group = nil
        self.currentName = nil
    }

    /// Re-registers after avahi-daemon came back; failures end the advertisement with `failed`.
    func resume() {
        do {
            try self.register()
        } catch {
            self.fail(error)
        }
    }

    /// Replaces the TXT record (published at once if registered).
    func updateTXT(_ txt: TXTRecord) throws(DNSSDError) {
        guard !self.isEnded else {
            throw DNSSDError(.notFound, "the advertisement was withdrawn or failed")
        }
        if let group = self.group, let name = self.currentName {
            try group.updateTXT(name: name, type: self.spec.type, domain: self.spec.domain, txt: txt)
        }
        self.spec.txt = txt
    }

    /// Withdraws for good and ends the event stream.
    func end() {
        guard !self.isEnded else { return }
        self.isEnded = true
        self.group?.close()
        self.group = nil
        self.continuation.finish()
        self.onEnd?(self.id)
        self.onEnd = nil
    }

    private func fail(_ error: DNSSDError) {
        guard !self.isEnded else { return }
        self.logger.info("advertisement failed", metadata: ["error": "\(error)"])
        self.continuation.yield(.failed(error))
        self.end()
    }

    /// Adds the service under `name`, or the next alternative name while the name is taken locally, and commits.
    private func fill(_ group: EntryGroupHandle, startingWith name: String) throws(DNSSDError) {
        var name = name
        for _ in 0...AdvertisementRecord.maximumRenames {
            do {
                try group.addService(
                    name: name,
                    type: self.spec.type,
                    domain: self.spec.domain,
                    host: self.spec.host,
                    port: self.spec.port,
                    txt: self.spec.txt,
                    subtypes: self.spec.subtypes
                )
                self.currentName = name
                try group.commit()
                return
            } catch  where error.code == .nameConflict {
                let next = AdvertisementRecord.alternativeName(name)
                self.logger.info(
                    "name in use; trying an alternative",
                    metadata: ["dnssd.name": "\(name)", "dnssd.alternative": "\(next)"]
                )
                name = next
                try group.reset()
            }
        }
        throw DNSSDError(.nameConflict, "no free name after \(AdvertisementRecord.maximumRenames) renames")
    }

    /// `avahi_alternative_service_name`: "Foo" → "Foo #2" → "Foo #3" …
    static func alternativeName(_ name: String) -> String {
        guard let next = avahi_alternative_service_name(name) else { return name + " #2" }
        defer { avahi_free(next) }
        return String(cString: next)
    }

    private func handleGroup(_ event: EntryGroupEvent) {
        guard !self.isEnded, let group = self.group else { return }
        switch event.state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            guard let name = self.currentName else { return }
            self.logger.info("service registered", metadata: ["dnssd.name": "\(name)"])
            if self.announcedName == nil {
                self.continuation.yield(.registered(name: name))
            } else if self.announcedName != name {
                self.continuation.yield(.renamed(name: name))
            }
            self.announcedName = name
        case AVAHI_ENTRY_GROUP_COLLISION:
            // Another host owns the name (found while probing or later): withdraw, rename, register again.
            let next = AdvertisementRecord.alternativeName(self.currentName ?? self.spec.requestedName ?? "service")
            self.logger.info("name collision; renaming", metadata: ["dnssd.alternative": "\(next)"])
            do {
                try group.reset()
                try self.fill(group, startingWith: next)
            } catch {
                self.fail(error)
            }
        case AVAHI_ENTRY_GROUP_FAILURE:
            self.fail(event.error ?? DNSSDError(.avahiFailure, "registration failed"))
        default:
            break
        }
    }
}
