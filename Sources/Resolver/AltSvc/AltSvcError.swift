import DNSCore

/// Why an `Alt-Svc` header value or an origin was rejected.
///
/// Maps onto the varlink error `org.varlink.service.InvalidParameter` with `parameter` set to ``parameter``.
public struct AltSvcError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        /// The header value does not follow the RFC 7838 §3 grammar.
        public static let malformedHeader = Code(name: "malformedHeader")
        /// The origin is not `https://host[:port]`.
        public static let invalidOrigin = Code(name: "invalidOrigin")

        public var description: String { name }
    }

    /// The kind of failure.
    public let code: Code
    /// A human-readable explanation, naming the position for header errors.
    public let message: String
    /// The byte offset in the input where the problem was found, when it applies.
    public let offset: Int?

    /// Creates an error.
    public init(code: Code, message: String, offset: Int? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
    }

    /// The API parameter at fault: `"header"` or `"origin"`.
    public var parameter: String { code == .invalidOrigin ? "origin" : "header" }

    public var description: String {
        if let offset { return "\(code): \(message) at offset \(offset)" }
        return "\(code): \(message)"
    }
}
