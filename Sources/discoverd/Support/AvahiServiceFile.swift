import Discovery
import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Reads avahi-daemon's static service files (`<service-group>` XML, avahi.service(5)), so a file from
/// /etc/avahi/services works unchanged: one definition per `<service>`, sharing the group's `<name>`.
///
/// As strict as avahi-daemon (static-services.c): the root must be `<service-group>` with one `<name>` and at least
/// one `<service>`; a service needs `<type>`; unknown elements and attribute values are refused. `%h` in a name with
/// `replace-wildcards="yes"` is the host name (a name of just `%h` follows Avahi's host name, renames included).
/// `protocol="ipv4"`/`"ipv6"` is accepted, but the service is advertised over both, like every advertisement.
/// `<txt-record>` is `key=value` (the value decoded per `value-format`: `text`, `binary-hex`, `binary-base64`) or a
/// boolean `key`.
enum AvahiServiceFile {
    /// True when the text looks like XML rather than the INI format (first non-blank character `<`).
    static func isXML(_ text: String) -> Bool {
        text.first { !$0.isWhitespace && $0 != "\u{FEFF}" } == "<"
    }

    /// Parses a file; errors name the file, the format and the line.
    static func parse(_ text: String, source: String, hostName: String) throws(ConfigurationError)
        -> [StaticServiceDefinition]
    {
        let reader = Reader(hostName: hostName)
        let parser = XMLParser(data: Data(text.utf8))
        parser.delegate = reader
        parser.shouldResolveExternalEntities = false
        let parsed = parser.parse()
        if let failure = reader.failure {
            throw ConfigurationError("\(source): Avahi XML service file: line \(failure.line): \(failure.reason)")
        }
        guard parsed else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "malformed XML"
            throw ConfigurationError(
                "\(source): not a valid Avahi XML service file: line \(parser.lineNumber): \(reason)")
        }
        guard reader.sawGroup else {
            throw ConfigurationError("\(source): Avahi XML service file: no <service-group> element")
        }
        // libxml2 does not always report a document that ends inside an element.
        guard reader.closedGroup else {
            throw ConfigurationError(
                "\(source): not a valid Avahi XML service file: the file ends inside <service-group>")
        }
        return reader.definitions
    }

    /// The XMLParser delegate: a small state machine over the element path, as avahi-daemon's expat callbacks.
    private final class Reader: NSObject, XMLParserDelegate {
        struct Failure {
            var line: Int
            var reason: String
        }

        let hostName: String
        var definitions: [StaticServiceDefinition] = []
        var failure: Failure?
        var sawGroup = false
        var closedGroup = false
        private var path: [String] = []
        private var text = ""
        private var name: String?
        private var replaceWildcards = false
        private var current: StaticServiceDefinition?
        private var txtFormat = "text"

        init(hostName: String) {
            self.hostName = hostName
        }

        private func fail(_ parser: XMLParser, _ reason: String) {
            guard self.failure == nil else { return }
            self.failure = Failure(line: parser.lineNumber, reason: reason)
            parser.abortParsing()
        }

        private static let allowed: [String: Set<String>] = [
            "": ["service-group"],
            "service-group": ["name", "service"],
            "service": ["type", "subtype", "domain-name", "host-name", "port", "txt-record"],
        ]

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let parent = self.path.last ?? ""
            guard Self.allowed[parent]?.contains(element) == true else {
                let inside = parent.isEmpty ? "as the root element" : "inside <\(parent)>"
                return fail(parser, "unexpected element <\(element)> \(inside)")
            }
            let known: Set<String> =
                switch element {
                case "name": ["replace-wildcards"]
                case "service": ["protocol"]
                case "txt-record": ["value-format"]
                default: []
                }
            if let unknown = attributes.keys.sorted().first(where: { !known.contains($0) }) {
                return fail(parser, "unknown attribute '\(unknown)' of <\(element)>")
            }
            switch element {
            case "service-group":
                self.sawGroup = true
            case "name":
                guard self.name == nil else { return fail(parser, "more than one <name>") }
                let value = attributes["replace-wildcards"] ?? "no"
                guard value == "yes" || value == "no" else {
                    return fail(parser, "replace-wildcards must be yes or no, not '\(value)'")
                }
                self.replaceWildcards = value == "yes"
            case "service":
                let proto = attributes["protocol"] ?? "any"
                guard ["any", "ipv4", "ipv6"].contains(proto) else {
                    return fail(parser, "protocol must be any, ipv4 or ipv6, not '\(proto)'")
                }
                // avahi-daemon's default port is 0 when <port> is absent.
                self.current = StaticServiceDefinition(port: 0)
            case "txt-record":
                self.txtFormat = attributes["value-format"] ?? "text"
                guard ["text", "binary-hex", "binary-base64"].contains(self.txtFormat) else {
                    return fail(parser, "value-format must be text, binary-hex or binary-base64")
                }
            default:
                break
            }
            self.path.append(element)
            self.text = ""
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            self.text += string
        }

        func parser(
            _ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?
        ) {
            let value = self.text.trimmingCharacters(in: .whitespacesAndNewlines)
            self.text = ""
            self.path.removeLast()
            switch element {
            case "service-group":
                guard self.name != nil else { return fail(parser, "<service-group> without <name>") }
                guard !self.definitions.isEmpty else { return fail(parser, "<service-group> without <service>") }
                let name = self.resolvedName()
                for index in self.definitions.indices { self.definitions[index].name = name }
                self.closedGroup = true
            case "name":
                guard !value.isEmpty else { return fail(parser, "empty <name>") }
                self.name = value
            case "service":
                guard let service = self.current, !service.type.isEmpty else {
                    return fail(parser, "<service> without <type>")
                }
                self.definitions.append(service)
                self.current = nil
            case "type": self.current?.type = value
            case "subtype": self.current?.subtypes.append(value)
            case "domain-name": self.current?.domain = value
            case "host-name": self.current?.host = value
            case "port":
                guard let port = Int(value), (0...65535).contains(port) else {
                    return fail(parser, "port '\(value)' is not 0-65535")
                }
                self.current?.port = port
            case "txt-record":
                // Trimmed like every other element (avahi-daemon keeps surrounding blanks; files have none there).
                guard let string = self.txtString(value) else {
                    return fail(parser, "<txt-record> value is not valid \(self.txtFormat)")
                }
                self.current?.txt.append(string)
            default:
                break
            }
        }

        /// `key=value` with the value decoded per `value-format`; a string without `=` is taken as it is.
        private func txtString(_ value: String) -> [UInt8]? {
            guard let equals = value.firstIndex(of: "=") else { return Array(value.utf8) }
            let key = Array(value[..<equals].utf8) + [UInt8(ascii: "=")]
            let encoded = String(value[value.index(after: equals)...])
            switch self.txtFormat {
            case "binary-hex":
                let digits = Array(encoded.utf8)
                guard digits.count % 2 == 0 else { return nil }
                var bytes: [UInt8] = []
                for index in stride(from: 0, to: digits.count, by: 2) {
                    guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16)
                    else { return nil }
                    bytes.append(byte)
                }
                return key + bytes
            case "binary-base64":
                return Data(base64Encoded: encoded).map { key + Array($0) }
            default:
                return key + Array(encoded.utf8)
            }
        }

        /// The group name with `%h` replaced when asked; nil (the host name, as Avahi keeps it) for a bare `%h`.
        private func resolvedName() -> String? {
            guard let name = self.name else { return nil }
            guard self.replaceWildcards, name.contains("%h") else { return name }
            if name == "%h" { return nil }
            return name.replacingOccurrences(of: "%h", with: self.hostName)
        }
    }
}
