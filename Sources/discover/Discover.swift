import ArgumentParser
import DiscoverClient
import Foundation
#if canImport(Glibc)
import Glibc
#endif

@main
struct Discover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "Ask discoverd: DNS-SD services, HTTPS/SVCB records, HTTP/3 capability, connection plans.",
        discussion: """
            Talks to the discoverd daemon over its varlink socket (--socket, $DISCOVERD_SOCKET, or the \
            default path). Every command takes --json for scripts: one JSON object per line.

            Exit status: 0 success, 1 a negative answer (e.g. `h3` for a host without HTTP/3), \
            2 an error (daemon unreachable, invalid input, DNS failure).

            Examples:
              discover status
              discover browse _tictactoe._tcp
              discover h3 example.com
              discover call io.discoverd.Daemon.Status
            """,
        version: DiscoverdVersion.current,
        subcommands: [
            StatusCommand.self, BrowseCommand.self, ResolveCommand.self, AdvertiseCommand.self, TypesCommand.self,
            DomainsCommand.self, HTTPSCommand.self, H3Command.self, PlanCommand.self, AltSvcCommand.self,
            FlushCommand.self, CallCommand.self,
        ])
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("discoverd's socket (default: $DISCOVERD_SOCKET or the standard path).", valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Print JSON (one object per line) instead of text.")
    var json = false

    func client() -> DiscoverClient { DiscoverClient(socketPath: socket) }
}

/// Runs a command body, turning errors into one clear line on stderr and the documented exit status.
func runCommand(_ global: GlobalOptions, _ body: (DiscoverClient) async throws -> Int32) async throws {
    let client = global.client()
    let status: Int32
    do {
        status = try await body(client)
    } catch let error as DiscoverError {
        await client.close()
        Output.error(describe(error, client: client))
        throw ExitCode(2)
    } catch let error as ExitCode {
        await client.close()
        throw error
    } catch {
        await client.close()
        Output.error("discover: \(error)")
        throw ExitCode(2)
    }
    await client.close()
    if status != 0 { throw ExitCode(status) }
}

func describe(_ error: DiscoverError, client: DiscoverClient) -> String {
    func parameter(_ key: String) -> String { error.parameters[key]?.stringValue.map(displayName) ?? "?" }
    switch error.code {
    case .daemonUnreachable:
        return "cannot reach discoverd at \(client.socketPath): is it running?"
    case .methodNotImplemented:
        let method = error.parameters["method"]?.stringValue ?? "that method"
        return "discover: discoverd does not offer \(method) yet"
    case .noSuchName:
        return "discover: \(parameter("name")): no such name (NXDOMAIN)"
    case .resolverTimeout:
        return "discover: no DNS server answered in time"
    case .upstreamFailure:
        return "discover: the DNS server answered \(parameter("rcode"))"
    case .invalidDNSName:
        return "discover: invalid name \"\(parameter("name"))\": \(parameter("reason"))"
    case .invalidServiceType:
        return "discover: " + withSubject(parameter("reason"), "invalid service type \"\(parameter("type"))\"")
    case .invalidServiceName:
        return "discover: " + withSubject(parameter("reason"), "invalid service name \"\(parameter("name"))\"")
    case .permissionDenied:
        return "discover: permission denied: this needs root (or the admin group, for flush and reload)"
    case .avahiUnavailable:
        return "discover: avahi-daemon is not running, so discoverd cannot do DNS-SD right now"
    case .discoveryTimeout:
        return "discover: no answer from the network in time"
    case .notFound:
        return "discover: \(parameter("name")): no such service"
    default:
        return "discover: \(error.message)"
    }
}

/// `reason` when it already names its subject, else "subject: reason".
func withSubject(_ reason: String, _ subject: String) -> String {
    reason.lowercased().hasPrefix(subject.lowercased().split(separator: " ").prefix(2).joined(separator: " "))
        ? reason : "\(subject): \(reason)"
}

/// A DNS name as people write it: without the trailing dot.
func displayName(_ name: String) -> String {
    name.count > 1 && name.hasSuffix(".") ? String(name.dropLast()) : name
}

/// Line-oriented output that is flushed at once, also when piped.
enum Output {
    static func line(_ text: String) {
        write(1, text + "\n")
    }

    static func error(_ text: String) {
        write(2, text + "\n")
    }

    /// Writes all bytes; when the reader has gone (`discover browse ... | head`), exits quietly like other tools.
    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                exit(0)
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// One compact JSON object on one line.
    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        line(String(decoding: try encoder.encode(value), as: UTF8.self))
    }
}
