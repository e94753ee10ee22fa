import DNSSDModel
import DiscoverAPI
import Discovery
import NIOConcurrencyHelpers

/// Advertisements made over the API, by id, with the uid that made them (docs/API.md: only the owner or root may
/// update or withdraw).
public final class RegistrationTable: Sendable {
    private struct Entry {
        var owner: UInt32
        var connection: UInt64
        var advertisement: any ServiceRegistration
    }

    private let entries = NIOLockedValueBox([String: Entry]())

    /// An empty table.
    public init() {}

    func add(id: String, owner: UInt32, connection: UInt64, advertisement: any ServiceRegistration) {
        entries.withLockedValue { $0[id] = Entry(owner: owner, connection: connection, advertisement: advertisement) }
    }

    /// The connection that made registration `id`.
    func connection(of id: String) -> UInt64? { entries.withLockedValue { $0[id]?.connection } }

    func remove(id: String) {
        _ = entries.withLockedValue { $0.removeValue(forKey: id) }
    }

    /// Advertisements live now.
    public var count: Int { entries.withLockedValue { $0.count } }

    /// The advertisement, if `peer` owns it or is root.
    func owned(id: String, by peer: PeerCredentials) throws(VarlinkError) -> any ServiceRegistration {
        guard let entry = entries.withLockedValue({ $0[id] }) else { throw .notFound(id) }
        guard peer.isRoot || peer.uid == entry.owner else { throw .permissionDenied }
        return entry.advertisement
    }
}
