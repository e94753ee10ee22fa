import DNSCore
import ArgumentParser
import DNSStub
import DiscoverAPI
import DiscoverServer
import Foundation
import Logging
import NIOCore
import NIOPosix
import UnixSignals
import Resolver
import ServiceLifecycle

@main
struct Discoverd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discoverd",
        abstract: "Service discovery and connection set-up for every program on the machine.",
        discussion: """
            Browses and advertises DNS-SD services through Avahi, resolves DNS HTTPS/SVCB records \
            (RFC 9460) with optimistic DNS, and serves both over a varlink API on a Unix socket.

            Settings come from the configuration file (default \(Discoverd.defaultConfigPath) when it \
            exists); flags override it. SIGTERM or SIGINT shut down gracefully.

            Examples:
              discoverd                                  # system daemon, upstreams from /etc/resolv.conf
              discoverd --socket /tmp/d.sock --upstream 192.0.2.53 --log-level debug
              discoverd --stub-listen 127.0.0.153:53 --stub-listen [::1]:53   # the machine's resolver
            """,
        version: DiscoverdVersion.current)

    static let defaultConfigPath = "/etc/discoverd/discoverd.conf"

    @Option(name: .long, help: ArgumentHelp("Configuration file.", valueName: "file"))
    var config: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Socket path (default: $RUNTIME_DIRECTORY/io.discoverd under systemd, /run/discoverd/io.discoverd as root, else $XDG_RUNTIME_DIR/discoverd/io.discoverd). A socket passed by socket activation (LISTEN_FDS, name \"varlink\") wins.",
            valueName: "path"))
    var socket: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "DNS server: ADDR[:PORT] (plain), ADDR[:PORT]#NAME or tls://ADDR[:PORT][#NAME] (DNS over TLS), https://HOST[:PORT]/PATH[#ADDR] (DNS over HTTPS; PATH may be an RFC 8484 URI template, /dns-query{?dns}); a plain one may end in \" encryption=MODE\" (its own strict, opportunistic or no), a DoT or DoH one in \" pin-sha256=BASE64\" (authenticated by its key instead of a CA; repeatable); repeat for several (default: nameservers of /etc/resolv.conf).",
            valueName: "upstream"))
    var upstream: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp("strict, opportunistic or no ([resolver] encryption; default opportunistic).", valueName: "mode"))
    var encryption: String?

    @Option(name: .long, help: ArgumentHelp("Trusted roots (PEM) for DoT and DoH ([resolver] ca-file).", valueName: "file"))
    var caFile: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "DNS stub address ADDR[:PORT] or [V6]:PORT (UDP and TCP); repeat for several, 'none' turns the stub off (default: 127.0.0.153:53).",
            valueName: "addr"))
    var stubListen: [String] = []

    @Option(name: .long, help: ArgumentHelp("Where the cache is persisted.", valueName: "dir"))
    var stateDir: String?

    @Option(name: .long, help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: String?

    func run() async throws {
        // First, before other threads read the environment: LISTEN_* are removed from it.
        let activated = ActivatedSockets.takeFromEnvironment()
        // Run Swift tasks on the NIO event loops: a call's task then starts on the loop that read it and its
        // reply needs no hop back, instead of waking a libdispatch worker and the loop again for every call
        // (BENCHMARKS.md, "What bounds the misses"). Nothing in the daemon blocks inside a task for long.
        // A static build (the package's) keeps the runtime's hook out of the dynamic symbol table, where NIO looks
        // for it: there this does nothing and such tasks run on libdispatch (docs/ARCHITECTURE.md, "Threading
        // rules"); the miss path does not depend on it.
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        // Then SIGHUP, before the file is read and anything is bound: a reload sent as soon as the daemon is
        // reachable, or while it starts, must not meet SIGHUP's default action, which terminates.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let configuration: DaemonConfiguration
        do {
            configuration = try makeConfiguration()
        } catch {
            Self.fatal(error.description)
            throw ExitCode(78)  // EX_CONFIG
        }
        // One level for every logger, changed live by Reload; journald gets <N> priority prefixes.
        let level = RuntimeLogLevel(configuration.logLevel)
        let journal = JournalLogHandler.standardErrorIsJournal()
        LoggingSystem.bootstrap { label in
            if journal { return RuntimeLevelLogHandler(wrapped: JournalLogHandler(label: label), level: level) }
            return RuntimeLevelLogHandler(wrapped: StreamLogHandler.standardError(label: label), level: level)
        }
        let logger = Logger(label: "discoverd")
        let openFiles = ResourceLimits.raiseOpenFiles()
        logger.debug("open files limit", metadata: ["limit": "\(openFiles)"])

        let command = self
        var daemon = Daemon(
            configuration: configuration, configurationPath: configPathInUse,
            loadConfiguration: { () throws(ConfigurationError) in try command.makeConfiguration() },
            logLevel: level, logger: logger, hangups: hangups)
        daemon.activated = activated
        do {
            try await daemon.run()
        } catch let error as SocketFile.Error {
            Self.fatal(error.description)
            throw ExitCode(1)
        }
    }

    /// Reports why the daemon cannot run, on standard error: with the error priority for the journal.
    static func fatal(_ message: String) {
        if JournalLogHandler.standardErrorIsJournal() {
            JournalLogHandler.write("discoverd: \(message)", level: .error)
        } else {
            FileHandle.standardError.write(Data("discoverd: \(message)\n".utf8))
        }
    }

    private var configPathInUse: String? {
        if let config { return config }
        return FileManager.default.fileExists(atPath: Self.defaultConfigPath) ? Self.defaultConfigPath : nil
    }

    /// Defaults, then the file, then flags.
    func makeConfiguration() throws(ConfigurationError) -> DaemonConfiguration {
        var configuration = DaemonConfiguration()
        if let path = configPathInUse {
            configuration = try DaemonConfiguration.load(path: path)
        }
        if let socket { configuration.socketPath = socket }
        if let stateDir { configuration.stateDirectory = stateDir }
        if let logLevel { configuration.logLevel = try DaemonConfiguration.logLevel(logLevel, "--log-level") }
        if !upstream.isEmpty {
            var parsed: [UpstreamServer] = []
            for text in upstream {
                do { parsed.append(try UpstreamServer.configured(text)) } catch {
                    throw ConfigurationError("--upstream: \(error.description)")
                }
            }
            configuration.upstreams = parsed
            try configuration.checkUpstreams(source: "--upstream")
        }
        if let encryption {
            guard let mode = EncryptionMode(rawValue: encryption.lowercased()) else {
                throw ConfigurationError("--encryption: '\(encryption)' is not strict, opportunistic or no")
            }
            configuration.encryption = mode
        }
        if let caFile {
            guard caFile.hasPrefix("/"), FileManager.default.isReadableFile(atPath: caFile) else {
                throw ConfigurationError("--ca-file: cannot read '\(caFile)' (an absolute path is needed)")
            }
            configuration.caFile = caFile
        }
        if !stubListen.isEmpty {
            var listen: [HostAndPort] = []
            for text in stubListen {
                do { listen = try DaemonConfiguration.listenAddresses(text, adding: listen) } catch {
                    throw ConfigurationError("--stub-listen: \(error.description)")
                }
            }
            configuration.stubListen = listen
        }
        if configuration.upstreams.isEmpty {
            // Once resolv.conf names our own stub, its nameservers include us: asking ourselves would loop.
            configuration.upstreams = UpstreamServer.fromResolvConf().filter { upstream in
                !configuration.stubListen.contains { $0.host == upstream.host && $0.port == upstream.port }
            }
        }
        return configuration
    }
}
