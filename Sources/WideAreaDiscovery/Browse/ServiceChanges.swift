import DNSCore
import DNSSDModel


/// What changed between two looks at a unicast browse: the events to report (RFC 6763 over unicast DNS has no
/// announcements, so changes are found by comparing answers).
enum ServiceChanges {
    /// Events turning `old` into `new` (keyed by instance): removed first, then added, then changed; each group
    /// sorted by name so the order does not depend on dictionary order.
    static func events(from old: [String: DNSSDService], to new: [String: DNSSDService]) -> [BrowseEvent] {
        var removed: [DNSSDService] = []
        var added: [DNSSDService] = []
        var changed: [DNSSDService] = []
        for (key, service) in old where new[key] == nil { removed.append(service) }
        for (key, service) in new {
            if let previous = old[key] {
                if previous != service { changed.append(service) }
            } else {
                added.append(service)
            }
        }
        let byName: (DNSSDService, DNSSDService) -> Bool = { $0.name < $1.name }
        return removed.sorted(by: byName).map(BrowseEvent.removed) + added.sorted(by: byName).map(BrowseEvent.added)
            + changed.sorted(by: byName).map(BrowseEvent.changed)
    }
}

/// When a unicast browse looks again: when the shortest TTL of what it saw runs out, never sooner than
/// ``minimumInterval`` (so a zone with tiny TTLs cannot make us query in a loop) and never later than
/// ``maximumInterval``.
public struct PollSchedule: Hashable, Sendable {
    /// Never ask again sooner than this.
    public var minimumInterval: Duration = .seconds(10)
    /// Ask again at least this often, even when TTLs are long.
    public var maximumInterval: Duration = .seconds(3600)

    public init(minimumInterval: Duration = .seconds(10), maximumInterval: Duration = .seconds(3600)) {
        self.minimumInterval = minimumInterval
        self.maximumInterval = maximumInterval
    }

    /// The wait before the next look, given the smallest TTL seen (nil when nothing was seen).
    public func delay(afterTTL ttl: UInt32?) -> Duration {
        // One second past expiry, so the cache entry is really expired when we come back.
        let wanted = ttl.map { Duration.seconds(Int64($0) + 1) } ?? minimumInterval
        return min(max(wanted, minimumInterval), maximumInterval)
    }
}
