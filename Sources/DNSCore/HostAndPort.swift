import Foundation

/// `ADDR`, `ADDR:PORT`, `[V6]`, `[V6]:PORT` or a bare IPv6 address, as DNS settings write a server
/// (`upstream`, `[stub] listen`, `[wide-area] update-server`): the one parser behind all of them.
public struct HostAndPort: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    /// Why a text is not `ADDR[:PORT]`; the callers put their setting's name in front.
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses the text; the port is `defaultPort` when none is given. The host is not checked further: callers
    /// decide whether it must be a numeric address.
    public init(parsing text: String, defaultPort: Int = 53) throws(ParseError) {
        let text = text.trimmingCharacters(in: .whitespaces)
        var host = text
        var port = defaultPort
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw ParseError(reason: "'[' without ']'") }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else {
                    throw ParseError(reason: "expected [ADDRESS]:PORT")
                }
                port = value
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            guard let value = Int(text[text.index(after: colon)...]) else {
                throw ParseError(reason: "port '\(text[text.index(after: colon)...])' is not a number")
            }
            port = value
        }
        guard !host.isEmpty else { throw ParseError(reason: "expected ADDRESS[:PORT]") }
        guard (1...65535).contains(port) else { throw ParseError(reason: "port must be 1...65535") }
        self.host = host
        self.port = port
    }

    /// `192.0.2.53:53` or `[2001:db8::53]:53`.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
