import DNSCore
import DNSSDModel
import DNSStub
import Discovery
import Resolver
import Synchronization

/// `.local` records for the DNS stub from the daemon's one Avahi client.
///
/// Records that have one owner on the link (a host's addresses, a service's SRV and TXT, reverse PTRs: RFC 6762
/// §10.2 "unique" records) answer as soon as the first one arrives plus a short grace for its siblings, so a
/// name Avahi already knows costs no waiting; shared records (browsing PTRs) are collected until Avahi says
/// all-for-now or the window ends, as a discovery proxy would (RFC 8766 §5.6).
struct AvahiLocalRecords: LocalRecordSource {
    let discovery: DiscoveryService
    var grace: Duration = .milliseconds(60)

    /// What the reader has collected so far, shared with the look-up that returns it.
    private final class Collected: Sendable {
        let records = Mutex<[MDNSRecord]>([])
    }

    func lookup(name: DNSName, type: RRType, class rrClass: RRClass, interface: Int32?, window timeout: Duration)
        async throws(LocalLookupError) -> [ResourceRecord]
    {
        let stream: AsyncThrowingStream<MDNSRecordEvent, any Error>
        do {
            // Creating the record browser waits for Avahi's lock and a D-Bus round trip: not on the stub's event
            // loop (DiscoveryService.onAvahiThread).
            let discovery = self.discovery
            stream = try await discovery.onAvahiThread {
                try discovery.recordUpdates(
                    name: name.text, type: type.rawValue, dnsClass: rrClass.rawValue, interface: interface)
            }
        } catch {
            throw Self.error(error)
        }
        let unique = Self.isUnique(type: type, name: name)
        let grace = self.grace
        let state = Collected()
        let (firstRecord, firstSeen) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        defer { firstSeen.finish() }
        // Whichever ends first ends the look-up: all-for-now from Avahi, the window, or (records with one owner)
        // the grace after the first answer. Ending it cancels the reader, which frees the record browser.
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await event in stream {
                        switch event {
                        case .added(let record):
                            state.records.withLock { $0.append(record) }
                            firstSeen.yield()
                        case .removed(let record):
                            state.records.withLock { $0.removeAll { $0 == record } }
                        case .allForNow:
                            return
                        }
                    }
                }
                group.addTask { try? await Task.sleep(for: timeout) }
                if unique {
                    group.addTask {
                        for await _ in firstRecord {
                            try? await Task.sleep(for: grace)
                            return
                        }
                    }
                }
                _ = try await group.next()
                group.cancelAll()
            }
        } catch {
            throw Self.error(error)
        }
        return state.records.withLock { $0 }.map { record in
            ResourceRecord(
                name: record.name, type: RRType(record.type), class: RRClass(record.dnsClass), ttl: record.ttl,
                rdata: record.rdata)
        }
    }

    /// A, AAAA, SRV, TXT, HINFO, CNAME, and PTR of reverse names: one owner each on the link.
    static func isUnique(type: RRType, name: DNSName) -> Bool {
        switch type {
        case .a, .aaaa, .srv, .txt, .cname, RRType(13): return true
        case .ptr: return name.labels.last == Array("arpa".utf8)
        default: return false
        }
    }

    private static func error(_ error: any Error) -> LocalLookupError {
        if let error = error as? DNSSDError, error.code == .avahiUnavailable {
            return LocalLookupError("avahi-daemon is not running: .local names cannot be resolved")
        }
        return LocalLookupError("mDNS look-up failed: \(error)")
    }
}
