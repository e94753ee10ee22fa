import DNSCore
/// The records of one browse merged over the interfaces and protocols they are seen on: a record is present while at
/// least one sighting is, and keeps the value it was first reported with. Pure; the owner serializes access.
struct RecordSet {
    /// A record's identity: what makes two sightings the same record (RFC 6762 §10.2 compares class, type and rdata
    /// under the same name).
    struct Key: Hashable {
        var name: String
        var dnsClass: UInt16
        var type: UInt16
        var rdata: [UInt8]
    }

    private var sightings: [Key: Set<Sighting>] = [:]
    private var records: [Key: MDNSRecord] = [:]

    /// What a browser event changed for the set's consumers.
    enum Change: Equatable {
        case added(MDNSRecord)
        case removed(MDNSRecord)
    }

    /// Every record present, sorted by name, type and rdata.
    var all: [MDNSRecord] {
        self.records.values.sorted { lhs, rhs in
            if lhs.name != rhs.name { return lhs.name < rhs.name }
            if lhs.type != rhs.type { return lhs.type < rhs.type }
            return lhs.rdata.lexicographicallyPrecedes(rhs.rdata)
        }
    }

    /// Applies a `new` or `remove` callback; returns the change when the record appeared or went away. A name Avahi
    /// reports that does not parse is ignored (Avahi only hands out names it could escape).
    mutating func apply(_ event: RecordBrowserEvent) -> Change? {
        guard let labels = try? DNSName.recordLabels(event.name) else { return nil }
        let name = DNSName.canonicalText(labels)
        let key = Key(name: name, dnsClass: event.dnsClass, type: event.type, rdata: event.rdata)
        let sighting = Sighting(interface: event.interface, proto: event.proto)
        switch event.kind {
        case .new:
            let isNew = self.sightings[key] == nil
            self.sightings[key, default: []].insert(sighting)
            if isNew {
                let record = MDNSRecord(
                    name: name,
                    type: event.type,
                    dnsClass: event.dnsClass,
                    ttl: MDNSRecord.nominalTTL(type: event.type, name: name),
                    rdata: event.rdata,
                    interfaceIndex: event.interface
                )
                self.records[key] = record
                return .added(record)
            }
            return nil
        case .remove:
            guard var seen = self.sightings[key], seen.remove(sighting) != nil else { return nil }
            guard seen.isEmpty else {
                self.sightings[key] = seen
                return nil
            }
            self.sightings[key] = nil
            return self.records.removeValue(forKey: key).map { .removed($0) }
        case .allForNow, .cacheExhausted, .failure:
            return nil
        }
    }
}
