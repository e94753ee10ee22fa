import DNSCore

/// One alternative service advertised by an `Alt-Svc` header (RFC 7838 §3).
public struct AltSvcAlternative: Sendable, Hashable, Codable {
    /// The ALPN protocol id, percent-decoded: `"h3"`, `"h3-29"`, `"h2"`.
    public var protocolID: String
    /// The alternative host, lowercased, IPv6 literals without brackets; nil means the origin's own host.
    public var host: String?
    /// The alternative port.
    public var port: UInt16
    /// The freshness lifetime in seconds (`ma`, RFC 7838 §3.1); for stored alternatives, the time left.
    public var maxAge: UInt32
    /// Whether the alternative survives a network change (`persist=1`, RFC 7838 §3.1).
    public var persist: Bool

    /// Creates an alternative.
    public init(protocolID: String, host: String? = nil, port: UInt16, maxAge: UInt32 = 86_400, persist: Bool = false) {
        self.protocolID = protocolID
        self.host = host
        self.port = port
        self.maxAge = maxAge
        self.persist = persist
    }
}

extension AltSvcAlternative: CustomStringConvertible {
    /// The alternative as a header writes it, e.g. `h3=":443"` or `h3-29="alt.example:8443"; ma=60`
    /// (the `ma` shown only when it is not the default).
    public var description: String {
        let host = self.host.map { $0.contains(":") ? "[\($0)]" : $0 } ?? ""
        let id = protocolID.utf8.map { byte in
            AltSvcParser.isTokenChar(byte) && byte != UInt8(ascii: "%")
                ? String(UnicodeScalar(byte)) : "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
        }.joined()
        var text = "\(id)=\"\(host):\(port)\""
        if maxAge != AltSvcHeader.defaultMaxAge { text += "; ma=\(maxAge)" }
        if persist { text += "; persist=1" }
        return text
    }
}

/// A parsed `Alt-Svc` header field value (RFC 7838 §3).
public enum AltSvcHeader: Sendable, Equatable {
    /// `clear`: forget every alternative of the origin.
    case clear
    /// The alternatives in order of preference; they replace all earlier ones of the origin.
    case alternatives([AltSvcAlternative])

    /// The `ma` used when the parameter is absent: 24 hours (RFC 7838 §3.1).
    public static let defaultMaxAge: UInt32 = 86_400

    /// Longer header values are rejected.
    public static let maxLength = 16 * 1024

    /// Alternatives past this many are ignored (they are the least preferred).
    public static let maxAlternatives = 32

    /// Parses a header field value.
    ///
    /// Follows RFC 7838 §3 with the list rules of RFC 7230 §7 (empty list elements and optional whitespace
    /// around commas and semicolons are allowed). Unknown parameters are ignored, `persist` values other than
    /// `1` are ignored (RFC 7838 §3.1), `ma` larger than 2^31 is capped (RFC 7234 §1.2.1). Alternatives whose
    /// protocol id does not decode to UTF-8 are skipped as unknown protocols. Also tolerated: empty parameters
    /// (`h3=":443";`), which some servers send.
    ///
    /// - Parameter value: The field value, e.g. `h3=":443"; ma=3600, h2="alt.example.com:443"`.
    /// - Throws: ``AltSvcError`` with code `.malformedHeader` naming the offending offset.
    public init(parsing value: String) throws(AltSvcError) {
        let bytes = Array(value.utf8)
        guard bytes.count <= Self.maxLength else {
            throw AltSvcError(code: .malformedHeader, message: "header longer than \(Self.maxLength) bytes")
        }
        var parser = AltSvcParser(bytes: bytes)
        self = try parser.parse()
    }
}

