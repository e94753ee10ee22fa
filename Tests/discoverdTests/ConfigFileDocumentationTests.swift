import Foundation
import Testing

@testable import discoverd

/// Config/discoverd.conf is the one documentation of the settings: the Debian package installs it as the
/// conffile and Scripts/manpages turns it into discoverd.conf(5). These tests keep it and the parser in step, so
/// neither the file nor the man page can drift from what the daemon reads.
@Suite("Config/discoverd.conf documents exactly the settings the daemon reads")
struct ConfigFileDocumentationTests {
    static let path = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Config/discoverd.conf").path

    /// One `key = value` line of the file, active (a default) or commented out (an example).
    struct Setting: CustomStringConvertible {
        var section: String
        var key: String
        var value: String
        var line: Int
        var description: String { "[\(section)] \(key) = \(value) (line \(line))" }
    }

    /// Every setting line, read the way Scripts/manpages reads the file.
    static func settings() throws -> [Setting] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var section = ""
        var found: [Setting] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(raw)
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            if line.hasPrefix("# ") { line = line.dropFirst(2) } else if line.hasPrefix("#") { line = line.dropFirst() }
            guard let equals = line.range(of: " = ") else { continue }
            let key = line[..<equals.lowerBound]
            guard let first = key.first, first.isLowercase,
                key.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" })
            else { continue }
            found.append(
                Setting(section: section, key: String(key), value: String(line[equals.upperBound...]), line: index + 1))
        }
        return found
    }

    @Test("every key the parser accepts is in the file, and every key in the file is one the parser accepts")
    func keysMatchTheParser() throws {
        var documented: [String: Set<String>] = [:]
        for setting in try Self.settings() { documented[setting.section, default: []].insert(setting.key) }
        #expect(Set(documented.keys) == DaemonConfiguration.sections)
        for section in DaemonConfiguration.sections.sorted() {
            let accepted = DaemonConfiguration.keys[section] ?? []
            let inFile = documented[section] ?? []
            #expect(accepted.subtracting(inFile).isEmpty, "[\(section)] undocumented: \(accepted.subtracting(inFile))")
            #expect(inFile.subtracting(accepted).isEmpty, "[\(section)] not read by the daemon: \(inFile.subtracting(accepted))")
        }
    }

    @Test("the file as shipped loads, and its active lines are the defaults it says they are")
    func shippedFileIsTheDefaults() throws {
        let loaded = try DaemonConfiguration.load(path: Self.path)
        #expect(loaded == DaemonConfiguration())
    }

    @Test("every commented example, uncommented on its own, is accepted by the parser")
    func examplesParse() throws {
        let examples = try Self.settings()
        #expect(examples.count >= 29)
        // A key-file example names a file that must exist (and be private) when it is read: put a key there.
        let keys = FileManager.default.temporaryDirectory.path + "/conf-doc-\(UUID().uuidString.lowercased())"
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: keys) }
        // Credential names are read from $CREDENTIALS_DIRECTORY, which is the key directory meanwhile.
        try CredentialsDirectory.with(keys) {
            for example in examples {
                var config = DaemonConfiguration()
                let value = example.key == "key-file" ? try Self.withKeyFile(example.value, in: keys) : example.value
                #expect(throws: Never.self, "\(example)") {
                    try config.apply(text: "[\(example.section)]\n\(example.key) = \(value)\n", source: "example")
                }
            }
        }
    }

    /// `key-file = [DOMAIN] PATH` with PATH (absolute, or a credential name in $CREDENTIALS_DIRECTORY) backed by
    /// a private key file in `directory`.
    static func withKeyFile(_ value: String, in directory: String) throws -> String {
        var fields = value.split(separator: " ").map(String.init)
        let name = fields[fields.count - 1]
        let path = directory + "/" + (name.split(separator: "/").last.map(String.init) ?? name)
        try "key \"doc-key\" { algorithm hmac-sha256; secret \"c2VjcmV0c2VjcmV0c2VjcmV0\"; };\n".write(
            toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        if name.hasPrefix("/") { fields[fields.count - 1] = path }
        return fields.joined(separator: " ")
    }
}
