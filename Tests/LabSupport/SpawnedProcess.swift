#if canImport(Glibc)
    import Glibc
#endif
import Foundation

/// A child process started with `posix_spawn`: stdin /dev/null, stdout and stderr captured, every other descriptor
/// closed but the ones passed on (as 3, 4, ..., the way socket activation passes them), an empty signal mask and
/// default signal handlers.
///
/// Not Foundation's `Process`: that one passes on the test runner's signal mask (a peer would ignore SIGTERM and
/// never send goodbyes), and it treats a child as running until every process that inherited its private socket
/// has exited, so `Scripts/lab avahi start` (which leaves avahi-daemon behind) would never finish.
public final class SpawnedProcess: @unchecked Sendable {
    // @unchecked Sendable: `exitStatus`, `out`, `err` and `openStreams` are guarded by `lock`; `pid` is immutable.
    public let pid: pid_t
    private let lock = NSLock()
    private var exitStatus: Int32?
    private var out: [UInt8] = []
    private var err: [UInt8] = []
    private var openStreams = 2

    public init(_ arguments: [String], environment: [String: String] = [:], passing descriptors: [Int32] = []) throws {
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0 else { throw LabFailure("pipe failed") }
        guard pipe(&errPipe) == 0 else {
            close(outPipe[0])
            close(outPipe[1])
            throw LabFailure("pipe failed")
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
            throw LabFailure("posix_spawn \(arguments[0]) failed: \(String(cString: strerror(rc)))")
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

    public var stdout: String { lock.withLock { String(decoding: out, as: UTF8.self) } }
    public var stderr: String { lock.withLock { String(decoding: err, as: UTF8.self) } }

    /// Exit status (128 + signal when killed) once the process ended; reaps it.
    public var status: Int32? {
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

    public var isRunning: Bool { status == nil }

    /// Waits for the exit status; nil when still running after `timeout`.
    public func wait(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return status
    }

    /// Like ``wait(timeout:)``, blocking the thread (for `defer` and `deinit`).
    public func waitBlocking(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status { return status }
            usleep(20_000)
        }
        return status
    }

    /// Waits (bounded) until both output pipes reached end of file, so stdout/stderr are complete.
    public func drain(timeout: Duration = .seconds(2)) async {
        _ = await eventually(timeout: timeout) { self.lock.withLock { self.openStreams == 0 } }
    }

    /// Like ``drain(timeout:)``, blocking the thread.
    public func drainBlocking(timeout: Duration = .seconds(2)) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, lock.withLock({ openStreams > 0 }) { usleep(10_000) }
    }

    public func kill(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// SIGTERM, then SIGKILL after 5 s.
    public func stop() async {
        kill(SIGTERM)
        if await wait(timeout: .seconds(5)) == nil {
            kill(SIGKILL)
            _ = await wait(timeout: .seconds(5))
        }
    }

    /// Like ``stop()``, blocking.
    public func stopBlocking() {
        kill(SIGTERM)
        if waitBlocking(timeout: .seconds(5)) == nil {
            kill(SIGKILL)
            _ = waitBlocking(timeout: .seconds(5))
        }
    }

    /// Runs `arguments` to completion (killed after `timeout`).
    public static func run(
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

/// The result of running a command to completion.
public struct CommandResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

extension SpawnedProcess {
    /// Runs `arguments` to completion (killed after `timeout`), blocking the calling thread: for code that cannot
    /// await (synchronous tests, `defer`).
    public static func runBlocking(
        _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(30)
    ) throws -> CommandResult {
        let process = try SpawnedProcess(arguments, environment: environment)
        var status = process.waitBlocking(timeout: timeout)
        if status == nil {
            process.kill(SIGKILL)
            status = process.waitBlocking(timeout: .seconds(5))
        }
        process.drainBlocking()
        return CommandResult(status: status ?? -1, stdout: process.stdout, stderr: process.stderr)
    }
}
