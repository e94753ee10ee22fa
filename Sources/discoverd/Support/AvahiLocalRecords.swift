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

    private struct Collected {
        var records: [MDNSRecord] = []
        var firstAt: ContinuousClock.Instant?
        var allForNow = false
        var failure: (any Error)?
    }

    func lookup(name: DNSName, type: RRType, class rrClass: RRClass, interface: Int32?, window timeout: Duration)
        async throws(LocalLookupError) -> [ResourceRecord]
    {
        let stream: AsyncThrowingStream<MDNSRecordEvent, any Error>
        do {
            stream = try discovery.recordUpdates(
                name: name.text, type: type.rawValue, dnsClass: rrClass.rawValue, interface: interface)
        } catch {
            throw Self.error(error)
        }
        let unique = Self.isUnique(type: type, name: name)
        let state = Mutex(Collected())
        let reader = Task {
            do {
                for try await event in stream {
                    switch event {
                    case .added(let record):
                        state.withLock { collected in
                            collected.records.append(record)
                            if collected.firstAt == nil { collected.firstAt = .now }
                        }
                    case .removed(let record):
                        state.withLock { $0.records.removeAll { $0 == record } }
                    case .allForNow:
                        state.withLock { $0.allForNow = true }
                        return
                    }
                }
            } catch {
                state.withLock { $0.failure = error }
            }
        }
        defer { reader.cancel() }
        let deadline = ContinuousClock.now + timeout
        while true {
            let collected = state.withLock { $0 }
            if let failure = collected.failure { throw Self.error(failure) }
            let now = ContinuousClock.now
            if collected.allForNow || now >= deadline { break }
            if unique, let first = collected.firstAt, now >= first + grace { break }
            do { try await Task.sleep(for: .milliseconds(5)) } catch { break }
        }
        return state.withLock { $0.records }.map { record in
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
        if let error = error as? DiscoveryError, error.code == .avahiUnavailable {
            return LocalLookupError("avahi-daemon is not running: .local names cannot be resolved")
        }
        return LocalLookupError("mDNS look-up failed: \(error)")
    }
}
