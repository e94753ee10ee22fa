import Foundation

/// The network lab (Scripts/lab, lab/README.md) as every test target sees it: where it lives, what its env file
/// says, and names no other test uses. Each target adds what it needs on top (``AvahiGate``, ``LabPeer``, its own
/// fixtures); nothing here starts anything.
public enum LabEnvironment {
    /// `$DISCOVERD_LAB_DIR`, else `/tmp/discoverd-lab`.
    public static let directory: String = {
        let dir = ProcessInfo.processInfo.environment["DISCOVERD_LAB_DIR"] ?? ""
        return dir.isEmpty ? "/tmp/discoverd-lab" : dir
    }()

    /// The repository root (this file is Tests/LabSupport/LabEnvironment.swift).
    public static let repository: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }()

    /// `Scripts/lab`.
    public static let script = repository + "/Scripts/lab"

    /// Under `CI=true` a missing lab is a failure, never a skip.
    public static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// KEY=value lines of `$LAB/env`; nil when the lab is not up.
    public static let environment: [String: String]? = {
        guard let text = try? String(contentsOfFile: directory + "/env", encoding: .utf8) else { return nil }
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            result[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return result
    }()

    /// The path of a `unix:path=...` D-Bus address in the env file under `key`, when that socket exists.
    public static func dbusAddress(_ key: String) -> String? {
        guard let address = environment?[key], address.hasPrefix("unix:path=") else { return nil }
        let path = String(address.dropFirst("unix:path=".count))
        return FileManager.default.fileExists(atPath: path) ? address : nil
    }

    /// The python that runs lab/zcpeer.py: the venv Scripts/bootstrap makes, else the system one.
    public static var python: String {
        let venv = repository + "/.venv/bin/python"
        return FileManager.default.isExecutableFile(atPath: venv) ? venv : "/usr/bin/python3"
    }

    /// Whether the python-zeroconf peer can run (the venv made by Scripts/bootstrap).
    public static var hasZeroconfPeer: Bool {
        FileManager.default.isExecutableFile(atPath: repository + "/.venv/bin/python")
    }

    /// lab/zcpeer.py, the python-zeroconf peer.
    public static var zeroconfPeer: String { repository + "/lab/zcpeer.py" }

    /// 8 random hex digits.
    public static func randomHex() -> String {
        let hex = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// A service type no other test (or earlier run) uses: `_dt` + 8 hex digits + `._tcp`.
    public static func uniqueServiceType() -> String { "_dt" + randomHex() + "._tcp" }
}

/// A lab helper that failed (a command, a spawn), with what happened.
public struct LabFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
