import DiscoverClient
import Foundation
import LabSupport
import Testing

/// The network lab (Scripts/lab, lab/README.md) as the resolver tests use it: Knot at `LAB_KNOT` serving
/// `lab.test`, the programmable fault server at `LAB_FAULT` (controlled over `LAB_FAULT_CTL`), and namespace
/// `dlab-a`, the only place a daemon under test can reach them from. Nothing here sends DNS anywhere else.
enum ResolverLab {
    static var directory: String { LabEnvironment.directory }
    static var repository: String { LabEnvironment.repository }
    static var script: String { LabEnvironment.script }
    static var isCI: Bool { LabEnvironment.isCI }
    static var environment: [String: String]? { LabEnvironment.environment }

    /// Whether the lab looks usable: env file, namespace dlab-a and the fault server's control socket.
    static let isUp: Bool = {
        guard let env = environment, let ctl = env["LAB_FAULT_CTL"], let ns = env["LAB_NS_A"] else { return false }
        return FileManager.default.fileExists(atPath: "/run/netns/" + ns) && FileManager.default.fileExists(atPath: ctl)
    }()

    /// Lab tests run when the lab is up, and always under CI (where a missing lab must fail, never skip).
    static var shouldRun: Bool { isUp || isCI }
    static let skipMessage = "the network lab is not up: run Scripts/lab up (under CI=true this is a failure)"

    /// The lab environment; records a failure and throws when the lab is missing (the CI case).
    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: String] {
        guard isUp, let env = environment else {
            Issue.record("the network lab is not up (Scripts/lab up); lab tests are required under CI=true",
                         sourceLocation: sourceLocation)
            throw DaemonError("lab missing")
        }
        return env
    }

    static var knot: String { environment?["LAB_KNOT"] ?? "192.0.2.53" }
    static var fault: String { environment?["LAB_FAULT"] ?? "192.0.2.54" }
    static var namespaceA: String { environment?["LAB_NS_A"] ?? "dlab-a" }
    static var zone: String { environment?["LAB_ZONE"] ?? "lab.test" }

    /// A name no other test (or earlier run) uses: `PREFIX-<8 hex>.lab.test`. The fault server answers it only
    /// through rules; Knot says NXDOMAIN.
    static func uniqueName(_ prefix: String) -> String {
        "\(prefix)-\(LabEnvironment.randomHex()).\(zone)"
    }

    /// The fault server's control client; records a failure and throws when the lab is missing.
    static var faults: FaultControl {
        get throws {
            let env = try require()
            return FaultControl(path: env["LAB_FAULT_CTL"] ?? directory + "/dns/fault.ctl")
        }
    }

    /// `kdig +short @SERVER NAME TYPE`, run inside dlab-a; the answer lines.
    static func kdig(_ name: String, _ type: String, server: String? = nil) throws -> [String] {
        let result = try runCommand(
            [script, "exec", "a", "kdig", "+short", "+time=2", "+retry=1", "@" + (server ?? knot), name, type],
            timeout: 15)
        guard result.status == 0 else { throw DaemonError("kdig \(name) \(type) failed: \(result.stderr)") }
        return result.stdout.split(separator: "\n").map(String.init)
    }
}