/// A cursor over the header bytes implementing the RFC 7838 §3 grammar:
///
/// ```
/// Alt-Svc       = clear / 1#alt-value
/// clear         = %s"clear"
/// alt-value     = alternative *( OWS ";" OWS parameter )
/// alternative   = protocol-id "=" alt-authority
/// protocol-id   = token                     ; percent-encoded ALPN protocol name
/// alt-authority = quoted-string             ; containing [ uri-host ] ":" port
/// parameter     = token "=" ( token / quoted-string )
/// ```
struct AltSvcParser {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func parse() throws(AltSvcError) -> AltSvcHeader {
        skipOWS()
        let start = index
        if let token = readToken(), token == Array("clear".utf8) {
            skipOWS()
            if index == bytes.count { return .clear }
        }
        // Anything else, including "clear" next to alternatives, must be a list of alt-values.
        index = start

        var alternatives: [AltSvcAlternative] = []
        var sawElement = false
        // RFC 7230 §7: 1#element allows empty elements between commas.
        while true {
            skipOWS()
            if index == bytes.count { break }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            let alternative = try parseAltValue()
            sawElement = true
            if let alternative, alternatives.count < AltSvcHeader.maxAlternatives {
                alternatives.append(alternative)
            }
            skipOWS()
            if index == bytes.count { break }
            guard bytes[index] == UInt8(ascii: ",") else { throw error("expected ',' or ';'") }
            index += 1
        }
        guard sawElement else { throw error("empty header value") }
        return .alternatives(alternatives)
    }

