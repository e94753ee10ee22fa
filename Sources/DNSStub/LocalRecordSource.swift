import DNSCore

/// Where the stub gets `.local` records (RFC 6762): the daemon's Avahi client, or a test double.
public protocol LocalRecordSource: Sendable {
    /// The records of (name, type, class) on the link, collected for at most `window`.
    /// - Parameters:
    ///   - interface: only this interface (an index), or every one when nil.
    ///   - window: how long to collect; records with one owner (RFC 6762 §10.2) may end it early.
    /// - Returns: the records found; empty when nobody answered.
    /// - Throws: ``LocalLookupError`` when mDNS cannot be asked (avahi-daemon not running).
    func lookup(name: DNSName, type: RRType, class rrClass: RRClass, interface: Int32?, window: Duration)
        async throws(LocalLookupError) -> [ResourceRecord]
}

/// Why mDNS could not be asked.
public struct LocalLookupError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
