import DNSSDModel

/// Identifies a service instance: name + type + domain (RFC 6763 §4.1).
struct InstanceKey: Hashable, Sendable {
    var name: String
    var type: String
    var domain: String
}

/// One (interface, protocol) pair on which Avahi reported an instance.
struct Sighting: Hashable, Comparable, Sendable {
    var interface: Int32
    var proto: Int32

    static func < (lhs: Sighting, rhs: Sighting) -> Bool {
        (lhs.interface, lhs.proto) < (rhs.interface, rhs.proto)
    }
}

/// What one resolver reported for one sighting.
struct Resolution: Hashable, Sendable {
    var host: String
    var port: UInt16
    /// The address this resolver found (already formatted, with `%zone` for IPv6 link-local), if any.
    var address: String?
    var txt: TXTRecord
}

/// A resolution with its sequence number (higher is more recent).
struct SequencedResolution: Hashable, Sendable {
    var resolution: Resolution
    var sequence: UInt64
}

/// A service instance and everything known about it, per sighting.
struct ServiceInstance: Hashable, Sendable {
    var key: InstanceKey
    /// Every sighting; the value is its latest resolution, if resolved.
    var sightings: [Sighting: SequencedResolution?]
    var interfaceNames: [Int32: String]

    /// The merged public view. Without `includeResolved` only name, type, domain and interfaces are filled.
    ///
    /// Host, port and TXT come from the most recent resolution (a TXT update reaches the resolvers of each
    /// sighting one after another; the latest one is the newest data). Addresses are the union over all sightings,
    /// IPv4 before IPv6, in interface order.
    func service(includeResolved: Bool) -> DNSSDService {
        let ordered = self.sightings.keys.sorted()
        var interfaces: [String] = []
        for sighting in ordered {
            let name = self.interfaceNames[sighting.interface] ?? "if\(sighting.interface)"
            if !interfaces.contains(name) { interfaces.append(name) }
        }
        var service = DNSSDService(name: self.key.name, type: self.key.type, domain: self.key.domain, interfaces: interfaces)
        guard includeResolved else { return service }

        var latest: SequencedResolution?
        var v4: [String] = []
        var v6: [String] = []
        for sighting in ordered {
            guard let entry = self.sightings[sighting], let resolved = entry else { continue }
            if latest == nil || resolved.sequence > latest!.sequence { latest = resolved }
            if let address = resolved.resolution.address {
                if address.contains(":") {
                    if !v6.contains(address) { v6.append(address) }
                } else if !v4.contains(address) {
                    v4.append(address)
                }
            }
        }
        if let resolution = latest?.resolution {
            service.host = resolution.host
            service.port = Int(resolution.port)
            service.txt = resolution.txt.dictionary
            service.txtRaw = resolution.txt.dictionaryIsLossy ? resolution.txt.strings : nil
        }
        service.addresses = v4 + v6
        return service
    }
}

/// A change of one instance: `before == nil` is a first sighting, `after == nil` a disappearance.
struct InstanceChange: Sendable {
    var before: ServiceInstance?
    var after: ServiceInstance?

    /// The event a subscriber sees, or `nil` when nothing it can observe changed.
    func event(includeResolved: Bool) -> BrowseEvent? {
        switch (self.before, self.after) {
        case (nil, let after?):
            return .added(after.service(includeResolved: includeResolved))
        case (let before?, nil):
            return .removed(before.service(includeResolved: includeResolved))
        case (let before?, let after?):
            let old = before.service(includeResolved: includeResolved)
            let new = after.service(includeResolved: includeResolved)
            return old == new ? nil : .changed(new)
        case (nil, nil):
            return nil
        }
    }
}

/// The instances one browser knows, merged per instance over (interface, protocol) sightings.
///
/// Pure state machine: Avahi's browser and resolver callbacks are fed in, `InstanceChange`s come out. An instance is
/// added on its first sighting and removed when its last sighting goes.
struct ServiceInstanceTable: Sendable {
    private(set) var instances: [InstanceKey: ServiceInstance] = [:]
    private var sequence: UInt64 = 0

    var count: Int { self.instances.count }

    /// Avahi reported the instance on a sighting (`AVAHI_BROWSER_NEW`). Returns `nil` for a repeated report.
    mutating func add(_ key: InstanceKey, on sighting: Sighting, interfaceName: String?) -> InstanceChange? {
        let before = self.instances[key]
        var instance = before ?? ServiceInstance(key: key, sightings: [:], interfaceNames: [:])
        guard instance.sightings[sighting] == nil else { return nil }
        instance.sightings[sighting] = .some(nil)
        if let interfaceName { instance.interfaceNames[sighting.interface] = interfaceName }
        self.instances[key] = instance
        return InstanceChange(before: before, after: instance)
    }

    /// Avahi withdrew the instance from a sighting (`AVAHI_BROWSER_REMOVE`). Returns `nil` if it was unknown.
    mutating func remove(_ key: InstanceKey, on sighting: Sighting) -> InstanceChange? {
        guard let before = self.instances[key], before.sightings[sighting] != nil else { return nil }
        var instance = before
        instance.sightings[sighting] = nil
        if instance.sightings.isEmpty {
            self.instances[key] = nil
            return InstanceChange(before: before, after: nil)
        }
        if !instance.sightings.keys.contains(where: { $0.interface == sighting.interface }) {
            instance.interfaceNames[sighting.interface] = nil
        }
        self.instances[key] = instance
        return InstanceChange(before: before, after: instance)
    }

    /// A resolver of a sighting found (new) data. Returns `nil` if the sighting is unknown.
    mutating func resolved(_ key: InstanceKey, on sighting: Sighting, _ resolution: Resolution) -> InstanceChange? {
        guard let before = self.instances[key], before.sightings[sighting] != nil else { return nil }
        self.sequence += 1
        var instance = before
        instance.sightings[sighting] = .some(SequencedResolution(resolution: resolution, sequence: self.sequence))
        self.instances[key] = instance
        return InstanceChange(before: before, after: instance)
    }

    /// Forgets all resolutions (resolving stopped); no events are produced.
    mutating func clearResolutions() {
        for key in self.instances.keys {
            for sighting in self.instances[key]!.sightings.keys {
                self.instances[key]!.sightings[sighting] = .some(nil)
            }
        }
    }

    /// Removes every instance matching `predicate` (e.g. Avahi went away, or a browse domain vanished).
    mutating func removeAll(where predicate: (InstanceKey) -> Bool = { _ in true }) -> [InstanceChange] {
        var changes: [InstanceChange] = []
        for (key, instance) in self.instances where predicate(key) {
            self.instances[key] = nil
            changes.append(InstanceChange(before: instance, after: nil))
        }
        return changes.sorted { lhs, rhs in
            (lhs.before?.key.name ?? "", lhs.before?.key.domain ?? "")
                < (rhs.before?.key.name ?? "", rhs.before?.key.domain ?? "")
        }
    }

    /// The sightings of every instance (to create resolvers when resolving starts).
    var allSightings: [(InstanceKey, Sighting)] {
        self.instances.flatMap { key, instance in instance.sightings.keys.map { (key, $0) } }
    }
}
