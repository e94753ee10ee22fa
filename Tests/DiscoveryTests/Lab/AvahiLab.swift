import DNSSDModel
import Discovery
import Foundation
import LabSupport
import Logging
import Testing

/// The network lab (Scripts/lab) as the library's own tests use it: hosts `a` and `b`, each with its own dbus-daemon
/// and avahi-daemon in a network namespace. The tests talk to host a's avahi over its D-Bus socket and publish or
/// browse on host b with the Avahi command-line tools run inside b. Shared helpers are in the LabSupport target.
enum AvahiLab {
    /// Host a's D-Bus address if the lab is up (its socket exists).
    static let busA: String? = LabEnvironment.dbusAddress("LAB_A_DBUS")

    /// Lab tests run when the lab is up, and always under CI (where a missing lab is a failure).
    static var shouldRun: Bool { busA != nil || LabEnvironment.isCI }

    /// The one DiscoveryService of the test process, connected to host a's avahi-daemon.
    ///
    /// libdbus reads DBUS_SYSTEM_BUS_ADDRESS once per process, so every lab test shares this client.
    static let service: DiscoveryService? = {
        guard let busA else { return nil }
        var logger = Logger(label: "DiscoveryTests")
        logger.logLevel = ProcessInfo.processInfo.environment["DISCOVERY_TEST_LOG"] != nil ? .trace : .critical
        guard let service = try? DiscoveryService(logger: logger, dbusSystemBusAddress: busA) else { return nil }
        try? service.start()
        return service
    }()

    /// The service, once avahi-daemon on a is running. Fails the test if the lab is missing.
    static func running() async throws -> DiscoveryService {
        guard let service else {
            Issue.record("the network lab is not up (Scripts/lab up); required under CI=true")
            throw LabFailure("the network lab is not up")
        }
        try await waitUntil("avahi on a running", timeout: .seconds(20)) { service.avahiState == .running }
        return service
    }

    /// A fresh service type, so concurrent tests and leftovers never meet.
    static func uniqueType() -> String { LabEnvironment.uniqueServiceType() }

    /// Runs `Scripts/lab ARGS...` to completion and returns its stdout; throws when it fails or times out.
    @discardableResult
    static func run(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> String {
        let result = try await SpawnedProcess.run([LabEnvironment.script] + arguments, timeout: timeout)
        guard result.status == 0 else {
            throw LabFailure(arguments.joined(separator: " ") + " exited \(result.status): \(result.stderr)")
        }
        return result.stdout
    }

    /// Starts `avahi-publish -s NAME TYPE PORT TXT...` on host b; stop it with `stop()`.
    static func publishOnB(name: String, type: String, port: Int, txt: [String]) throws -> LabPeer {
        try LabPeer(host: "b", ["avahi-publish", "-s", name, type, String(port)] + txt)
    }

    /// Starts the python-zeroconf peer (lab/zcpeer.py) publishing on host b; stop it with `stop()`.
    static func zeroconfPublishOnB(
        name: String,
        type: String,
        port: Int,
        txt: [String],
        updateAfter seconds: Int? = nil
    ) throws -> LabPeer {
        var arguments = [
            LabEnvironment.python, LabEnvironment.zeroconfPeer, "publish",
            "--name", name, "--type", type, "--port", String(port),
        ]
        for string in txt { arguments += ["--txt", string] }
        if let seconds { arguments += ["--update-after", String(seconds)] }
        return try LabPeer(host: "b", arguments)
    }

    /// `avahi-browse -r -t -p TYPE` on host b: the resolved lines, split on ';'.
    static func browseOnB(type: String) async throws -> [[String]] {
        let output = try await run(["exec", "b", "avahi-browse", "-r", "-t", "-p", "--no-db-lookup", type])
        var result: [[String]] = []
        for line in output.split(separator: "\n") where line.hasPrefix("=;") {
            let fields: [String] = line.split(separator: ";", omittingEmptySubsequences: false).map { String($0) }
            result.append(fields)
        }
        return result
    }
}
