/// A `ResolveHTTPS` or `ResolveAddresses` reply message encoded once, for every cache hit of the same data.
///
/// Only `source`, `ttl`, `staleSeconds` and `timing` differ between hits;
/// ``message(source:ttl:staleSeconds:totalMs:)`` writes them between the stored bytes. The result is byte for
/// byte what ``VarlinkReply/encode(_:continues:)`` writes for the same reply.
public struct EncodedResolverReply: Sendable {
    /// `{"parameters":{` and the constant fields before the per-call ones.
    private let head: [UInt8]
    /// The constant fields after them, the closing braces and the NUL.
    private let tail: [UInt8]

    /// Encodes the constant part of `reply`; its per-call fields are ignored.
    public init(_ reply: ResolveHTTPSReply) {
        var writer = Self.start()
        reply.writeConstantHead(to: &writer)
        head = writer.bytes
        var rest = JSONWriter(continuing: [])
        reply.writeConstantTail(to: &rest)
        tail = rest.bytes + Array("}}".utf8) + [0]
    }

    /// Encodes the constant part of `reply` (`name` and `addresses`); its per-call fields are ignored.
    public init(_ reply: ResolveAddressesReply) {
        var writer = Self.start()
        reply.writeConstantHead(to: &writer)
        head = writer.bytes
        tail = Array("}}".utf8) + [0]
    }

    private static func start() -> JSONWriter {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("parameters")
        writer.beginObject()
        return writer
    }

    /// The reply message (with its NUL) of a cache hit: no queries were made, so `timing` has only its total.
    /// `staleSeconds` is only ever given for replies that have the field (`ResolveAddresses` has none).
    public func message(source: AnswerSource, ttl: Int, staleSeconds: Int?, totalMs: Double) -> [UInt8] {
        var writer = JSONWriter(continuing: head, reserving: tail.count + 96)
        ResolveHTTPSReply.writePerCall(
            to: &writer, source: source, ttl: ttl, staleSeconds: staleSeconds, timing: Timing(totalMs: totalMs))
        writer.raw(tail)
        return writer.bytes
    }
}