    /// Parses one alt-value; nil when it is well-formed but names a protocol id we cannot represent.
    private mutating func parseAltValue() throws(AltSvcError) -> AltSvcAlternative? {
        let protocolStart = index
        guard let rawProtocol = readToken() else { throw error("expected a protocol-id token") }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "=") else {
            if index < bytes.count && (bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t")) {
                throw error("no whitespace allowed before '='")
            }
            throw error("expected '=' after the protocol-id")
        }
        index += 1
        let protocolBytes = try percentDecode(rawProtocol, at: protocolStart)

        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
            throw error("alt-authority must be a quoted string")
        }
        let authorityStart = index
        let authority = try readQuotedString()
        let (host, port) = try parseAuthority(authority, at: authorityStart)

        var maxAge: UInt32?
        var persist: Bool?
        while true {
            let save = index
            skipOWS()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ";") else {
                index = save
                break
            }
            index += 1
            skipOWS()
            // Tolerate empty parameters: "h3=\":443\";" and "a=\"b\";;ma=1".
            if index == bytes.count || bytes[index] == UInt8(ascii: ",") || bytes[index] == UInt8(ascii: ";") {
                continue
            }
            guard let name = readToken() else { throw error("expected a parameter name") }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "=") else {
                throw error("expected '=' after parameter \"\(String(decoding: name, as: UTF8.self))\"")
            }
            index += 1
            let valueStart = index
            let parameterValue: [UInt8]
            if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                parameterValue = try readQuotedString()
            } else if let token = readToken() {
                parameterValue = token
            } else {
                throw error("expected a token or quoted string as parameter value")
            }
            // Parameter names are tokens compared case-insensitively; the first occurrence wins.
            switch String(decoding: name, as: UTF8.self).lowercased() {
            case "ma":
                if maxAge == nil { maxAge = try parseDeltaSeconds(parameterValue, at: valueStart) }
            case "persist":
                // RFC 7838 §3.1: values other than "1" are ignored.
                if persist == nil, parameterValue == [UInt8(ascii: "1")] { persist = true }
            default:
                break  // RFC 7838 §3: unknown parameters are ignored.
            }
        }

        guard let protocolID = String(validating: protocolBytes, as: UTF8.self) else { return nil }
        return AltSvcAlternative(
            protocolID: protocolID,
            host: host,
            port: port,
            maxAge: maxAge ?? AltSvcHeader.defaultMaxAge,
            persist: persist ?? false
        )
    }

    /// Splits `[ uri-host ] ":" port`.
    private func parseAuthority(_ authority: [UInt8], at offset: Int) throws(AltSvcError) -> (String?, UInt16) {
        guard let colon = authority.lastIndex(of: UInt8(ascii: ":")) else {
            throw error("alt-authority needs \":port\"", at: offset)
        }
        let hostBytes = authority[..<colon]
        let portBytes = authority[(colon + 1)...]
        guard let port = Self.parsePort(portBytes) else {
            throw error("invalid port in alt-authority", at: offset)
        }
        if hostBytes.isEmpty { return (nil, port) }
        guard let host = HostSyntax.validate(hostBytes) else {
            throw error("invalid host in alt-authority", at: offset)
        }
        return (host, port)
    }

    /// RFC 7234 §1.2.1 delta-seconds; values past 2^31 are taken as 2^31.
    private func parseDeltaSeconds(_ value: [UInt8], at offset: Int) throws(AltSvcError) -> UInt32 {
        guard !value.isEmpty, value.allSatisfy(Self.isDigit) else {
            throw error("ma must be a number of seconds", at: offset)
        }
        var result: UInt64 = 0
        for digit in value {
            result = min(result * 10 + UInt64(digit - UInt8(ascii: "0")), 1 << 31)
        }
        return UInt32(result)
    }

    /// A port of 1 to 65535 written in decimal digits.
    static func parsePort(_ digits: ArraySlice<UInt8>) -> UInt16? {
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(isDigit) else { return nil }
        var value = 0
        for digit in digits { value = value * 10 + Int(digit - UInt8(ascii: "0")) }
        guard (1...65_535).contains(value) else { return nil }
        return UInt16(value)
    }

    private mutating func percentDecode(_ token: [UInt8], at offset: Int) throws(AltSvcError) -> [UInt8] {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(token.count)
        var position = 0
        while position < token.count {
            let byte = token[position]
            if byte != UInt8(ascii: "%") {
                decoded.append(byte)
                position += 1
                continue
            }
            guard position + 2 < token.count,
                let high = Self.hexValue(token[position + 1]),
                let low = Self.hexValue(token[position + 2])
            else {
                throw error("invalid percent-encoding in protocol-id", at: offset + position)
            }
            decoded.append(high << 4 | low)
            position += 3
        }
        return decoded
    }

    /// Reads a quoted-string (RFC 7230 §3.2.6) starting at the opening quote and returns its unescaped content.
    private mutating func readQuotedString() throws(AltSvcError) -> [UInt8] {
        let start = index
        index += 1  // opening DQUOTE
        var content: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return content
            case UInt8(ascii: "\\"):
                // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
                guard index + 1 < bytes.count, Self.isQuotedPairByte(bytes[index + 1]) else {
                    throw error("invalid escape in quoted string")
                }
                content.append(bytes[index + 1])
                index += 2
            default:
                guard Self.isQDText(byte) else { throw error("invalid character in quoted string") }
                content.append(byte)
                index += 1
            }
        }
        throw error("unterminated quoted string", at: start)
    }

    private mutating func readToken() -> [UInt8]? {
        let start = index
        while index < bytes.count, Self.isTokenChar(bytes[index]) { index += 1 }
        return index > start ? Array(bytes[start..<index]) : nil
    }

    private mutating func skipOWS() {
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
            index += 1
        }
    }

    private func error(_ message: String, at offset: Int? = nil) -> AltSvcError {
        AltSvcError(code: .malformedHeader, message: message, offset: offset ?? index)
    }

    // RFC 7230 §3.2.6 character classes.

    static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    static func isTokenChar(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static func isQDText(_ byte: UInt8) -> Bool {
        byte == 0x09 || byte == 0x20 || byte == 0x21 || (0x23...0x5B).contains(byte) || (0x5D...0x7E).contains(byte)
            || byte >= 0x80
    }

    private static func isQuotedPairByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || byte == 0x20 || (0x21...0x7E).contains(byte) || byte >= 0x80
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
