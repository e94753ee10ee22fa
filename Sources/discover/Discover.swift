import ArgumentParser
import DiscoverClient
import Foundation

@main
struct Discover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "Ask discoverd: DNS-SD services, HTTPS/SVCB records, HTTP/3 capability, connection plans.",
        discussion: """
            Talks to the discoverd daemon over its varlink socket (--socket, $DISCOVERD_SOCKET, or the \
            default path). The global options --socket, --json (-j) and --timeout go before or after the \
            command: `discover -j status` and `discover status -j` are the same.

            A host is written NAME, NAME:PORT, an address (192.0.2.10, 2001:db8::10) or [IPV6]:PORT; \
            addresses never go to DNS.

            Exit status: 0 success, 1 a negative answer (no HTTP/3, no such name, service not found), \
            2 an error (daemon unreachable, invalid input, DNS failure).

            Examples:
              discover status
              discover browse -r _tictactoe._tcp
              discover browse -a -t                  # every service type, then exit
              discover h3 example.com
              discover plan [2001:db8::10]:443
              discover --json https example.com:8443
              discover call io.discoverd.Daemon.Status
            """,
        version: DiscoverdVersion.current,
        subcommands: [
            StatusCommand.self, BrowseCommand.self, ResolveCommand.self, AdvertiseCommand.self, TypesCommand.self,
            DomainsCommand.self, HTTPSCommand.self, SVCBCommand.self, H3Command.self, PlanCommand.self,
            AddressesCommand.self, AltSvcCommand.self, FlushCommand.self, CallCommand.self, QueryCommand.self,
        ])

    /// Global options may come before the subcommand (`discover --json status`): they are moved after it.
    /// Invalid input exits 2 like every other error (ArgumentParser's own code would be 64).
    static func main() async {
        do {
            var command = try await asyncParseAsRoot(
                GlobalOptions.movedAfterSubcommand(Array(CommandLine.arguments.dropFirst())))
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                Output.error(fullMessage(for: error))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// Options every subcommand takes, before or after its name.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp("discoverd's socket (default: $DISCOVERD_SOCKET or the standard path).", valueName: "path"))
    var socket: String?

    @Flag(name: [.customShort("j"), .long], help: "Print JSON (one object per line) instead of text.")
    var json = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Give up after this many seconds (exit 2); live commands (browse, advertise, --watch) stop then (exit 0).",
            valueName: "seconds"))
    var timeout: Double?

    func validate() throws {
        if let timeout, !(timeout > 0 && timeout.isFinite) {
            throw ValidationError("--timeout wants a positive number of seconds, e.g. 2 or 0.5")
        }
    }

    func client() -> DiscoverClient { DiscoverClient(socketPath: socket) }

    /// The global options that take a value, and those that do not.
    static let valued: Set<String> = ["--socket", "--timeout"]
    static let flags: Set<String> = ["--json", "-j"]

    /// `arguments` with every global option found before the first non-option (the subcommand) moved right after
    /// it, so the subcommand's parser sees them. Everything else keeps its place.
    static func movedAfterSubcommand(_ arguments: [String]) -> [String] {
        var moved: [String] = []
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if argument == "--" || !argument.hasPrefix("-") {
                rest += arguments[index...]
                break
            }
            if flags.contains(argument) || (valued.contains(name) && argument.contains("=")) {
                moved.append(argument)
            } else if valued.contains(argument), index + 1 < arguments.count {
                moved += [argument, arguments[index + 1]]
                index += 1
            } else {
                rest.append(argument)
            }
            index += 1
        }
        guard let subcommand = rest.firstIndex(where: { !$0.hasPrefix("-") }), !moved.isEmpty else {
            return rest + moved
        }
        return Array(rest[...subcommand]) + moved + Array(rest[(subcommand + 1)...])
    }
}

/// What `--timeout` means for a command.
enum Liveness {
    /// One answer: the deadline is an error (exit 2); Ctrl-C ends the program as usual.
    case oneShot
    /// A live stream (browse, advertise, --watch): the deadline and Ctrl-C end it quietly with exit 0, closing
    /// the connection (which withdraws an advertisement).
    case live
}

/// Runs a command body: `--timeout`, Ctrl-C for live commands, errors as one plain sentence on stderr, and the
/// documented exit status (the body returns 0 or 1; errors are 1 for negative answers, else 2).
func runCommand(
    _ global: GlobalOptions, _ liveness: Liveness = .oneShot,
    _ body: @escaping @Sendable (DiscoverClient) async throws -> Int32
) async throws {
    let client = global.client()
    let status: Int32
    do {
        status = try await Supervisor.run(timeout: global.timeout, liveness: liveness) { try await body(client) }
    } catch let error as DiscoverError {
        await client.close()
        let (message, code) = ErrorText.describe(error)
        Output.error(message)
        throw ExitCode(code)
    } catch let error as ExitCode {
        await client.close()
        throw error
    } catch let error as Supervisor.TimedOut {
        await client.close()
        Output.error("discover: no answer from discoverd within \(ErrorText.seconds(error.seconds))")
        throw ExitCode(2)
    } catch {
        await client.close()
        Output.error("discover: \(error)")
        throw ExitCode(2)
    }
    await client.close()
    if status != 0 { throw ExitCode(status) }
}

/// A DNS name as people write it: without the trailing dot.
func displayName(_ name: String) -> String {
    name.count > 1 && name.hasSuffix(".") ? String(name.dropLast()) : name
}
