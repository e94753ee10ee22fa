import DNSSDModel
import Discovery
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix

/// One static service: a `[service]` section with `name`, `type`, `port`, and optional `txt` (repeatable,
/// `key=value` or a boolean `key`), `subtype` (repeatable), `domain`, `host`; or one `<service>` of an Avahi XML
/// file (`AvahiServiceFile`).
struct StaticServiceDefinition: Equatable, Sendable {
    var name: String?
    var type: String = ""
    var port: Int = -1
    /// TXT strings in file order.
    var txt: [[UInt8]] = []
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
            case "txt": definition.txt.append(Array(value.utf8))
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
        try definition.validateTXT(source: source)
        return definition
    }

    /// Parses a service file in either format: Avahi's XML (`<service-group>`, any number of services) or the INI
    /// format (one service).
    static func parseFile(_ text: String, source: String, hostName: String) throws(ConfigurationError)
        -> [StaticServiceDefinition]
    {
        guard AvahiServiceFile.isXML(text) else { return [try parse(text, source: source)] }
        let definitions = try AvahiServiceFile.parse(text, source: source, hostName: hostName)
        for definition in definitions { try definition.validateTXT(source: "\(source): Avahi XML service file") }
        return definitions
    }

    /// Refuses what Advertise would refuse in the TXT strings (a bad or repeated key, a string too long); the message
    /// starts with `source`.
    func validateTXT(source: String) throws(ConfigurationError) {
        do {
            _ = try TXTRecord(validating: self.txt)
        } catch {
            throw ConfigurationError("\(source): \(error.message)")
        }
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

    /// The first label of gethostname() (no resolver look-up), for `%h` in Avahi XML files.
    private static func hostLabel() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.split(separator: ".").first.map(String.init) ?? "localhost"
    }

    private func syncLocked(directory: String?) {
        var wanted: [String: StaticServiceDefinition] = [:]
        let hostName = Self.hostLabel()
        if let directory {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for file in files.sorted() where file.hasSuffix(".service") {
                let path = directory + "/" + file
                do {
                    let text = try String(contentsOfFile: path, encoding: .utf8)
                    let definitions = try StaticServiceDefinition.parseFile(text, source: path, hostName: hostName)
                    // One key per service: the path, then path#2, path#3 for the further services of an XML file.
                    for (index, definition) in definitions.enumerated() {
                        wanted[index == 0 ? path : "\(path)#\(index + 1)"] = definition
                    }
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
                    name: definition.name, type: definition.type, port: definition.port,
                    txt: TXTRecord(strings: definition.txt),
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
