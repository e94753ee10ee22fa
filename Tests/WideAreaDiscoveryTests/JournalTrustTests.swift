import Foundation
import Resolver
import Testing

@testable import WideAreaDiscovery

/// The registration journal makes the daemon sign deletions at start: written atomically, read only when the
/// daemon wrote it.
@Suite("Registration journal")
struct JournalTrustTests {
    static func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/journal-test-\(UUID().uuidString.lowercased())"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func writtenAtomicallyWithMode0600AndReadBack() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = RegistrationJournal(directory: dir)
        journal.record(RegistrationTests.plan, id: "wa-1")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(files == ["widearea-registrations.json"], "no temporary file left: \(files)")
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/widearea-registrations.json")[.posixPermissions]
        #expect((mode as? NSNumber)?.intValue == 0o600)
        #expect(try RegistrationJournal(directory: dir).load().map(\.instance) == ["My Web"])
    }

    @Test func aSymlinkedOrWritableJournalIsRefused() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let writer = RegistrationJournal(directory: dir + "/elsewhere")
        writer.record(RegistrationTests.plan, id: "wa-1")
        try FileManager.default.createSymbolicLink(
            atPath: dir + "/widearea-registrations.json", withDestinationPath: dir + "/elsewhere/widearea-registrations.json")
        #expect { try RegistrationJournal(directory: dir).load() } throws: {
            ($0 as? CachePersistenceError)?.code == .untrusted
        }
        chmod(dir + "/elsewhere/widearea-registrations.json", 0o666)
        #expect { try RegistrationJournal(directory: dir + "/elsewhere").load() } throws: {
            ($0 as? CachePersistenceError)?.code == .untrusted
        }
    }
}
