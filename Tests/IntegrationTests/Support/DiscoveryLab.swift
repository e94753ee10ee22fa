import DNSSDModel
import DiscoverClient
import Foundation
import Testing

/// The network lab as the DNS-SD tests use it: discoverd runs inside dlab-a on host a's avahi-daemon (its own
/// D-Bus), peers (avahi-publish, avahi-browse, python-zeroconf) run inside dlab-b. Nothing here starts an mDNS
/// responder in the machine's own network namespace. The lab env file is read by ``ResolverLab``.
enum DiscoveryLab {
    static var environment: [String: String]? { ResolverLab.environment }
    static var script: String { ResolverLab.script }
    static var repository: String { ResolverLab.repository }

    /// Namespaces dlab-a and dlab-b and both hosts' D-Bus sockets exist.
    static let isUp: Bool = {
        guard let env = environment else { return false }
        for key in ["LAB_NS_A", "LAB_NS_B"] {
            guard let ns = env[key], FileManager.default.fileExists(atPath: "/run/netns/" + ns) else { return false }
        }
        for key in ["LAB_A_DBUS", "LAB_B_DBUS"] {
            guard let address = env[key], address.hasPrefix("unix:path=") else { return false }
            guard FileManager.default.fileExists(atPath: String(address.dropFirst("unix:path=".count))) else {
                return false
            }
        }
        return true
    }()

    /// Lab tests run when the lab is up, and always under CI=true (where a missing lab is a failure, not a skip).
    static var shouldRun: Bool { isUp || ResolverLab.isCI }

