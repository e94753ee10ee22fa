import Foundation

extension TSIGKey {
    /// Parses a key file as `tsig-keygen` writes it and `nsupdate -k` reads it (BIND's `named.conf` syntax), with
    /// exactly one key:
    ///
    /// ```
    /// key "dyn-key" {
    ///     algorithm hmac-sha256;
    ///     secret "c2VjcmV0...";
    /// };
    /// ```
    ///
    /// `#`, `//` and `/* */` comments are allowed.
    /// - Throws: `invalidParameter` saying what is missing or wrong, never echoing the file's text (it holds the
    ///   secret).
    public init(keyFileText text: String) throws(WideAreaError) {
        let tokens = Self.tokens(Self.withoutComments(text))
        var index = 0
        func next() -> String? {
            defer { index += 1 }
            return index < tokens.count ? tokens[index] : nil
        }
        guard next()?.lowercased() == "key", let quotedName = next(), next() == "{" else {
            throw WideAreaError(.invalidParameter, "key file: expected 'key \"NAME\" { algorithm ALG; secret \"BASE64\"; };'")
        }
        let name = Self.unquoted(quotedName)
        var algorithm: String?
        var secret: String?
        while let token = next(), token != "}" {
            guard let value = next(), next() == ";" else {
                throw WideAreaError(.invalidParameter, "key file: key '\(name)': expected 'STATEMENT VALUE;'")
            }
            switch token.lowercased() {
            case "algorithm": algorithm = Self.unquoted(value).lowercased()
            case "secret": secret = Self.unquoted(value)
            default:
                throw WideAreaError(
                    .invalidParameter, "key file: key '\(name)': unknown statement (expected algorithm and secret)")
            }
        }
        guard next() == ";" || index > tokens.count else {
            throw WideAreaError(.invalidParameter, "key file: key '\(name)': expected '};' after the key")
        }
        guard index >= tokens.count else {
            throw WideAreaError(.invalidParameter, "key file: more than one key or text after '};' (one key per file)")
        }
        guard let algorithm else { throw WideAreaError(.invalidParameter, "key file: key '\(name)': no algorithm") }
        guard let secret else { throw WideAreaError(.invalidParameter, "key file: key '\(name)': no secret") }
        guard !name.contains(":"), !algorithm.contains(":") else {
            throw WideAreaError(.invalidParameter, "key file: key name or algorithm contains ':'")
        }
        // The same checks as for `-y` syntax; its errors never echo the secret.
        try self.init(parsing: "\(algorithm):\(name):\(secret)")
    }

    private static func withoutComments(_ text: String) -> String {
        var output = ""
        var rest = Substring(text)
        while !rest.isEmpty {
            if rest.hasPrefix("/*") {
                rest = rest.range(of: "*/").map { rest[$0.upperBound...] } ?? ""
            } else if rest.hasPrefix("//") || rest.hasPrefix("#") {
                rest = rest.firstIndex(of: "\n").map { rest[$0...] } ?? ""
            } else if rest.hasPrefix("\"") {
                // A quoted string is copied whole: a secret may hold '/'.
                let end = rest.dropFirst().firstIndex(of: "\"").map { rest.index(after: $0) } ?? rest.endIndex
                output += rest[..<end]
                rest = rest[end...]
            } else {
                output.append(rest.removeFirst())
            }
        }
        return output
    }

    /// Words, quoted strings, and `{`, `}`, `;` as tokens of their own.
    private static func tokens(_ text: String) -> [String] {
        var tokens: [String] = []
        var current = ""
        var quoted = false
        for character in text {
            if quoted {
                current.append(character)
                if character == "\"" {
                    tokens.append(current)
                    current = ""
                    quoted = false
                }
                continue
            }
            switch character {
            case "\"":
                if !current.isEmpty { tokens.append(current) }
                current = "\""
                quoted = true
            case "{", "}", ";":
                if !current.isEmpty { tokens.append(current) }
                current = ""
                tokens.append(String(character))
            case _ where character.isWhitespace:
                if !current.isEmpty { tokens.append(current) }
                current = ""
            default:
                current.append(character)
            }
        }
        if !current.isEmpty { tokens.append(current) }
        return tokens
    }

    private static func unquoted(_ token: String) -> String {
        guard token.count >= 2, token.hasPrefix("\""), token.hasSuffix("\"") else { return token }
        return String(token.dropFirst().dropLast())
    }
}

extension TSIGKey: CustomDebugStringConvertible {
    /// The key without its secret: `dump` and `debugPrint` must not show it either.
    public var debugDescription: String { "TSIGKey(\(description))" }
}
