/// A DNS message could not be decoded or encoded.
///
/// Malformed input always ends here, never in a crash: ldns status codes and our own bounds checks both map
/// onto this error.
public struct DNSWireError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, for programs.
    public enum Code: String, Hashable, Sendable {
        /// Fewer bytes than a DNS header (12), or a record cut short.
        case truncated
        /// ldns rejected the packet, or a field breaks the wire format.
        case malformedMessage
        /// Record data does not have the format of its type (e.g. an A record that is not 4 bytes).
        case malformedRData
        /// A query could not be built.
        case encodingFailed
    }

    /// What went wrong, for programs.
    public var code: Code
    /// What went wrong, for people.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
