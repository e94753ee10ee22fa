import DNSSDModel
import DiscoverClient
import Foundation
import LabSupport
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
    static var python: String { LabEnvironment.python }
    static var zcpeer: String { LabEnvironment.zeroconfPeer }

    /// A service type no other test (or earlier run) uses: `_dt` + 8 hex digits + `._tcp`.
    static func uniqueType() -> String { LabEnvironment.uniqueServiceType() }

    /// `base` + a random suffix, so names never meet leftovers of an earlier run.
    static func uniqueName(_ base: String) -> String { base + " " + LabEnvironment.randomHex() }

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

/// The events of a browse through the daemon, collected in the background.
typealias BrowseRecorder = StreamLog<BrowseEvent>
