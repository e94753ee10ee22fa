import Foundation

/// Files that hold TSIG secrets: key files (`[wide-area] key-file`), systemd credentials, and a configuration
/// file with an inline `key =`. A secret is only as safe as the file it is in: a file someone else could read or
/// replace stops the daemon at start-up (and fails Reload) with the file and the fix named.
enum SecretFile {
    /// What `fstat` said about an open file.
    struct Status: Equatable {
        var owner: UInt32
        var group: UInt32
        var mode: UInt32
        var isRegular: Bool
    }

    /// Reads a key file (or credential), refusing it when it is not a regular file owned by root or the daemon's
    /// user with no permission for group or others.
    /// - Throws: ``ConfigurationError`` naming `path` and the fix; `context` (file:line: key) goes first.
    static func read(_ path: String, context: String) throws(ConfigurationError) -> String {
        let (text, status) = try open(path, context: context)
        if let problem = problem(keyFile: status) {
            throw ConfigurationError(
                "\(context): key file \(path) \(problem); fix: chown root \(path) && chmod 0600 \(path) (or pass it "
                    + "with LoadCredential= and key-file = CREDENTIAL-NAME)")
        }
        return text
    }

    /// Why a key file may not be trusted, or nil when it may.
    static func problem(
        keyFile status: Status, daemonUID: UInt32 = geteuid()
    ) -> String? {
        guard status.isRegular else { return "is not a regular file" }
        guard status.owner == 0 || status.owner == daemonUID else {
            return "is owned by uid \(status.owner), not by root or the daemon's user (uid \(daemonUID))"
        }
        guard status.mode & 0o077 == 0 else {
            return "has mode \(String(status.mode & 0o7777, radix: 8)): group or others may access it"
        }
        return nil
    }

    /// Why a configuration file may not hold an inline secret, or nil when it may: it must be owned by root or the
    /// daemon's user, readable by no one else but its group, and that group must be root's or the daemon's (the
    /// packaged install is `0640 root:discoverd`).
    static func problem(
        configuration status: Status, daemonUID: UInt32 = geteuid(), daemonGID: UInt32 = getegid()
    ) -> String? {
        guard status.owner == 0 || status.owner == daemonUID else {
            return "is owned by uid \(status.owner), not by root or the daemon's user (uid \(daemonUID))"
        }
        let mode = String(status.mode & 0o7777, radix: 8)
        if status.mode & 0o007 != 0 { return "has mode \(mode): others may access it" }
        if status.mode & 0o020 != 0 { return "has mode \(mode): its group may write it" }
        if status.mode & 0o040 != 0 && status.group != 0 && status.group != daemonGID {
            return "has mode \(mode) and group \(status.group), which is neither root's nor the daemon's"
        }
        return nil
    }

    /// The text and status of `path`, read through one descriptor (the status is the file's that was read).
    static func open(_ path: String, context: String) throws(ConfigurationError) -> (String, Status) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else {
            throw ConfigurationError("\(context): cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw ConfigurationError("\(context): cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        let status = Status(
            owner: info.st_uid, group: info.st_gid, mode: info.st_mode,
            isRegular: info.st_mode & S_IFMT == S_IFREG)
        guard status.isRegular else { throw ConfigurationError("\(context): \(path) is not a regular file") }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = Glibc.read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw ConfigurationError("\(context): cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            data.append(contentsOf: buffer[..<count])
            guard data.count <= 1 << 20 else { throw ConfigurationError("\(context): \(path) is larger than 1 MiB") }
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("\(context): \(path) is not UTF-8 text")
        }
        return (text, status)
    }

    /// Where `key-file = NAME` (no `/`) is read from: the service's credentials (`LoadCredential=NAME:...`).
    static func credentialPath(_ name: String, context: String) throws(ConfigurationError) -> String {
        guard let directory = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else {
            throw ConfigurationError(
                "\(context): '\(name)' is no absolute path and $CREDENTIALS_DIRECTORY is not set (give the key "
                    + "file's absolute path, or LoadCredential=\(name):PATH in the unit)")
        }
        guard !name.contains("/"), name != ".", name != ".." else {
            throw ConfigurationError("\(context): '\(name)' is not a credential name")
        }
        return directory + "/" + name
    }
}

/// Removes what looks like a secret from text that goes into an error or a log line.
///
/// A TSIG secret is base64 of at least 16 random bytes: a run of 12 or more base64 characters that mixes upper
/// case, lower case and digits (or ends in `=` padding) is replaced by `<redacted>`. Paths, names and numbers of a
/// configuration file do not look like that; a malformed line that holds a secret is echoed without it.
enum Redaction {
    static func redact(_ text: String) -> String {
        guard text.count >= 12 else { return text }
        var output = ""
        var run = ""
        func flush() {
            output += looksSecret(run) ? "<redacted>" : run
            run = ""
        }
        for character in text {
            if character.isASCII && (character.isLetter || character.isNumber || "+/=".contains(character)) {
                run.append(character)
            } else {
                flush()
                output.append(character)
            }
        }
        flush()
        return output
    }

    static func looksSecret(_ run: String) -> Bool {
        // A path (a component that is a lower-case word: `etc`, `open.key`): judged component by component.
        let components = run.split(separator: "/")
        if components.count > 1 || run.hasPrefix("/"),
            components.contains(where: { $0.count >= 3 && $0.allSatisfy { $0.isLowercase } })
        {
            return components.contains { looksSecret(String($0)) }
        }
        guard run.count >= 12 else { return false }
        // Padding: base64 comes in groups of 4 characters.
        if run.count % 4 == 0 && (run.hasSuffix("=") && !run.dropLast().contains("=")
            || run.hasSuffix("==") && !run.dropLast(2).contains("="))
        {
            return true
        }
        let upper = run.contains { $0.isUppercase }
        let lower = run.contains { $0.isLowercase }
        let digit = run.contains { $0.isNumber }
        return upper && lower && digit
    }
}
