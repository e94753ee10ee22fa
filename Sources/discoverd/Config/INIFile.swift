/// One `key = value` line of an INI-style file, with the section it is in and where it came from.
struct INIEntry: Equatable {
    var section: String
    var key: String
    var value: String
    /// `FILE:LINE`, for error messages.
    var location: String
}

/// The format of discoverd.conf and of static service files: `[section]` headers, `key = value` lines, `#`
/// comments (at the start of a line or after a blank) and `;` comment lines, a key repeated for lists.
///
/// A `#` inside a value is kept: `upstream = 9.9.9.9#dns.quad9.net` is DNS over TLS (systemd-resolved's syntax),
/// and cutting it there would silently send that upstream's queries in clear text.
enum INIFile {
    /// Where a comment starts: a `#` at the start of the line or after a space or tab.
    static func commentStart(_ line: Substring) -> Substring.Index? {
        var previous: Character?
        for index in line.indices {
            let character = line[index]
            if character == "#", previous == nil || previous == " " || previous == "\t" { return index }
            previous = character
        }
        return nil
    }

    /// The entries of `text` in order. Errors name the file and line.
    static func entries(_ text: String, source: String, sections: Set<String>) throws(ConfigurationError) -> [INIEntry] {
        var entries: [INIEntry] = []
        var section = ""
        let known = sections.sorted().map { "[\($0)]" }.joined(separator: ", ")
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let location = "\(source):\(index + 1)"
            var line = Substring(rawLine)
            if let hash = commentStart(line) { line = line[..<hash] }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix(";") { continue }
            if trimmed.hasPrefix("[") {
                guard trimmed.hasSuffix("]") else { throw ConfigurationError("\(location): malformed section '\(trimmed)'") }
                section = String(trimmed.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                guard sections.contains(section) else {
                    throw ConfigurationError("\(location): unknown section [\(section)] (known: \(known))")
                }
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ConfigurationError("\(location): expected 'key = value', got '\(trimmed)'")
            }
            let key = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            guard !section.isEmpty else {
                throw ConfigurationError("\(location): key '\(key)' outside a section; put it under \(known)")
            }
            let value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            entries.append(INIEntry(section: section, key: key, value: value, location: location))
        }
        return entries
    }
}
