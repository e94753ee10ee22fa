import DNSCore
import Foundation
import Resolver
import Synchronization

/// What is registered right now, kept in the state directory (`widearea-registrations.json`) so that records a
/// crash left in a zone are deleted at the next start (``WideAreaDiscovery/removeLeftovers()``).
///
/// Written the way the cache is (``AtomicFile/replaceContents(of:with:mode:)``: a uniquely named temporary file,
/// fsync, rename, fsync of the directory), so a crash mid-write leaves the old list or the new one. Read only when
/// the daemon wrote it (``AtomicFile/readContents(of:maxSize:owner:)``: no symbolic link, owned by the daemon's
/// uid, not writable by group or others): its entries make the daemon send signed deletions.
final class RegistrationJournal: Sendable {
    let path: String?
    private let entries = Mutex<[String: RegistrationPlan]>([:])
    /// Larger than any journal of real registrations; a bigger file is not read.
    static let maxFileSize = 16 << 20

    /// A journal at `directory/widearea-registrations.json`, or none (nothing persisted) when `directory` is nil.
    init(directory: String?) {
        path = directory.map { $0 + "/widearea-registrations.json" }
    }

    /// What the file holds (what a previous run left registered).
    /// - Throws: `CachePersistenceError` when there is a file but it cannot be trusted or read (`untrusted`,
    ///   `io`, `tooLarge`); a missing file is an empty journal.
    func load() throws(CachePersistenceError) -> [RegistrationPlan] {
        guard let path else { return [] }
        let bytes: [UInt8]
        do {
            bytes = try AtomicFile.readContents(of: path, maxSize: Self.maxFileSize)
        } catch where error.code == .notFound {
            return []
        }
        do {
            return Array(try JSONDecoder().decode([String: RegistrationPlan].self, from: Data(bytes)).values)
        } catch {
            throw CachePersistenceError(code: .corrupt, message: "not a registration journal", path: path)
        }
    }

    func record(_ plan: RegistrationPlan, id: String) {
        entries.withLock { $0[id] = plan }
        save()
    }

    func forget(id: String) {
        entries.withLock { _ = $0.removeValue(forKey: id) }
        save()
    }

    /// Empties the journal (after leftovers were handled).
    func clear() {
        entries.withLock { $0 = [:] }
        if let path { unlink(path) }
    }

    private func save() {
        guard let path else { return }
        let snapshot = entries.withLock { $0 }
        do {
            let directory = AtomicFile.split(path).directory
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if snapshot.isEmpty {
                unlink(path)
                return
            }
            let data = try JSONEncoder().encode(snapshot)
            try AtomicFile.replaceContents(of: path, with: Array(data), mode: 0o600)
        } catch {
            // Losing the journal only means a crash could leave records behind; registration goes on.
        }
    }
}
