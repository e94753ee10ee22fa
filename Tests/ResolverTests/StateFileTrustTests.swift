import Foundation
import Testing

@testable import Resolver

/// A state file is read only when the daemon wrote it: no symbolic link, the daemon's uid, not writable by group
/// or others (a planted cache file would inject records).
@Suite("State files are trusted only when the daemon wrote them")
struct StateFileTrustTests {
    func savedCache(_ directory: TemporaryDirectory) throws -> URL {
        let file = directory.file("real.json")
        let (cache, _) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 300)
        try cache.save(to: file)
        return file
    }

    @Test func aSymbolicLinkIsNotFollowed() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let real = try savedCache(directory)
        let link = directory.file("cache.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real)
        let (cache, _) = makeCache()
        #expect { try cache.load(from: link) } throws: { ($0 as? CachePersistenceError)?.code == .untrusted }
        #expect(cache.count == 0)
    }

    @Test(arguments: [0o620, 0o602, 0o666])
    func aFileOthersMayWriteIsNotRead(mode: Int) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = try savedCache(directory)
        chmod(file.path, mode_t(mode))
        let (cache, _) = makeCache()
        #expect { try cache.load(from: file) } throws: { ($0 as? CachePersistenceError)?.code == .untrusted }
        #expect(cache.count == 0)
    }

    @Test func aFileOfAnotherUIDIsNotRead() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = try savedCache(directory)
        // As another owner would see it: the check compares with the uid given.
        #expect {
            try AtomicFile.readContents(of: file.path, maxSize: 1 << 20, owner: geteuid() + 1)
        } throws: { ($0 as? CachePersistenceError)?.code == .untrusted }
        let (cache, _) = makeCache()
        #expect(try cache.load(from: file).loaded == 1, "the daemon's own file is read")
    }
}
