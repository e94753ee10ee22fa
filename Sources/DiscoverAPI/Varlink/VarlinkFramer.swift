#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Splits a byte stream into varlink messages: each message is one JSON object followed by a NUL byte.
///
/// The framer is pure state (no I/O) so the daemon, the client and the fuzzer share one implementation.
/// It never buffers more than `maxMessageSize + 1` bytes of an unterminated message: past that,
/// ``next()`` throws ``VarlinkFramingError/messageTooLarge(limit:)`` and the caller must close the stream,
/// because the next message boundary can no longer be trusted.
public struct VarlinkFramer: Sendable {
    /// Largest message accepted, in bytes, without its terminating NUL.
    public let maxMessageSize: Int

    private var buffer: [UInt8] = []
    /// Start of the first unconsumed message in `buffer`.
    private var start = 0
    /// Bytes from `start` up to here are known to contain no NUL, so they are not scanned again.
    private var scanned = 0

    /// Creates a framer.
    /// - Parameter maxMessageSize: largest message accepted, without its NUL (docs/API.md default: 64 KiB).
    public init(maxMessageSize: Int = 64 * 1024) {
        self.maxMessageSize = maxMessageSize
    }

    /// Bytes received but not yet returned as a message.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Appends bytes read from the stream.
    public mutating func append<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if start > 0 && start >= buffer.count / 2 {
            // Compact lazily so a stream of small messages costs amortised O(1) per byte.
            buffer.removeSubrange(0..<start)
            scanned -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Returns the next complete message (without its NUL), or nil when more bytes are needed.
    /// - Throws: ``VarlinkFramingError/messageTooLarge(limit:)`` when a message exceeds the limit.
    public mutating func next() throws(VarlinkFramingError) -> ArraySlice<UInt8>? {
        let from = max(scanned, start)
        let end = buffer.count
        // memchr: the NUL search is most of the framer's cost per message, a byte loop is several times slower.
        let nul: Int? = buffer.withUnsafeBufferPointer { bytes in
            guard from < end, let base = bytes.baseAddress,
                let found = memchr(base + from, 0, end - from)
            else { return nil }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
        if let index = nul {
            let length = index - start
            if length > maxMessageSize { throw .messageTooLarge(limit: maxMessageSize) }
            let message = buffer[start..<index]
            start = index + 1
            scanned = start
            return message
        }
        scanned = end
        if end - start > maxMessageSize { throw .messageTooLarge(limit: maxMessageSize) }
        return nil
    }
}

/// Why a byte stream could not be split into varlink messages.
public enum VarlinkFramingError: Error, Equatable, Sendable {
    /// A message (or the unterminated bytes so far) is larger than the limit.
    case messageTooLarge(limit: Int)
}
