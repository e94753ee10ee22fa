import Discovery
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix

/// One static service file: a `[service]` section with `name`, `type`, `port`, and optional `txt` (repeatable,
/// `key=value`), `subtype` (repeatable), `domain`, `host`.
struct StaticServiceDefinition: Equatable, Sendable {
    var name: String?
    var type: String = ""
    var port: Int = -1
    var txt: [String: String] = [:]
    var subtypes: [String] = []
    var domain: String?
    var host: String?

    /// Parses a service file; errors name the file and line.
    static func parse(_ text: String, source: String) throws(ConfigurationError) -> StaticServiceDefinition {
        var definition = StaticServiceDefinition()
        for entry in try INIFile.entries(text, source: source, sections: ["service"]) {
            let (key, value, location) = (entry.key, entry.value, entry.location)
            switch key {
            case "name": definition.name = value
            case "type": definition.type = value
            case "port":
                guard let port = Int(value), (0...65535).contains(port) else {
                    throw ConfigurationError("\(location): port '\(value)' is not 0-65535")
                }
                definition.port = port
            case "txt":
                let parts = value.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                definition.txt[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
            case "subtype": definition.subtypes.append(value)
            case "domain": definition.domain = value
            case "host": definition.host = value
            default:
                throw ConfigurationError(
                    "\(location): unknown key '\(key)' (known: name, type, port, txt, subtype, domain, host)")
            }
        }
        guard !definition.type.isEmpty else { throw ConfigurationError("\(source): 'type' is missing") }
        guard definition.port >= 0 else { throw ConfigurationError("\(source): 'port' is missing") }
        return definition
    }
}

/// Static services from `*.service` files in the services directory, advertised for as long as the daemon
/// runs and re-read on Reload and SIGHUP (unchanged files keep their registration).
final class StaticServices: Sendable {
    private struct Loaded {
        var definition: StaticServiceDefinition
        var advertisement: Advertisement
    }

    private let discovery: DiscoveryService
    private let logger: Logger
    private let loaded = NIOLockedValueBox([String: Loaded]())
    /// One sync at a time (Reload, SIGHUP and avahi-daemon coming back may overlap).
    private let syncing = NIOLock()

    init(discovery: DiscoveryService, logger: Logger) {
        self.discovery = discovery
        self.logger = logger
    }

    var count: Int { loaded.withLockedValue { $0.count } }

    /// Makes the advertised set match the files in `directory` (nil: none). A bad file is logged and skipped.
    ///
    /// Reading the files and registering with Avahi block, so this runs on the thread pool.
    func sync(directory: String?) async {
        try? await NIOThreadPool.singleton.runIfActive { [self] in
            syncing.withLock { syncLocked(directory: directory) }
        }
    }

    private func syncLocked(directory: String?) {
        var wanted: [String: StaticServiceDefinition] = [:]
        if let directory {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for file in files.sorted() where file.hasSuffix(".service") {
                let path = directory + "/" + file
                do {
                    let text = try String(contentsOfFile: path, encoding: .utf8)
                    wanted[path] = try StaticServiceDefinition.parse(text, source: path)
                } catch let error as ConfigurationError {
                    logger.error("skipping static service", metadata: ["error": "\(error.description)"])
                } catch {
                    logger.error("cannot read static service", metadata: ["file": "\(path)", "error": "\(error)"])
                }
            }
        }
        let current = loaded.withLockedValue { $0 }
        for (path, entry) in current where wanted[path] != entry.definition {
            entry.advertisement.withdraw()
            _ = loaded.withLockedValue { $0.removeValue(forKey: path) }
            logger.info("withdrew static service", metadata: ["file": "\(path)"])
        }
        for (path, definition) in wanted where current[path]?.definition != definition {
            do {
                let advertisement = try discovery.advertise(
                    name: definition.name, type: definition.type, port: definition.port, txt: definition.txt,
                    subtypes: definition.subtypes, domain: definition.domain, host: definition.host)
                loaded.withLockedValue { $0[path] = Loaded(definition: definition, advertisement: advertisement) }
                logger.info(
                    "advertising static service",
                    metadata: ["file": "\(path)", "type": "\(definition.type)", "port": "\(definition.port)"])
                // Keep the events drained and logged; the registration lives until withdrawn.
                Task { [logger] in
                    for await event in advertisement.events {
                        logger.info("static service", metadata: ["file": "\(path)", "event": "\(event)"])
                    }
                }
            } catch {
                logger.error("cannot advertise static service", metadata: ["file": "\(path)", "error": "\(error)"])
            }
        }
    }
}
