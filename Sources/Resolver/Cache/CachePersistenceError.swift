import DNSCore

/// Why the cache or the Alt-Svc store could not be saved or loaded.
///
/// The daemon logs it and carries on: a cache file that cannot be read is ignored, never fatal.
public struct CachePersistenceError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        /// The file does not exist (a first start; nothing to log).
        public static let notFound = Code(name: "notFound")
        /// A system call failed (permissions, disk full, missing state directory, ...).
        public static let io = Code(name: "io")
        /// The file is not valid JSON of the expected format, e.g. truncated or overwritten.
        public static let corrupt = Code(name: "corrupt")
        /// The file was written by a version of the format this build does not read.
        public static let unsupportedVersion = Code(name: "unsupportedVersion")
        /// The file is larger than the configured limit.
        public static let tooLarge = Code(name: "tooLarge")
        /// The file is a symbolic link, is not owned by the daemon's user, or others may write it: someone else
        /// could have planted it (``AtomicFile/readContents(of:maxSize:)``).
        public static let untrusted = Code(name: "untrusted")

        public var description: String { name }
    }

    /// The kind of failure.
    public let code: Code
    /// A human-readable explanation.
    public let message: String
    /// The file involved.
    public let path: String
    /// The error that caused this one, if any (a decoding error, ...).
    public let underlying: (any Error)?

    /// Creates an error.
    public init(code: Code, message: String, path: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
    }

    public var description: String {
        var text = "\(code): \(path): \(message)"
        if let underlying { text += " (\(underlying))" }
        return text
    }
}