    /// The lab environment; records a failure and throws when the lab is missing (the CI case).
    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: String] {
        guard isUp, let env = environment else {
            Issue.record(
                "the network lab is not up (Scripts/lab up); lab tests are required under CI=true",
                sourceLocation: sourceLocation)
            throw DaemonError("lab missing")
        }
        return env
    }

    static var namespaceA: String { environment?["LAB_NS_A"] ?? "dlab-a" }
    static var busA: String { environment?["LAB_A_DBUS"] ?? "" }
    static var python: String {
        let venv = repository + "/.venv/bin/python"
        return FileManager.default.isExecutableFile(atPath: venv) ? venv : "/usr/bin/python3"
    }
    static var zcpeer: String { repository + "/lab/zcpeer.py" }

    /// A service type no other test (or earlier run) uses: `_dt` + 8 hex digits + `._tcp`.
    static func uniqueType() -> String { "_dt" + randomHex() + "._tcp" }

    /// `base` + a random suffix, so names never meet leftovers of an earlier run.
    static func uniqueName(_ base: String) -> String { base + " " + randomHex() }

    static func randomHex() -> String {
        let hex = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// Starts discoverd inside dlab-a, talking to host a's avahi-daemon. Its socket is in /tmp (mode 0755 dir).
    static func daemon(config: String? = nil, arguments: [String] = []) throws -> DaemonProcess {
        _ = try require()
        return try DaemonProcess(
            arguments: arguments, config: config, prefix: ["/usr/sbin/ip", "netns", "exec", namespaceA],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": busA])
    }

    /// `Scripts/lab ARGS...` to completion.
    @discardableResult
    static func lab(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> CommandResult {
        try await SpawnedProcess.run([script] + arguments, timeout: timeout)
    }

    /// Runs a command inside lab host `host` (a or b) with that host's D-Bus, to completion.
    static func exec(_ host: String, _ command: [String], timeout: Duration = .seconds(30)) async throws
        -> CommandResult
    {
        try await lab(["exec", host] + command, timeout: timeout)
    }

    /// Stops (`stop`) or starts (`start`) host `host`'s avahi-daemon; throws when the lab script fails.
    static func avahi(_ action: String, _ host: String) async throws {
        let result = try await lab(["avahi", action, host], timeout: .seconds(150))
        guard result.status == 0 else {
            throw DaemonError("Scripts/lab avahi \(action) \(host) failed (\(result.status)): \(result.stderr)")
        }
    }

    /// `Scripts/lab avahi start HOST` from a `defer` (blocking): puts avahi-daemon back even when a test failed.
    static func restoreAvahi(_ host: String) {
        guard let process = try? SpawnedProcess([script, "avahi", "start", host]) else { return }
        if process.waitBlocking(timeout: .seconds(150)) == nil { process.kill(SIGKILL) }
    }

    /// What `avahi-browse -t -r -p TYPE` run on host b resolves, one entry per interface and protocol.
    static func browseFromB(_ type: String) async throws -> [AvahiBrowseEntry] {
        let result = try await exec(
            "b", ["avahi-browse", "-t", "-r", "-p", "--no-db-lookup", type], timeout: .seconds(20))
        return result.stdout.split(separator: "\n").compactMap { AvahiBrowseEntry(parsing: String($0)) }
    }

    /// What b sees of `type`, for failure messages: `name proto port [txt]` per resolved entry.
    static func seenOnB(_ type: String) async -> [String] {
        ((try? await browseFromB(type)) ?? []).map { "\($0.name) \($0.proto) \($0.port) \($0.txt)" }
    }

    /// Polls `avahi-browse` on b until `condition` holds for what it sees, or `timeout` passes.
    static func waitForB(
        _ type: String, timeout: Duration = .seconds(15), _ condition: ([AvahiBrowseEntry]) -> Bool
    ) async -> Bool {
        await eventually(timeout: timeout) { condition((try? await browseFromB(type)) ?? []) }
    }

    /// Waits until what b sees of `type` satisfies `condition`; else records `what` with what b does see.
    @discardableResult
    static func expectOnB(
        _ type: String, timeout: Duration = .seconds(15), _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation, _ condition: ([AvahiBrowseEntry]) -> Bool
    ) async -> Bool {
        if await waitForB(type, timeout: timeout, condition) { return true }
        Issue.record("\(what); avahi-browse on b sees: \(await seenOnB(type))", sourceLocation: sourceLocation)
        return false
    }

    /// python-zeroconf browsing on host b for `seconds`: one JSON object per resolved service.
    static func zeroconfBrowseFromB(_ type: String, seconds: Double = 3) async throws -> [[String: Any]] {
        let result = try await exec(
            "b", [python, zcpeer, "browse", "--type", type, "--seconds", String(seconds)],
            timeout: .seconds(seconds + 20))
        return result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// The IPv6 link-local address of b's lab interface (no zone).
    static func linkLocalAddressOfB() async throws -> String {
        let result = try await exec("b", ["ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link"])
        guard let field = result.stdout.split(separator: " ").first(where: { $0.hasPrefix("fe80:") }) else {
            throw DaemonError("no link-local address on b: \(result.stdout) \(result.stderr)")
        }
        return String(field.split(separator: "/")[0])
    }

    /// Waits until the daemon says avahi is running (it starts in `connecting`).
    static func waitForAvahi(_ client: DiscoverClient, timeout: Duration = .seconds(20)) async throws {
        let running = await eventually(timeout: timeout) { (try? await client.status().avahi) == .running }
        guard running else { throw DaemonError("discoverd did not reach avahi=running within \(timeout)") }
    }
}

/// One resolved line (`=;...`) of `avahi-browse -p -r`.
struct AvahiBrowseEntry: Equatable {
    var interface: String
    var proto: String
    var name: String
    var type: String
    var domain: String
    var host: String
    var address: String
    var port: Int
    var txt: [String]

    /// Parses `=;eth0;IPv4;Name\032x;_t._tcp;local;host.local;192.0.2.1;4242;"a=b" "c=d"`; nil for other lines.
    init?(parsing line: String) {
        let fields = line.split(separator: ";", maxSplits: 9, omittingEmptySubsequences: false).map(String.init)
        guard fields.count >= 9, fields[0] == "=" else { return nil }
        interface = fields[1]
        proto = fields[2]
        name = Self.unescape(fields[3])
        type = fields[4]
        domain = fields[5]
        host = fields[6]
        address = fields[7]
        port = Int(fields[8]) ?? -1
        txt = fields.count > 9 ? Self.quotedStrings(fields[9]) : []
    }

    /// avahi-browse escapes `.`, `\` and non-printable bytes of names as `\.`, `\\` and `\DDD` (decimal).
    static func unescape(_ text: String) -> String {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            guard byte == UInt8(ascii: "\\"), let next = input.first else {
                bytes.append(byte)
                continue
            }
            let digits = input.prefix(3)
            if digits.count == 3, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let value = UInt8(String(decoding: digits, as: UTF8.self))
            {
                bytes.append(value)
                input = input.dropFirst(3)
            } else {
                bytes.append(next)
                input = input.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `"a=b" "c=d"` → `["a=b", "c=d"]`.
    static func quotedStrings(_ text: String) -> [String] {
        var result: [String] = []
        var current: String?
        for character in text {
            if character == "\"" {
                if let value = current {
                    result.append(value)
                    current = nil
                } else {
                    current = ""
                }
            } else if current != nil {
                current!.append(character)
            }
        }
        return result
    }
}

/// A peer running in a lab host: `Scripts/lab exec HOST CMD...` (which execs in place, so the PID is the peer's).
final class LabPeer: Sendable {
    let process: SpawnedProcess

    /// Starts `command` in lab host `host` (a or b).
    init(host: String, _ command: [String]) throws {
        process = try SpawnedProcess([DiscoveryLab.script, "exec", host] + command)
    }

    /// An `avahi-publish -s NAME TYPE PORT TXT...` on host b; returns once Avahi says it is established.
    static func avahiPublish(_ name: String, _ type: String, port: Int, txt: [String] = []) async throws -> LabPeer {
        let peer = try LabPeer(host: "b", ["avahi-publish", "-s", name, type, String(port)] + txt)
        guard await peer.waitForOutput(containing: "Established under name") else {
            await peer.stop()
            throw DaemonError("avahi-publish \(name) not established: \(peer.output)")
        }
        return peer
    }

    /// stdout and stderr so far.
    var output: String { process.stdout + process.stderr }

    /// Waits until the peer printed `text` (on stdout or stderr).
    func waitForOutput(containing text: String, timeout: Duration = .seconds(15)) async -> Bool {
        await eventually(timeout: timeout) { self.output.contains(text) }
    }

    /// SIGTERM (the peer says goodbye on the network), SIGKILL after 5 s.
    func stop() async { await process.stop() }

    deinit { process.stopBlocking() }
}

/// A command running in the background whose stdout is read line by line (the CLI's `advertise`, `call --more`).
final class BackgroundCommand: Sendable {
    let process: SpawnedProcess

    init(_ arguments: [String]) throws { process = try SpawnedProcess(arguments) }

    var stdout: String { process.stdout }
    var stderr: String { process.stderr }
    var lines: [String] { stdout.split(separator: "\n").map(String.init) }

    /// The first complete stdout line satisfying `predicate`, waiting up to `timeout`.
    func line(timeout: Duration = .seconds(15), where predicate: @escaping (String) -> Bool) async -> String? {
        var found: String?
        _ = await eventually(timeout: timeout) {
            let text = self.stdout
            let complete = text.hasSuffix("\n") ? text : String(text[..<(text.lastIndex(of: "\n") ?? text.startIndex)])
            found = complete.split(separator: "\n").map(String.init).first(where: predicate)
            return found != nil
        }
        return found
    }

    /// Waits for the command to exit by itself; its status, or nil when it still runs after `timeout`.
    func waitForExit(timeout: Duration = .seconds(10)) async -> Int32? { await process.wait(timeout: timeout) }

    func stop() async { await process.stop() }

    deinit { process.stopBlocking() }
}

/// A child process started with `posix_spawn`: stdin /dev/null, stdout and stderr captured, every other descriptor
/// closed but the ones passed on (as 3, 4, ..., the way socket activation passes them), an empty signal mask and
/// default signal handlers.
///
/// Not Foundation's `Process`: that one passes on the test runner's signal mask (a peer would ignore SIGTERM and
/// never send goodbyes), and it treats a child as running until every process that inherited its private socket
/// has exited, so `Scripts/lab avahi start` (which leaves avahi-daemon behind) would never finish.
final class SpawnedProcess: @unchecked Sendable {
    // @unchecked Sendable: `exitStatus`, `out`, `err` and `openStreams` are guarded by `lock`; `pid` is immutable.
    let pid: pid_t
    private let lock = NSLock()
    private var exitStatus: Int32?
    private var out: [UInt8] = []
    private var err: [UInt8] = []
    private var openStreams = 2

    init(_ arguments: [String], environment: [String: String] = [:], passing descriptors: [Int32] = []) throws {
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0 else { throw DaemonError("pipe failed") }
        guard pipe(&errPipe) == 0 else {
            close(outPipe[0])
            close(outPipe[1])
            throw DaemonError("pipe failed")
        }
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

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
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        // Copies above the targets first, so no dup2 overwrites a descriptor still to be passed.
        let copies = descriptors.map { fcntl($0, F_DUPFD_CLOEXEC, 100) }
        defer { for copy in copies where copy >= 0 { close(copy) } }
        for (index, copy) in copies.enumerated() { posix_spawn_file_actions_adddup2(&actions, copy, 3 + Int32(index)) }
        Self.closeInheritedDescriptors(&actions, from: 3 + Int32(descriptors.count))

        var env = ProcessInfo.processInfo.environment
        env["DISCOVERD_SOCKET"] = nil
        for (key, value) in environment { env[key] = value }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let rc = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            throw DaemonError("posix_spawn \(arguments[0]) failed: \(String(cString: strerror(rc)))")
        }
        self.pid = pid
        for (fd, isError) in [(outPipe[0], false), (errPipe[0], true)] {
            let thread = Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 16384)
                while true {
                    let n = read(fd, &buffer, buffer.count)
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { break }
                    lock.withLock {
                        if isError { err += buffer[..<n] } else { out += buffer[..<n] }
                    }
                }
                close(fd)
                lock.withLock { openStreams -= 1 }
            }
            thread.start()
        }
    }

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34) is not in Swift's Glibc module: look it up, else close
    /// what /proc/self/fd lists.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t, from first: Int32) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            let closeFrom = unsafeBitCast(symbol, to: CloseFrom.self)
            if closeFrom(&actions, first) == 0 { return }
        }
        let listed = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in listed.compactMap(Int32.init) where fd >= first {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
    }

    var stdout: String { lock.withLock { String(decoding: out, as: UTF8.self) } }
    var stderr: String { lock.withLock { String(decoding: err, as: UTF8.self) } }

    /// Exit status (128 + signal when killed) once the process ended; reaps it.
    var status: Int32? {
        lock.withLock {
            if let exitStatus { return exitStatus }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            if result == -1 && errno == ECHILD {
                exitStatus = -1
                return exitStatus
            }
            guard result == pid else { return nil }
            let signal = raw & 0x7F
            exitStatus = signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
            return exitStatus
        }
    }

    var isRunning: Bool { status == nil }

    /// Waits for the exit status; nil when still running after `timeout`.
    func wait(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return status
    }

    /// Like ``wait(timeout:)``, blocking the thread (for `defer` and `deinit`).
    func waitBlocking(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status { return status }
            usleep(20_000)
        }
        return status
    }

    /// Waits (bounded) until both output pipes reached end of file, so stdout/stderr are complete.
    func drain(timeout: Duration = .seconds(2)) async {
        _ = await eventually(timeout: timeout) { self.lock.withLock { self.openStreams == 0 } }
    }

    func kill(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// SIGTERM, then SIGKILL after 5 s.
    func stop() async {
        kill(SIGTERM)
        if await wait(timeout: .seconds(5)) == nil {
            kill(SIGKILL)
            _ = await wait(timeout: .seconds(5))
        }
    }

    /// Like ``stop()``, blocking.
    func stopBlocking() {
        kill(SIGTERM)
        if waitBlocking(timeout: .seconds(5)) == nil {
            kill(SIGKILL)
            _ = waitBlocking(timeout: .seconds(5))
        }
    }

    /// Runs `arguments` to completion (killed after `timeout`).
    static func run(
        _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(30)
    ) async throws -> CommandResult {
        let process = try SpawnedProcess(arguments, environment: environment)
        var status = await process.wait(timeout: timeout)
        if status == nil {
            process.kill(SIGKILL)
            status = await process.wait(timeout: .seconds(5))
        }
        await process.drain()
        return CommandResult(status: status ?? -1, stdout: process.stdout, stderr: process.stderr)
    }

    deinit {
        if isRunning {
            Glibc.kill(pid, SIGKILL)
            var raw: Int32 = 0
            waitpid(pid, &raw, 0)
        }
    }
}

