import DiscoverAPI
@testable import DiscoverServer
import Foundation
import Testing

/// Group look-ups through NSS with the re-entrant calls, checked against `getent` and `id` on this machine.
@Suite struct GroupDirectoryTests {
    static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func groupNamesResolveToTheirGIDs() throws {
        #expect(GroupDirectory.gid(ofGroup: "root") == 0)
        #expect(GroupDirectory.gid(ofGroup: "no-such-group-\(UInt32.random(in: 0...UInt32.max))") == nil)
        let line = try Self.run(["getent", "group", "nogroup"])
        if let gid = line.split(separator: ":").dropFirst(2).first.flatMap({ UInt32($0) }) {
            #expect(GroupDirectory.gid(ofGroup: "nogroup") == gid)
        }
    }

    @Test func aUsersGroupsIncludeItsSupplementaryGroups() throws {
        // Every user the group file lists as a member of some group, compared with `id -G`.
        let groupFile = try String(contentsOfFile: "/etc/group", encoding: .utf8)
        var members = Set<String>()
        for line in groupFile.split(separator: "\n") {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            if fields.count == 4 { members.formUnion(fields[3].split(separator: ",").map(String.init)) }
        }
        for user in members.sorted() {
            guard let uid = UInt32(try Self.run(["id", "-u", user])),
                let gid = UInt32(try Self.run(["id", "-g", user]))
            else { continue }
            let expected = Set(try Self.run(["id", "-G", user]).split(separator: " ").compactMap { UInt32($0) })
            #expect(Set(GroupDirectory.groups(ofUID: uid, primaryGID: gid)) == expected, "\(user)")
            #expect(expected.count > 1, "\(user) is a listed member, so it has a supplementary group")
        }
        #expect(GroupDirectory.groups(ofUID: 0, primaryGID: 0).contains(0))
        #expect(GroupDirectory.userName(of: 0) == "root")
        #expect(GroupDirectory.groups(ofUID: 4_000_000_123, primaryGID: 77) == [77], "unknown user: its own gid only")
    }

    @Test func accessControlAdmitsRootTheGroupAndNobodyElse() async throws {
        let access = AccessControl(logger: .init(label: "test"))
        let rootGroup = PeerCredentials(uid: 1234, gid: 0, pid: 1)
        let stranger = PeerCredentials(uid: 4_000_000_123, gid: 4_000_000_123, pid: 1)
        // No groups configured: only root is admin, everyone may advertise.
        await #expect(throws: Never.self) { try await access.requireAdmin(PeerCredentials(uid: 0, gid: 5, pid: 1)) }
        await #expect(throws: VarlinkError.permissionDenied) { try await access.requireAdmin(rootGroup) }
        await #expect(throws: Never.self) { try await access.requireAdvertiser(stranger) }
        await access.configure(adminGroup: "root", advertiseGroup: "no-such-group-xyz")
        #expect(access.adminGroup == .init(name: "root", gid: 0))
        #expect(access.advertiseGroup == .init(name: "no-such-group-xyz", gid: nil))
        await #expect(throws: Never.self) { try await access.requireAdmin(rootGroup) }
        await #expect(throws: VarlinkError.permissionDenied) { try await access.requireAdmin(stranger) }
        await #expect(throws: VarlinkError.permissionDenied) { try await access.requireAdvertiser(stranger) }
        await #expect(throws: VarlinkError.permissionDenied) { try await access.requireAdmin(.unknown) }
    }
}
