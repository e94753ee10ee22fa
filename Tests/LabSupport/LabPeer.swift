#if canImport(Glibc)
    import Glibc
#endif
import Foundation

/// A peer running in a lab host: `Scripts/lab exec HOST CMD...` (which execs in place, so the PID is the peer's).
public final class LabPeer: Sendable {
    public let process: SpawnedProcess

    /// Starts `command` in lab host `host` (a or b).
    public init(host: String, _ command: [String]) throws {
        process = try SpawnedProcess([LabEnvironment.script, "exec", host] + command)
    }

    /// An `avahi-publish -s NAME TYPE PORT TXT...` on host b; returns once Avahi says it is established.
    public static func avahiPublish(_ name: String, _ type: String, port: Int, txt: [String] = []) async throws -> LabPeer {
        let peer = try LabPeer(host: "b", ["avahi-publish", "-s", name, type, String(port)] + txt)
        guard await peer.waitForOutput(containing: "Established under name") else {
            await peer.stop()
            throw LabFailure("avahi-publish \(name) not established: \(peer.output)")
        }
        return peer
    }

    /// stdout and stderr so far.
    public var output: String { process.stdout + process.stderr }

    /// Waits until the peer printed `text` (on stdout or stderr).
    public func waitForOutput(containing text: String, timeout: Duration = .seconds(15)) async -> Bool {
        await eventually(timeout: timeout) { self.output.contains(text) }
    }

    /// SIGTERM (the peer says goodbye on the network), SIGKILL after 5 s.
    public func stop() async { await process.stop() }

    /// SIGKILL, for cleanup paths (no goodbye packets).
    public func kill() { process.kill(SIGKILL) }

    deinit { process.stopBlocking() }
}

/// A command running in the background whose stdout is read line by line (the CLI's `advertise`, `call --more`).
public final class BackgroundCommand: Sendable {
    public let process: SpawnedProcess

    public init(_ arguments: [String]) throws { process = try SpawnedProcess(arguments) }

    public var stdout: String { process.stdout }
    public var stderr: String { process.stderr }
    public var lines: [String] { stdout.split(separator: "\n").map(String.init) }

    /// The first complete stdout line satisfying `predicate`, waiting up to `timeout`.
    public func line(timeout: Duration = .seconds(15), where predicate: @escaping (String) -> Bool) async -> String? {
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
    public func waitForExit(timeout: Duration = .seconds(10)) async -> Int32? { await process.wait(timeout: timeout) }

    public func stop() async { await process.stop() }

    deinit { process.stopBlocking() }
}