/// Collects the changes of a browse stream in the background, for tests to wait on.
final class BrowseRecorder: @unchecked Sendable {
    // `changes` and `failure` are guarded by `lock`; `task` is set once in init.
    private let lock = NSLock()
    private var changes: [BrowseEvent] = []
    private var failure: (any Error)?
    private var task: Task<Void, Never>?

    init(_ stream: AsyncThrowingStream<BrowseEvent, any Error>) {
        task = Task { [weak self] in
            do {
                for try await change in stream {
                    guard let self else { return }
                    self.lock.withLock { self.changes.append(change) }
                }
            } catch {
                self?.lock.withLock { self?.failure = error }
            }
        }
    }

    var all: [BrowseEvent] { lock.withLock { changes } }
    var error: (any Error)? { lock.withLock { failure } }

    /// Index of the first change after `start` matching `predicate`, waiting up to `timeout`.
    func waitFor(
        after start: Int = -1, timeout: Duration = .seconds(15), _ predicate: @escaping (BrowseEvent) -> Bool
    ) async -> Int? {
        var index: Int?
        _ = await eventually(timeout: timeout) {
            let changes = self.all
            index = changes.indices.first { $0 > start && predicate(changes[$0]) }
            return index != nil
        }
        return index
    }

    func cancel() { task?.cancel() }

