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
        var rest = JSONWriter(continuing: [])
        reply.writeConstantTail(to: &rest)
        tail = rest.bytes + Array("}}".utf8) + [0]
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
        [UInt8](unsafeUninitializedCapacity: maximumMessageSize) { buffer, count in
            count = write(
                source: source, ttl: ttl, staleSeconds: staleSeconds, totalMs: totalMs,
                into: UnsafeMutableRawBufferPointer(buffer))
        }
    }

    /// The most bytes ``write(source:ttl:staleSeconds:totalMs:into:)`` writes.
    public var maximumMessageSize: Int { head.count + Self.perCallLimit + tail.count }

    /// `,"source":"expiredCache","ttl":` and 20 characters, `,"staleSeconds":` and 20, `,"timing":{"totalMs":`,
    /// at most 24 for the number, `,"queries":[]}`: 146 bytes; the writes are bounds-checked all the same.
    private static let perCallLimit = 192

    /// Writes ``message(source:ttl:staleSeconds:totalMs:)`` at the start of `buffer`, which holds at least
    /// ``maximumMessageSize`` bytes (no array in between: the daemon writes into its socket buffer); returns the
    /// number of bytes written.
    public func write(
        source: AnswerSource, ttl: Int, staleSeconds: Int?, totalMs: Double, into buffer: UnsafeMutableRawBufferPointer
    ) -> Int {
        var output = RawOutput(buffer)
        head.withUnsafeBytes { output.append(raw: $0) }
        // Exactly what ResolveHTTPSReply.writePerCall writes after the head (a test compares the two).
        output.append(#","source":""#)
        switch source {
        case .cache: output.append("cache")
        case .expiredCache: output.append("expiredCache")
        case .network: output.append("network")
        }
        output.append(#"","ttl":"#)
        JSONNumbers.int(ttl, to: &output)
        if let staleSeconds {
            output.append(#","staleSeconds":"#)
            JSONNumbers.int(staleSeconds, to: &output)
        }
        output.append(#","timing":{"totalMs":"#)
        JSONNumbers.double(totalMs, to: &output)
        output.append(#","queries":[]}"#)
        tail.withUnsafeBytes { output.append(raw: $0) }
        return output.count
    }
}

/// Bytes written at the start of a caller's buffer, bounds-checked.
private struct RawOutput: JSONOutput {
    let buffer: UnsafeMutableRawBufferPointer
    var count = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    mutating func append(_ byte: UInt8) {
        precondition(count < buffer.count, "reply larger than its bound")
        buffer[count] = byte
        count += 1
    }

    mutating func append(raw bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress else { return }
        precondition(bytes.count <= buffer.count - count, "reply larger than its bound")
        (buffer.baseAddress! + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func append(_ text: StaticString) {
        append(raw: UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}
