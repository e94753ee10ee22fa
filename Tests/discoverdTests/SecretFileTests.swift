import Foundation
import Testing
import WideAreaDiscovery

@testable import discoverd

@Suite("Keys as secrets: key files, private configuration, redaction")
struct SecretFileTests {
    static let secret = "ZGlzY292ZXJkLWxhYi10c2lnLXNlY3JldC0zMmJ5dGU="
    static let keyFile = """
        # written by tsig-keygen dyn-key
        key "dyn-key" {
        \talgorithm hmac-sha512;
        \tsecret "\(secret)";
        };
        """

    /// A fresh directory with `files` (name, text, mode); removed by the caller.
    static func directory(_ files: [(String, String, mode_t)]) throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/secret-test-\(UUID().uuidString.lowercased())"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        for (name, text, mode) in files {
            try text.write(toFile: path + "/" + name, atomically: false, encoding: .utf8)
            chmod(path + "/" + name, mode)
        }
        return path
    }

    @Test func aKeyFileAsTsigKeygenWritesIt() throws {
        let key = try TSIGKey(keyFileText: Self.keyFile)
        #expect(key.name == "dyn-key.")
        #expect(key.algorithm == "hmac-sha512.")
        #expect(key.secret == Self.secret)
        let compact = try TSIGKey(keyFileText: "key k { algorithm \"hmac-sha256\"; secret \"c2VjcmV0\"; }; // x")
        #expect(compact.name == "k.")
    }

    @Test(arguments: [
        "", "key \"k\" { algorithm hmac-sha256; };", "key \"k\" { secret \"\(secret)\"; };",
        "key \"k\" { algorithm hmac-sha256; secret \"\(secret)\"; }; key \"j\" { algorithm hmac-sha256; secret \"x\"; };",
        "key \"k\" { algorithm hmac-foo; secret \"\(secret)\"; };", "key \"k\" { algorithm hmac-sha256; secret \"\(secret)\" }",
    ])
    func aMalformedKeyFileIsRefusedWithoutItsSecret(text: String) {
        #expect {
            try TSIGKey(keyFileText: text)
        } throws: { error in
            !"\(error)".contains(Self.secret) && !"\(error)".contains("ZGlzY292")
        }
    }

    @Test func keyFilePermissions() {
        typealias S = SecretFile.Status
        #expect(SecretFile.problem(keyFile: S(owner: 0, group: 0, mode: 0o100600, isRegular: true), daemonUID: 998) == nil)
        #expect(SecretFile.problem(keyFile: S(owner: 998, group: 998, mode: 0o100400, isRegular: true), daemonUID: 998) == nil)
        #expect(SecretFile.problem(keyFile: S(owner: 0, group: 0, mode: 0o100644, isRegular: true), daemonUID: 998)?
            .contains("644") == true)
        #expect(SecretFile.problem(keyFile: S(owner: 0, group: 998, mode: 0o100640, isRegular: true), daemonUID: 998) != nil)
        #expect(SecretFile.problem(keyFile: S(owner: 1000, group: 0, mode: 0o100600, isRegular: true), daemonUID: 998)?
            .contains("uid 1000") == true)
    }

    @Test func aConfigurationWithASecretMayBeReadByTheDaemonsGroupOnly() {
        typealias S = SecretFile.Status
        let check = { (s: S) in SecretFile.problem(configuration: s, daemonUID: 998, daemonGID: 997) }
        #expect(check(S(owner: 0, group: 997, mode: 0o100640, isRegular: true)) == nil, "the packaged 0640 root:discoverd")
        #expect(check(S(owner: 0, group: 0, mode: 0o100600, isRegular: true)) == nil)
        #expect(check(S(owner: 0, group: 0, mode: 0o100644, isRegular: true)) != nil)
        #expect(check(S(owner: 0, group: 100, mode: 0o100640, isRegular: true)) != nil, "group users")
        #expect(check(S(owner: 0, group: 997, mode: 0o100660, isRegular: true)) != nil, "group-writable")
        #expect(check(S(owner: 1000, group: 997, mode: 0o100600, isRegular: true)) != nil)
    }

    @Test func loadingRefusesAWorldReadableKeyFileAndAcceptsAPrivateOne() throws {
        let dir = try Self.directory([("open.key", Self.keyFile, 0o644), ("private.key", Self.keyFile, 0o600)])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let conf = "[wide-area]\nkey-file = dyn.example \(dir)/open.key\n"
        try conf.write(toFile: dir + "/first.conf", atomically: false, encoding: .utf8)
        #expect {
            try DaemonConfiguration.load(path: dir + "/first.conf")
        } throws: { error in
            let text = "\(error)"
            return text.contains("\(dir)/open.key") && text.contains("chmod 0600") && text.contains("first.conf:2")
                && !text.contains(Self.secret)
        }
        try "[wide-area]\nkey-file = dyn.example \(dir)/private.key\n".write(
            toFile: dir + "/second.conf", atomically: false, encoding: .utf8)
        let config = try DaemonConfiguration.load(path: dir + "/second.conf")
        #expect(config.wideAreaKeys.key(for: "host.dyn.example")?.name == "dyn-key.")
        #expect(config.wideAreaKeys.key(for: "other.example") == nil)
    }

    @Test func anInlineSecretNeedsAPrivateConfigurationFile() throws {
        let text = "[wide-area]\nkey = dyn.example hmac-sha256:k:\(Self.secret)\n"
        let dir = try Self.directory([("open.conf", text, 0o644), ("private.conf", text, 0o600)])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect {
            try DaemonConfiguration.load(path: dir + "/open.conf")
        } throws: { error in
            "\(error)".contains("open.conf:2") && "\(error)".contains("chmod 0640") && !"\(error)".contains(Self.secret)
        }
        #expect(try DaemonConfiguration.load(path: dir + "/private.conf").wideAreaKeys.key(for: "dyn.example") != nil)
    }

    @Test(arguments: [
        "[wide-area]\nhmac-sha256:k:\(secret)\n", "[wide-area]\nkey hmac-sha256:k:\(secret)\n",
        "[wide-area]\nkey = dyn.example hmac-sha256:k:\(secret) extra\n", "[wide-area]\nkey = hmac-foo:k:\(secret)\n",
        "[wide-area]\nkeys = k:\(secret)\n", "[wide-area]\nkey-file = \(secret)\n",
    ])
    func aMalformedLineIsEchoedWithoutTheSecret(text: String) {
        var config = DaemonConfiguration()
        #expect {
            try config.apply(text: text, source: "/etc/discoverd/discoverd.conf")
        } throws: { error in
            let text = "\(error)"
            return text.contains("/etc/discoverd/discoverd.conf:2") && !text.contains(Self.secret)
                && !text.contains("ZGlzY292ZXJk")
        }
    }

    @Test func redactionKeepsPathsNamesAndNumbers() {
        for text in [
            "/etc/discoverd/discoverd.conf:12: [limits] max-connections: 0 is out of range 1...1000000",
            "upstream '192.0.2.53:5300': not an IPv4 or IPv6 address", "/var/lib/discoverd/widearea-registrations.json",
        ] {
            #expect(Redaction.redact(text) == text)
        }
        #expect(Redaction.redact("got 'k:c2VjcmV0c2VjcmV0c2VjcmV0'") == "got 'k:<redacted>'")
        #expect(Redaction.redact("x \(Self.secret) y") == "x <redacted> y")
    }

    @Test func aKeyWithoutADomainSignsForTheBrowseDomainsOnly() throws {
        var table = TSIGKeyTable()
        try table.add(parsing: "k:\(Self.secret)")
        let settings = WideAreaSettings(browseDomains: ["sd.example"], keys: table)
        #expect(settings.keys.key(for: "sd.example")?.name == "k.")
        #expect(settings.keys.key(for: "attacker.example") == nil)
        #expect(settings.keys.defaultKey == nil)
    }

    @Test func aCredentialNameIsReadFromTheCredentialsDirectory() throws {
        let dir = try Self.directory([("tsig", Self.keyFile, 0o400)])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = DaemonConfiguration()
        try CredentialsDirectory.with(dir) {
            try config.apply(text: "[wide-area]\nkey-file = dyn.example tsig\n", source: "c")
        }
        #expect(config.wideAreaKeys.key(for: "dyn.example")?.name == "dyn-key.")
    }
}
