import DNSCore
import Resolver
import Synchronization

@testable import WideAreaDiscovery

/// A zone as a table: (lowercased name, type) → records. Counts lookups.
final class TableSource: RecordSource {
    let table: Mutex<[String: RecordSet]>
    let lookups = Mutex<[String]>([])

    init(_ entries: [(String, RRType, [[UInt8]])], ttl: UInt32 = 60) {
        var table: [String: RecordSet] = [:]
        for (name, type, rdatas) in entries {
            let records = rdatas.map { ResourceRecord(name: name, type: type, ttl: ttl, rdata: $0) }
            table["\(name)|\(type.rawValue)"] = RecordSet(records: records, ttl: ttl)
        }
        self.table = Mutex(table)
    }

    func records(_ name: String, type: RRType, fresh: Bool) async throws(WideAreaError) -> RecordSet {
        lookups.withLock { $0.append("\(name) \(type.rawValue)") }
        return table.withLock { $0["\(name)|\(type.rawValue)"] } ?? RecordSet(records: [], ttl: 30)
    }

    func set(_ name: String, _ type: RRType, _ rdatas: [[UInt8]], ttl: UInt32 = 60) {
        let records = rdatas.map { ResourceRecord(name: name, type: type, ttl: ttl, rdata: $0) }
        table.withLock { $0["\(name)|\(type.rawValue)"] = RecordSet(records: records, ttl: ttl) }
    }
}

/// Wire-format helpers for rdata.
enum Wire {
    static func name(_ labels: String...) -> [UInt8] {
        labels.flatMap { label in label.split(separator: ".").map { [UInt8($0.utf8.count)] + Array($0.utf8) } }
            .flatMap { $0 } + [0]
    }

    /// `instance` as one label, then the dotted rest.
    static func instance(_ instance: String, _ rest: String) -> [UInt8] {
        [UInt8(instance.utf8.count)] + Array(instance.utf8) + name(rest)
    }

    static func srv(port: UInt16, target: String) -> [UInt8] {
        [0, 0, 0, 0, UInt8(port >> 8), UInt8(port & 0xFF)] + (target == "." ? [0] : name(target))
    }

    static func txt(_ strings: String...) -> [UInt8] {
        strings.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
    }
}
