import Foundation
import Resolver
import Testing

@testable import discoverd

@Suite("[resolver] dnssec and trust anchors in the configuration")
struct DNSSECConfigurationTests {
    func apply(_ text: String) throws(ConfigurationError) -> DaemonConfiguration {
        var config = DaemonConfiguration()
        config.trustAnchorDirectory = "/nonexistent-discoverd-test"
        try config.apply(text: "[resolver]\ntrust-anchor-dir = /nonexistent-discoverd-test\n" + text, source: "test.conf")
        return config
    }

    @Test func theDefaultIsAllowDowngradeWithTheBuiltInAnchors() throws {
        let config = DaemonConfiguration()
        #expect(config.dnssec == .allowDowngrade)
        #expect(config.trustAnchorDirectory == "/etc/dnssec-trust-anchors.d")
        let anchors = try apply("").trustAnchors()
        #expect(anchors.positive["."]?.count == 2)
        #expect(anchors.negative.contains("local."))
    }

    @Test func modesAnchorsAndNegativeAnchorsAreRead() throws {
        let config = try apply(
            """
            dnssec = yes
            trust-anchor = example. IN DS 12345 13 2 \(String(repeating: "AB", count: 32))
            negative-trust-anchor = Broken.Example
            """)
        #expect(config.dnssec == .yes)
        let anchors = try config.trustAnchors()
        #expect(anchors.positive["example."]?.count == 1)
        #expect(anchors.negative.contains("broken.example."))
    }

    @Test func errorsNameTheFileLineAndKey() {
        #expect(throws: ConfigurationError.self) { try apply("dnssec = maybe") }
        do {
            _ = try apply("dnssec = maybe")
        } catch {
            #expect(error.description.contains("test.conf:3: [resolver] dnssec"))
            #expect(error.description.contains("yes, allow-downgrade or no"))
        }
        do {
            _ = try apply("trust-anchor = example. IN A 192.0.2.1")
            Issue.record("an A record is no trust anchor")
        } catch {
            #expect(error.description.contains("test.conf:3: [resolver] trust-anchor"))
        }
        #expect(throws: ConfigurationError.self) { try apply("negative-trust-anchor = bad..name") }
    }

    @Test func aBadFileInTheAnchorDirectoryIsAnError() throws {
        // No hex in the path: error texts are redacted of what looks like a key.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "discoverd-anchors-\(ProcessInfo.processInfo.processIdentifier)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "not a record\n".write(to: directory.appendingPathComponent("x.positive"), atomically: true, encoding: .utf8)
        var config = DaemonConfiguration()
        do {
            try config.apply(text: "[resolver]\ntrust-anchor-dir = \(directory.path)\n", source: "test.conf")
            Issue.record("the bad anchor file was accepted")
        } catch {
            #expect(error.description.contains("x.positive:1"))
        }
    }
}
