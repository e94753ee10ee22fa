import DNSSDModel
import Discovery
import Foundation
import Logging
import Testing

/// The network lab (Scripts/lab): hosts `a` and `b`, each with its own dbus-daemon and avahi-daemon in a network
/// namespace. The tests talk to host a's avahi over its D-Bus socket and publish/browse on host b with the Avahi
/// command-line tools run inside b.
enum Lab {
    static let directory = ProcessInfo.processInfo.environment["DISCOVERD_LAB_DIR"] ?? "/tmp/discoverd-lab"
    static let repository: String = {
        // Tests/DiscoveryTests/Lab/Lab.swift → repository root.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }()
    static let script = repository + "/Scripts/lab"
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// KEY=value lines of `$LAB/env`, or nil when the lab is not up.
    static let environment: [String: String]? = {
        guard let text = try? String(contentsOfFile: directory + "/env", encoding: .utf8) else { return nil }
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            result[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return result
    }()

    /// Host a's D-Bus address if the lab is up (its socket exists).
    static let busA: String? = {
        guard let address = environment?["LAB_A_DBUS"], address.hasPrefix("unix:path=") else { return nil }
        let path = String(address.dropFirst("unix:path=".count))
        return FileManager.default.fileExists(atPath: path) ? address : nil
    }()

    /// Lab tests run when the lab is up, and always under CI (where a missing lab is a failure).
    static var shouldRun: Bool { busA != nil || isCI }

    /// The one DiscoveryService of the test process, connected to host a's avahi-daemon.
    ///
    /// libdbus reads DBUS_SYSTEM_BUS_ADDRESS once per process, so every lab test shares this client.
    static let service: DiscoveryService? = {
        guard let busA else { return nil }
        var logger = Logger(label: "DiscoveryTests")
        logger.logLevel = ProcessInfo.processInfo.environment["DISCOVERY_TEST_LOG"] != nil ? .trace : .critical
        return try? DiscoveryService(logger: logger, dbusSystemBusAddress: busA)
    }()

    /// The service, once avahi-daemon on a is running. Fails the test if the lab is missing.
    static func running() async throws -> DiscoveryService {
        guard let service else {
            Issue.record("the network lab is not up (Scripts/lab up); required under CI=true")
            throw LabError.missing
        }
        try await waitUntil("avahi on a running", timeout: .seconds(20)) { service.avahiState == .running }
        return service
    }

    /// A fresh service type, so concurrent tests and leftovers never meet: `_dt` + 8 random hex digits.
    static func uniqueType() -> String {
        "_dt" + String(UInt32.random(in: 0...UInt32.max), radix: 16).leftPadded(to: 8) + "._tcp"
    }

    /// Runs `Scripts/lab ARGS...` to completion and returns its stdout.
    @discardableResult
    static func run(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("dlab-\(UUID().uuidString).out").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let child = try ChildProcess([script] + arguments, stdout: output)
        guard let status = await child.wait(timeout: timeout) else {
            child.signal(SIGKILL)
            throw LabError.commandFailed(arguments.joined(separator: " ") + " timed out")
        }
        guard status == 0 else {
            throw LabError.commandFailed(arguments.joined(separator: " ") + " exited \(status)")
        }
        return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    }

    /// Starts `avahi-publish -s NAME TYPE PORT TXT...` on host b; stop it with `stop()`.
    static func publishOnB(name: String, type: String, port: Int, txt: [String]) throws -> Publisher {
        Publisher(try ChildProcess([script, "exec", "b", "avahi-publish", "-s", name, type, String(port)] + txt))
    }

    /// Starts the python-zeroconf peer (lab/zcpeer.py) publishing on host b; stop it with `stop()`.
    static func zeroconfPublishOnB(
        name: String,
        type: String,
        port: Int,
        txt: [String],
        updateAfter seconds: Int? = nil
    ) throws -> Publisher {
        var arguments = [
            script, "exec", "b", repository + "/.venv/bin/python", repository + "/lab/zcpeer.py", "publish",
            "--name", name, "--type", type, "--port", String(port),
        ]
        for string in txt { arguments += ["--txt", string] }
        if let seconds { arguments += ["--update-after", String(seconds)] }
        return Publisher(try ChildProcess(arguments))
    }

    /// Whether the python-zeroconf peer can run (the venv made by Scripts/bootstrap).
    static var hasZeroconfPeer: Bool {
        FileManager.default.isExecutableFile(atPath: repository + "/.venv/bin/python")
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

/// A child process started with `posix_spawn`, with a clean signal mask and default signal handlers.
///
/// Foundation's `Process` passes on the test runner's signal mask, which blocks almost every signal: a peer started
/// that way ignores SIGTERM (no goodbye packets), and an avahi-daemon restarted that way could not be stopped.
final class ChildProcess: @unchecked Sendable {
    // @unchecked Sendable: `exitStatus` is only accessed under `lock`; `pid` is immutable.
    let pid: pid_t
    private let lock = NSLock()
    private var exitStatus: Int32?

    init(_ arguments: [String], stdout: String = "/dev/null") throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in Int32(1)..<32 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)

        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let rc = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environ)
        guard rc == 0 else { throw LabError.commandFailed("posix_spawn \(arguments[0]) failed: \(rc)") }
        self.pid = pid
    }

    /// Exit status (or 128 + signal) once the process ended; reaps it.
    var status: Int32? {
        self.lock.withLock {
            if let exitStatus { return exitStatus }
            var raw: Int32 = 0
            guard waitpid(self.pid, &raw, WNOHANG) == self.pid else { return nil }
            let terminatedBySignal = raw & 0x7F
            exitStatus = terminatedBySignal == 0 ? (raw >> 8) & 0xFF : 128 + terminatedBySignal
            return exitStatus
        }
    }

    var isRunning: Bool { self.status == nil }

    /// Waits for the exit status; nil after `timeout`.
    func wait(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = self.status { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return self.status
    }

    func signal(_ signal: Int32) {
        if self.isRunning { kill(self.pid, signal) }
    }

    deinit {
        if self.isRunning {
            kill(self.pid, SIGKILL)
            var raw: Int32 = 0
            waitpid(self.pid, &raw, 0)
        }
    }
}

/// A publisher process on host b (`Scripts/lab exec` execs into `ip netns exec`, which execs into the publisher,
/// so the PID is the publisher's).
final class Publisher: Sendable {
    let child: ChildProcess

    init(_ child: ChildProcess) {
        self.child = child
    }

    /// SIGTERM (the publisher withdraws its service with goodbye packets), SIGKILL if it is still there after 5 s.
    func stop() async {
        self.child.signal(SIGTERM)
        if await self.child.wait(timeout: .seconds(5)) == nil {
            self.child.signal(SIGKILL)
        }
    }

    /// SIGKILL, for cleanup paths.
    func kill() {
        self.child.signal(SIGKILL)
    }
}

enum LabError: Error {
    case missing
    case commandFailed(String)
    case timedOut(String)
}

/// Polls `condition` every 50 ms until it holds; fails the test after `timeout`.
func waitUntil(
    _ what: String,
    timeout: Duration = .seconds(15),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("timed out waiting for: \(what)", sourceLocation: sourceLocation)
    throw LabError.timedOut(what)
}

/// Collects the events of a stream (browse, record updates) in the background.
final class StreamLog<Event: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `events`, `error` and `finished` are only accessed under `lock`.
    private let lock = NSLock()
    private var events: [Event] = []
    private var error: (any Error)?
    private var finished = false
    private var task: Task<Void, Never>?

    init(_ stream: AsyncThrowingStream<Event, any Error>) {
        self.task = Task { [weak self] in
            do {
                for try await event in stream {
                    guard let self else { return }
                    self.lock.withLock { self.events.append(event) }
                }
                self?.lock.withLock { self?.finished = true }
            } catch {
                self?.lock.withLock {
                    self?.error = error
                    self?.finished = true
                }
            }
        }
    }

    var all: [Event] { self.lock.withLock { self.events } }
    var isFinished: Bool { self.lock.withLock { self.finished } }
    var failure: (any Error)? { self.lock.withLock { self.error } }

    func count(where predicate: (Event) -> Bool) -> Int {
        self.all.filter(predicate).count
    }

    /// Cancels the consuming task (which ends the subscription).
    func cancel() {
        self.task?.cancel()
    }

    deinit {
        self.task?.cancel()
    }
}

/// The events of a browse stream.
typealias EventLog = StreamLog<BrowseEvent>

extension StreamLog where Event == BrowseEvent {
    /// The services currently known from the events so far (added/changed minus removed), by name.
    var current: [String: DNSSDService] {
        var result: [String: DNSSDService] = [:]
        for event in self.all {
            switch event {
            case .added(let service), .changed(let service): result[service.name] = service
            case .removed(let service): result[service.name] = nil
            case .allForNow: break
            }
        }
        return result
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: max(0, length - self.count)) + self
    }
}

extension BrowseEvent {
    var service: DNSSDService? {
        switch self {
        case .added(let service), .changed(let service), .removed(let service): service
        case .allForNow: nil
        }
    }

    var isAdded: Bool { if case .added = self { true } else { false } }
    var isRemoved: Bool { if case .removed = self { true } else { false } }
    var isChanged: Bool { if case .changed = self { true } else { false } }
    var isAllForNow: Bool { if case .allForNow = self { true } else { false } }
}
