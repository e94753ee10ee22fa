import DNSCore
import Foundation
import Synchronization

/// What is registered right now, kept in the state directory (`widearea-registrations.json`) so that records a
/// crash left in a zone are deleted at the next start (``WideAreaDiscovery/removeLeftovers()``).
///
/// Written with a temporary file and a rename, so a crash mid-write leaves the old list or the new one.
final class RegistrationJournal: Sendable {
    let path: String?
    private let entries = Mutex<[String: RegistrationPlan]>([:])

    /// A journal at `directory/widearea-registrations.json`, or none (nothing persisted) when `directory` is nil.
    init(directory: String?) {
        path = directory.map { $0 + "/widearea-registrations.json" }
    }

    /// What the file holds (what a previous run left registered).
    func load() -> [RegistrationPlan] {
        guard let path, let data = FileManager.default.contents(atPath: path) else { return [] }
        return (try? JSONDecoder().decode([String: RegistrationPlan].self, from: data)).map { Array($0.values) } ?? []
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
        if let path { try? FileManager.default.removeItem(atPath: path) }
    }

    private func save() {
        guard let path else { return }
        let snapshot = entries.withLock { $0 }
        do {
            let directory = (path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if snapshot.isEmpty {
                try? FileManager.default.removeItem(atPath: path)
                return
            }
            let data = try JSONEncoder().encode(snapshot)
            let temporary = path + ".tmp"
            try data.write(to: URL(fileURLWithPath: temporary))
            _ = rename(temporary, path)
        } catch {
            // Losing the journal only means a crash could leave records behind; registration goes on.
        }
    }
}
