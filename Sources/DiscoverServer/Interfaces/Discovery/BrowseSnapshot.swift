import DNSSDModel
import DiscoverAPI
import Discovery

/// A browse event as it goes on the wire, encoded once for every subscriber.
struct EncodedBrowseEvent: Sendable {
    let event: BrowseEvent
    /// The reply (`continues: true`, with its NUL).
    let bytes: [UInt8]
    /// For `added` and `changed`: the instance as an `added` reply, what a subscriber joining later is sent.
    let asAdded: [UInt8]?

    init(_ event: BrowseEvent) throws {
        self.event = event
        self.bytes = try VarlinkReply.encode(event.wire, continues: true)
        switch event {
        case .added: self.asAdded = bytes
        case .changed(let service): self.asAdded = try VarlinkReply.encode(BrowseEvent.added(service).wire, continues: true)
        case .removed, .allForNow: self.asAdded = nil
        }
    }
}

/// What a shared browse has reported so far, kept as the replies that bring a subscriber joining late to the same
/// view: `added` for every instance present, in name order, then `allForNow` once it came; as a stream of the
/// `Discovery` library starts.
struct BrowseSnapshot {
    private struct Entry {
        var name: String
        var domain: String
        var added: [UInt8]
    }

    private var entries: [String: Entry] = [:]
    private var allForNow: [UInt8]?

    /// Instances present.
    var count: Int { entries.count }

    /// Takes an event into account.
    mutating func apply(_ encoded: EncodedBrowseEvent) {
        switch encoded.event {
        case .added(let service), .changed(let service):
            entries[service.key] = Entry(name: service.name, domain: service.domain, added: encoded.asAdded ?? [])
        case .removed(let service):
            entries[service.key] = nil
        case .allForNow:
            allForNow = encoded.bytes
        }
    }

    /// The replies a subscriber joining now is sent first, in order.
    var replay: [[UInt8]] {
        var replies = entries.values.sorted { ($0.name, $0.domain) < ($1.name, $1.domain) }.map(\.added)
        if let allForNow { replies.append(allForNow) }
        return replies
    }
}
