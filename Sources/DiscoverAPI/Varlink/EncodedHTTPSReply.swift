/// A `ResolveHTTPS` reply message encoded once, for every hit of the same cache entries.
///
/// Only `source`, `ttl`, `staleSeconds` and `timing` differ between hits; ``message(source:ttl:staleSeconds:timing:)``
/// writes them between the stored bytes. The result is byte for byte what ``VarlinkReply/encode(_:continues:)``
/// writes for the same reply.
public struct EncodedHTTPSReply: Sendable {
    /// `{"parameters":{` and the constant fields before the per-call ones.
    private let head: [UInt8]
    /// The constant fields after them, the closing braces and the NUL.
    private let tail: [UInt8]
    /// The generations of the cache entries the reply was built from (see `CacheEntryMemo`).
    public let generations: [UInt64]

    /// Encodes the constant part of `reply`; its per-call fields are ignored.
    public init(_ reply: ResolveHTTPSReply, generations: [UInt64]) {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("parameters")
        writer.beginObject()
        reply.writeConstantHead(to: &writer)
        head = writer.bytes
        var rest = JSONWriter(continuing: [])
        reply.writeConstantTail(to: &rest)
        tail = rest.bytes + Array("}}".utf8) + [0]
        self.generations = generations
    }

    /// The reply message (with its NUL) with this call's per-call fields.
    public func message(source: AnswerSource, ttl: Int, staleSeconds: Int?, timing: Timing) -> [UInt8] {
        var writer = JSONWriter(continuing: head, reserving: tail.count + 96)
        ResolveHTTPSReply.writePerCall(
            to: &writer, source: source, ttl: ttl, staleSeconds: staleSeconds, timing: timing)
        writer.raw(tail)
        return writer.bytes
    }
}
