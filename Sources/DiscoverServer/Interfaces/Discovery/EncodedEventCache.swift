import DiscoverAPI
import Discovery
import NIOConcurrencyHelpers

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