    deinit { task?.cancel() }
}

extension BrowseEvent {
    var service: DNSSDService? {
        switch self {
        case .added(let service), .removed(let service), .changed(let service): service
        case .allForNow: nil
        }
    }

    var isAdded: Bool { if case .added = self { true } else { false } }
    var isRemoved: Bool { if case .removed = self { true } else { false } }
    var isChanged: Bool { if case .changed = self { true } else { false } }

    /// A change of kind `kind` (added/removed/changed) for instance `name`.
    func `is`(_ kind: String, _ name: String) -> Bool {
        guard service?.name == name else { return false }
        switch kind {
        case "added": return isAdded
        case "removed": return isRemoved
        case "changed": return isChanged
        default: return false
        }
    }
}

/// A shared/exclusive lock over host a's avahi-daemon: ordinary lab tests hold it shared, tests that stop
/// avahi-daemon on a hold it exclusively, so they never pull Avahi from under each other.
///
/// It is an `flock` on `/run/lock/discoverd-lab-avahi-a.lock`, so it also works between test targets and test
/// processes: any other lab test that stops a's avahi-daemon should take the same lock with `LOCK_EX`.
///
/// ```swift
/// let hold = await AvahiGate.shared.enterShared()
/// defer { hold.release() }
/// ```
final class AvahiGate: Sendable {
    static let shared = AvahiGate()
    static let path = "/run/lock/discoverd-lab-avahi-a.lock"

    /// One holder's claim (its own open file description); `release()` once.
    struct Hold: Sendable {
        fileprivate let fd: Int32
        func release() {
            guard fd >= 0 else { return }
            flock(fd, LOCK_UN)
            close(fd)
        }
    }

    /// Waits while a test holds the lock exclusively.
    func enterShared() async -> Hold { await enter(LOCK_SH) }

    /// Waits until no other test holds the lock.
    func enterExclusive() async -> Hold { await enter(LOCK_EX) }

    private func enter(_ operation: Int32) async -> Hold {
        let fd = open(Self.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
        guard fd >= 0 else { return Hold(fd: -1) }
        // flock blocks: wait on a thread of its own, never on the cooperative pool.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                while flock(fd, operation) != 0 && errno == EINTR {}
                continuation.resume()
            }.start()
        }
        return Hold(fd: fd)
    }
}