/// Starts `discoverd` inside namespace dlab-a (`ip netns exec` execs in place, so the PID is the daemon's),
/// asking `upstream` (the fault server by default). Its socket lives in /tmp, reachable from the tests.
/// With `upstreamFromConfig`, no `--upstream` flag is passed: the config file names the upstreams.
func labDaemon(
    upstream: String? = nil, config: String? = nil, arguments: [String] = [], upstreamFromConfig: Bool = false,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> DaemonProcess {
    _ = try ResolverLab.require(sourceLocation: sourceLocation)
    var args = arguments
    if !upstreamFromConfig && !args.contains("--upstream") { args += ["--upstream", upstream ?? ResolverLab.fault] }
    // Not DaemonProcess's own wait: its probe (RawConnection) closes a socket twice when connect fails, and in
    // parallel tests the second close hits a descriptor another thread has just opened.
    let daemon = try DaemonProcess(
        arguments: args, config: config, prefix: ["/usr/sbin/ip", "netns", "exec", ResolverLab.namespaceA],
        passUpstreamFlag: !upstreamFromConfig, waitForSocket: false)
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline {
        if ResolverLab.canConnect(daemon.socketPath) { return daemon }
        if !daemon.isRunning { break }
        usleep(20_000)
    }
    daemon.stop(timeout: 5)
    throw DaemonError("discoverd did not start listening on \(daemon.socketPath); log:\n\(daemon.log)")
}

extension ResolverLab {
    /// Whether a Unix stream socket accepts connections (the descriptor is closed exactly once).
    static func canConnect(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }
}

/// A client of the fault server's control socket (JSON lines; see the docstring of lab/dnsfault.py).
///
/// Every rule a test sets is for a name of its own; tests clear their rules and never `reset` (other tests, and
/// other engineers' tests, use the same server at the same time).
struct FaultControl: Sendable {
    let path: String

    /// Sends one command, returns the reply object; throws when the server says `ok: false`.
    ///
    /// A failure to talk to the socket is retried (every command is idempotent): tests in this process start
    /// and stop processes concurrently, and a connection can fail transiently.
    @discardableResult
    func request(_ command: [String: Any]) throws -> [String: Any] {
        var lastError: (any Error)?
        for attempt in 0..<3 {
            do {
                return try exchange(command)
            } catch let error as FaultControlRefusal {
                throw DaemonError(error.description)
            } catch {
                lastError = error
                usleep(UInt32(50_000 * (attempt + 1)))
            }
        }
        throw lastError ?? DaemonError("fault control: no reply")
    }

    private struct FaultControlRefusal: Error, CustomStringConvertible { var description: String }

    private func exchange(_ command: [String: Any]) throws -> [String: Any] {
        let data = try JSONSerialization.data(withJSONObject: command)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw DaemonError("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw DaemonError("fault control \(path): \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let line = Array(data) + [UInt8(ascii: "\n")]
        var offset = 0
        while offset < line.count {
            let n = line[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw DaemonError("fault control: send failed") }
            offset += n
        }
        var reply: [UInt8] = []
        while !reply.contains(UInt8(ascii: "\n")) {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            reply += chunk[..<n]
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(reply)) as? [String: Any] else {
            throw DaemonError("fault control: unreadable reply to \(command): \(String(decoding: reply, as: UTF8.self))")
        }
        guard object["ok"] as? Bool == true else {
            throw FaultControlRefusal(description: "fault control refused \(command): \(object["error"] ?? "?")")
        }
        return object
    }

    /// Sets the rule for (name, qtype); replaces an earlier one for the same pair.
    func set(
        _ name: String, _ mode: String, qtype: String? = "HTTPS", delayMs: Int? = nil, times: Int? = nil,
        rdata: [String]? = nil, ttl: Int? = nil, target: String? = nil
    ) throws {
        var command: [String: Any] = ["cmd": "set", "name": name, "mode": mode]
        if let qtype { command["qtype"] = qtype }
        if let delayMs { command["delay_ms"] = delayMs }
        if let times { command["times"] = times }
        if let rdata { command["rdata"] = rdata }
        if let ttl { command["ttl"] = ttl }
        if let target { command["target"] = target }
        try request(command)
    }

    /// Serves `rdata` (hex, one string per record) with `ttl` for `name`/`qtype`.
    func raw(_ name: String, _ rdata: [String], ttl: Int, qtype: String = "HTTPS", delayMs: Int? = nil) throws {
        try set(name, "raw", qtype: qtype, delayMs: delayMs, rdata: rdata, ttl: ttl)
    }

    /// Removes the rule for (name, qtype) (no error when there is none).
    func clear(_ name: String, qtype: String? = "HTTPS") {
        var command: [String: Any] = ["cmd": "clear", "name": name]
        if let qtype { command["qtype"] = qtype }
        _ = try? request(command)
    }

    /// Queries seen so far for `name` (optionally one type and transport).
    func count(_ name: String, qtype: String? = "HTTPS", transport: String? = nil) throws -> Int {
        var command: [String: Any] = ["cmd": "count", "name": name]
        if let qtype { command["qtype"] = qtype }
        if let transport { command["transport"] = transport }
        let reply = try request(command)
        return (reply["total"] as? Int) ?? (reply["total"] as? NSNumber)?.intValue ?? -1
    }
}

/// Builds HTTPS/SVCB RDATA in hex by hand, so tests can serve exactly the bytes they mean (malformed ones too).
enum SVCBWire {
    /// One SvcParam: key and raw value bytes.
    struct Param {
        var key: UInt16
        var value: [UInt8]

        static func alpn(_ ids: [String]) -> Param {
            Param(key: 1, value: ids.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) })
        }
        static func port(_ port: UInt16) -> Param { Param(key: 3, value: [UInt8(port >> 8), UInt8(port & 0xFF)]) }
        static func ipv4hint(_ address: [UInt8]) -> Param { Param(key: 4, value: address) }
    }

    /// RDATA: priority, target (dotted, "." for the root), params in the given order, then `trailing` bytes.
    static func rdata(priority: UInt16 = 1, target: String = ".", params: [Param], trailing: [UInt8] = []) -> String {
        var bytes: [UInt8] = [UInt8(priority >> 8), UInt8(priority & 0xFF)]
        for label in target.split(separator: ".") { bytes += [UInt8(label.utf8.count)] + Array(label.utf8) }
        bytes.append(0)
        for param in params {
            bytes += [UInt8(param.key >> 8), UInt8(param.key & 0xFF)]
            bytes += [UInt8(param.value.count >> 8), UInt8(param.value.count & 0xFF)]
            bytes += param.value
        }
        bytes += trailing
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// `1 . alpn=h3`: a valid ServiceMode record, the control case.
    static var h3: String { rdata(params: [.alpn(["h3"])]) }
}

/// Milliseconds `body` took, with its result.
func measure<T>(_ body: () async throws -> T) async rethrows -> (T, Double) {
    let start = ContinuousClock.now
    let value = try await body()
    let elapsed = ContinuousClock.now - start
    return (value, Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
}

/// The error a call threw, as a DiscoverError (nil when it succeeded or threw something else).
func discoverError<T>(_ body: () async throws -> T) async -> DiscoverError? {
    do {
        _ = try await body()
        return nil
    } catch let error as DiscoverError {
        return error
    } catch {
        return DiscoverError(code: .init(rawValue: "test.UnexpectedError"), message: "\(error)")
    }
}
