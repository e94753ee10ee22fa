import Foundation
import LabSupport
import Testing

/// Where the built executables are: `$DISCOVERD_BIN_DIR`, else next to the test bundle.
enum BuiltProducts {
    static var directory: URL {
        if let dir = ProcessInfo.processInfo.environment["DISCOVERD_BIN_DIR"], !dir.isEmpty {
            return URL(fileURLWithPath: dir)
        }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent()
    }

    static var discoverd: String { directory.appendingPathComponent("discoverd").path }
    static var discover: String { directory.appendingPathComponent("discover").path }
}

/// A scratch directory removed at deinit.
final class TemporaryDirectory: @unchecked Sendable {
    // Immutable after init; deinit runs once.
    let path: String

    init(_ prefix: String = "dtest") {
        let template = "/tmp/\(prefix)-XXXXXX"
        var bytes = Array(template.utf8CString)
        let result = bytes.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = result.map { String(cString: $0) } ?? "/tmp/\(prefix)-\(UUID().uuidString.prefix(8))"
        chmod(path, 0o755)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs a command to completion (bounded by `timeout` seconds), capturing its output.
func runCommand(_ arguments: [String], environment: [String: String] = [:], timeout: Double = 30) throws -> CommandResult {
    try SpawnedProcess.runBlocking(arguments, environment: environment, timeout: .milliseconds(Int(timeout * 1000)))
}

/// A discoverd process started by a test and stopped (by PID) when the test ends.
final class DaemonProcess: @unchecked Sendable {
    // `process` is only touched from the test's own task; deinit runs once.
    let socketPath: String
    let directory: TemporaryDirectory
    let logPath: String
    private let process: Process

    /// Starts `discoverd` and waits until it accepts connections.
    /// - Parameters:
    ///   - arguments: extra flags; `--socket`, `--upstream` and `--state-dir` are added unless given.
    ///   - config: contents of a config file passed with `--config`.
    ///   - prefix: command prefix, e.g. `setpriv ...` to run as another user.
    ///   - passSocketFlag: false to let the daemon choose its default path (which must be `socketPath`).
    ///   - passUpstreamFlag: false to leave the upstreams to the config file (flags override the file, on reload too).
    ///   - journalStream: set `JOURNAL_STREAM` to the log file's device and inode, as systemd does for a
    ///     service whose output goes to the journal.
    init(
        arguments: [String] = [], config: String? = nil, prefix: [String] = [], environment: [String: String] = [:],
        socketPath: String? = nil, passSocketFlag: Bool = true, passUpstreamFlag: Bool = true,
        waitForSocket: Bool = true, journalStream: Bool = false
    ) throws {
        directory = TemporaryDirectory("discoverd")
        self.socketPath = socketPath ?? directory.path + "/io.discoverd"
        logPath = directory.path + "/discoverd.log"
        var args = arguments
        if passSocketFlag && !args.contains("--socket") { args += ["--socket", self.socketPath] }
        // Tests never reach the machine's own resolvers: loopback port 9 (discard) unless told otherwise.
        if passUpstreamFlag && !args.contains("--upstream") { args += ["--upstream", "127.0.0.1:9"] }
        if !args.contains("--state-dir") { args += ["--state-dir", directory.path + "/state"] }
        // No DNS stub unless a test asks for one (by flag or in its config): parallel daemons would compete for it.
        let configListensStub = config?.contains("[stub]") ?? false
        if !args.contains("--stub-listen") && !configListensStub { args += ["--stub-listen", "none"] }
        if let config {
            let path = directory.path + "/discoverd.conf"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            // A file with an inline TSIG secret must be private, as the daemon checks.
            chmod(path, 0o600)
            args += ["--config", path]
        }
        let command = prefix + [BuiltProducts.discoverd] + args
        process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        var env = ProcessInfo.processInfo.environment
        env["DISCOVERD_SOCKET"] = nil
        // Whatever service manager runs the tests is not the daemon's: it gets only what a test gives it.
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
            env[key] = nil
        }
        for (key, value) in environment { env[key] = value }
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        if journalStream {
            var info = stat()
            guard stat(logPath, &info) == 0 else { throw DaemonError("cannot stat \(logPath)") }
            env["JOURNAL_STREAM"] = "\(info.st_dev):\(info.st_ino)"
        }
        process.environment = env
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardError = log
        process.standardOutput = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        if waitForSocket { try self.waitForSocket() }
    }

    var pid: Int32 { process.processIdentifier }
    /// The file given with `--config`.
    var configPath: String { directory.path + "/discoverd.conf" }
    var isRunning: Bool { process.isRunning }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func waitForSocket(timeout: Double = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if RawConnection.canConnect(socketPath) { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        throw DaemonError("discoverd did not start listening on \(socketPath); log:\n\(log)")
    }

    /// Waits for the process to exit on its own and returns its status.
    func waitForExit(timeout: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// Sends SIGTERM and returns the exit status (nil when it did not exit in time; it is then killed).
    @discardableResult
    func stop(timeout: Double = 20) -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, SIGTERM)
        if let status = waitForExit(timeout: timeout) { return status }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return nil
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

struct DaemonError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
