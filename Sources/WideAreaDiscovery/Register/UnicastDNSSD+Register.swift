import DNSCore
import DNSSDModel
import Foundation
import Logging

extension UnicastDNSSD {
    /// Registers a service in the unicast `domain` by DNS UPDATE signed with the domain's TSIG key.
    ///
    /// Validates everything first and returns at once; `events` then says `registered` (with the final name) or
    /// `failed` (the error names the rcode: REFUSED, NOTAUTH, BADSIG, ...).
    /// - Parameters:
    ///   - host: the SRV target; nil publishes `HOSTNAME.DOMAIN` with this machine's non-link-local addresses.
    /// - Throws: `DNSSDError` for bad arguments; ``WideAreaError`` `noKey` when no key is configured for the
    ///   domain.
    public func advertise(
        name: String?, type: String, port: Int, txt: [String: String?], subtypes: [String], domain: String,
        host: String?
    ) throws -> WideAreaRegistration {
        let instance = name ?? Self.hostName()
        try ServiceValidation.instanceName(instance)
        let parsed = try ServiceValidation.serviceType(type)
        let validPort = try ServiceValidation.port(port)
        let validTXT = try TXTRecord(validating: txt)
        let labels = try subtypes.map { (subtype) throws(DNSSDError) in
            try ServiceValidation.subtype(subtype, of: parsed.string)
        }
        try ServiceValidation.domain(domain)
        if let host { try ServiceValidation.hostName(host) }
        let normalized = WideAreaDomain.normalized(domain)
        let settings = self.settings
        guard let key = settings.keys.key(for: normalized) else {
            throw WideAreaError(.noKey, "no TSIG key for \(normalized): set [wide-area] key")
        }
        let targetHost = host.map(WideAreaDomain.normalized) ?? "\(Self.hostName().lowercased()).\(normalized)"
        let plan = RegistrationPlan(
            instance: instance, type: parsed.string, domain: normalized, zone: normalized, port: validPort,
            txt: validTXT.strings, subtypes: labels, host: targetHost,
            addresses: host == nil ? Self.publishableAddresses() : [], ttl: settings.registrationTTL)
        let id = "wa-\(counter.add(1, ordering: .relaxed).newValue)"
        let locator = UpdateServerLocator(source: source, configured: settings.updateServer)
        let registration = WideAreaRegistration(id: id, plan: plan, locator: locator, key: key, owner: self)
        hostUsers.withLock { $0[targetHost, default: []].insert(id) }
        registration.start()
        return registration
    }

    /// Sends one UPDATE for `plan`'s zone.
    func sendUpdate(
        _ sections: (prerequisites: [UpdateRecord], updates: [UpdateRecord]), plan: RegistrationPlan,
        target: UpdateTarget, key: TSIGKey
    ) async throws(WideAreaError) -> UpdateMessage.Reply {
        let settings = self.settings
        let message = try UpdateMessage(
            zone: WideAreaDomain.labels(of: target.zone), prerequisites: sections.prerequisites,
            updates: sections.updates, lease: settings.registrationTTL * 10, key: key)
        let client = UpdateClient(attempts: settings.updateAttempts, timeout: settings.updateTimeout, logger: logger)
        return try await client.send(message, to: target.server)
    }

    /// The error for an UPDATE answered with `rcode`.
    func rejection(_ rcode: String, plan: RegistrationPlan, target: UpdateTarget) -> WideAreaError {
        WideAreaError(
            .updateRejected,
            "update server \(target.server) answered \(rcode) to the registration of \(plan.instance).\(plan.type)."
                + "\(plan.domain) (zone \(target.zone)); nothing was registered",
            rcode: rcode)
    }

    /// Forgets a registration; true when it was the last of ours publishing `host`'s addresses.
    @discardableResult
    func finished(id: String, host: String) -> Bool {
        hostUsers.withLock { users in
            users[host]?.remove(id)
            if users[host]?.isEmpty ?? true {
                users[host] = nil
                return true
            }
            return false
        }
    }

    /// Runs a deletion in a task that ``shutdown()`` waits for; the task drops itself from `pending` when done
    /// (it is stored before it can run that far: it waits for the lock held while it is stored).
    func track(_ deletion: @escaping @Sendable () async -> Void) {
        let number = counter.add(1, ordering: .relaxed).newValue
        pending.withLock { pending in
            pending[number] = Task {
                await deletion()
                _ = self.pending.withLock { $0.removeValue(forKey: number) }
            }
        }
    }

    /// Waits for deletions of withdrawn registrations still running (at shutdown, after clients are gone).
    public func shutdown() async {
        for task in pending.withLock({ Array($0.values) }) { await task.value }
    }

    /// Deletes the records a previous run left registered (it crashed, or a deletion failed): called at start.
    /// - Returns: how many registrations were cleaned up.
    @discardableResult
    public func removeLeftovers() async -> Int {
        let leftovers: [RegistrationPlan]
        do {
            leftovers = try journal.load()
        } catch {
            // A journal someone else could have written is never acted on: it would make us sign deletions.
            logger.warning("ignoring the wide-area registration journal", metadata: ["error": "\(error)"])
            return 0
        }
        var removed = 0
        for plan in leftovers {
            // Only for domains still configured with a key: a journal entry never picks where signed UPDATEs go.
            guard let key = settings.keys.key(for: plan.domain) else {
                logger.warning(
                    "wide-area leftover not removed: its domain has no key configured any more",
                    metadata: ["domain": "\(plan.domain)"])
                continue
            }
            do {
                let target = try await UpdateServerLocator(source: source, configured: settings.updateServer)
                    .locate(domain: plan.domain)
                let reply = try await sendUpdate(([], plan.leftoverRemoval), plan: plan, target: target, key: key)
                logger.info(
                    "removed a wide-area registration left by a previous run",
                    metadata: ["name": "\(plan.instance).\(plan.type).\(plan.domain)", "rcode": "\(reply.rcode)"])
                if reply.isSuccess { removed += 1 }
            } catch {
                logger.warning("removing a wide-area leftover failed", metadata: ["error": "\(error)"])
            }
        }
        journal.clear()
        return removed
    }

    /// This machine's host name, first label only.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        gethostname(&buffer, buffer.count)
        let name = String(cString: buffer)
        return String(name.split(separator: ".").first ?? "discoverd")
    }

    /// This machine's addresses other than loopback and link-local (those mean nothing in a unicast zone).
    static func publishableAddresses() -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var result: [String] = []
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr else { continue }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                var v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                let bytes = withUnsafeBytes(of: &v4) { Array($0) }
                if bytes[0] == 127 || (bytes[0] == 169 && bytes[1] == 254) { continue }
                inet_ntop(AF_INET, &v4, &text, socklen_t(text.count))
            case AF_INET6:
                var v6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                let bytes = withUnsafeBytes(of: &v6) { Array($0) }
                if bytes == Array(repeating: 0, count: 15) + [1] || (bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80) {
                    continue
                }
                inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count))
            default:
                continue
            }
            let string = String(cString: text)
            if !result.contains(string) { result.append(string) }
        }
        return result
    }
}
