import DNSCore
import Foundation

// Format choice: JSON inside a small versioned envelope. The cached value is the caller's `Codable` type, which a
// hand-written binary format could not encode without knowing it; JSON is what Foundation's coders do best on
// Linux, is inspectable with `jq` when debugging a daemon in the field, and 100 000 entries encode to tens of
// megabytes in well under a second, which matters little for a save every few minutes. Integrity comes from the
// atomic replace (see `AtomicFile`), not from the format.

/// The outcome of loading a persisted cache.
public struct CacheLoadResult: Sendable, Equatable {
    /// Entries put into the cache.
    public var loaded: Int = 0
    /// Entries left out: expired past the maximum stale time, or already present in the cache.
    public var skipped: Int = 0
    /// Entries that could not be decoded (for example written by a different `Value` schema); worth a log line.
    public var invalid: Int = 0

    /// Creates a result.
    public init(loaded: Int = 0, skipped: Int = 0, invalid: Int = 0) {
        self.loaded = loaded
        self.skipped = skipped
        self.invalid = invalid
    }
}

/// Shared rules of the persisted files: envelope, limits, mode.
public enum CachePersistence {
    /// The version of the cache and Alt-Svc file formats written by this build.
    public static let formatVersion = 1

    /// Files larger than this are refused when loading (100 000 entries take far less).
    public static let maxFileSize = 256 * 1024 * 1024

    /// The mode of the files: readable and writable by the daemon's user only.
    static let fileMode: mode_t = 0o600

    /// The envelope around every persisted payload.
    struct Envelope<Payload: Codable>: Codable {
        var format: String
        var version: Int
        var savedAt: Double
        var payload: Payload
    }

    /// What is decoded first, so that a future version is reported as such rather than as corrupt.
    private struct Header: Decodable {
        var format: String
        var version: Int
    }

    /// Encodes `payload` in the envelope and atomically replaces the file at `url`.
    static func write<Payload: Codable>(
        _ payload: Payload,
        format: String,
        savedAt: Double,
        to url: URL
    ) throws(CachePersistenceError) {
        let path = url.path(percentEncoded: false)
        let bytes: [UInt8]
        do {
            let envelope = Envelope(format: format, version: formatVersion, savedAt: savedAt, payload: payload)
            bytes = Array(try JSONEncoder().encode(envelope))
        } catch {
            throw CachePersistenceError(code: .io, message: "cannot encode", path: path, underlying: error)
        }
        try AtomicFile.replaceContents(of: path, with: bytes, mode: fileMode)
    }

    /// Reads the file at `url` and decodes its payload after checking format name and version.
    static func read<Payload: Codable>(
        _ type: Payload.Type,
        format: String,
        from url: URL
    ) throws(CachePersistenceError) -> Payload {
        let path = url.path(percentEncoded: false)
        let data = Data(try AtomicFile.readContents(of: path, maxSize: maxFileSize))
        let decoder = JSONDecoder()
        let header: Header
        do {
            header = try decoder.decode(Header.self, from: data)
        } catch {
            throw CachePersistenceError(code: .corrupt, message: "not a \(format) file", path: path, underlying: error)
        }
        guard header.format == format else {
            throw CachePersistenceError(
                code: .corrupt,
                message: "file holds \"\(header.format)\", expected \"\(format)\"",
                path: path
            )
        }
        guard header.version == formatVersion else {
            throw CachePersistenceError(
                code: .unsupportedVersion,
                message: "format version \(header.version), this build reads \(formatVersion)",
                path: path
            )
        }
        do {
            return try decoder.decode(Envelope<Payload>.self, from: data).payload
        } catch {
            throw CachePersistenceError(code: .corrupt, message: "cannot decode", path: path, underlying: error)
        }
    }
}

/// Decodes an element without failing the whole array when the element is malformed.
struct Lenient<Element: Codable>: Codable {
    var element: Element?

    init(_ element: Element) {
        self.element = element
    }

    init(from decoder: any Decoder) throws {
        element = try? Element(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        try element.encode(to: encoder)
    }
}

extension OptimisticCache {
    static var fileFormat: String { "discoverd.cache" }

    /// One persisted entry; in-flight refresh state is not persisted.
    struct PersistedEntry: Codable {
        var key: CacheKey
        /// Absolute wall-clock expiry, seconds since 1970.
        var expires: Double
        var answer: CacheAnswer<Value>
    }

    /// Saves every entry, fresh and stale, to `url` with an atomic replace (mode 0600).
    ///
    /// The directory must exist. Safe to call while the cache is in use: entries are copied under the lock,
    /// encoding and I/O happen outside it. It blocks for the encoding, the write and two fsyncs: call it from a
    /// thread that may block (`NIOThreadPool`), not from an event loop.
    /// - Throws: ``CachePersistenceError`` with code `.io` when encoding or a system call fails.
    public func save(to url: URL) throws(CachePersistenceError) {
        let entries = snapshot().map { Lenient(PersistedEntry(key: $0.key, expires: $0.expires, answer: $0.answer)) }
        try CachePersistence.write(entries, format: Self.fileFormat, savedAt: clock.now(), to: url)
    }

    /// Loads entries saved by ``save(to:)`` into this cache.
    ///
    /// Entries past the maximum stale time are skipped, expiries are capped by the current TTL limits, and keys
    /// already cached keep their live data. Undecodable single entries are counted, not fatal.
    /// - Returns: How many entries were loaded, skipped and invalid.
    /// - Throws: ``CachePersistenceError``: `.notFound` when there is no file, `.corrupt` for a truncated or
    ///   garbled file, `.unsupportedVersion`, `.tooLarge`, `.io`. The daemon logs it and starts with what it has.
    /// - Parameter accepting: whether an entry's answer belongs to its key; an entry it rejects counts as invalid
    ///   (``OptimisticCache/entryBelongsToKey(_:_:)`` for the resolver's cache: a planted or corrupted entry for
    ///   another name is dropped).
    @discardableResult
    public func load(
        from url: URL, accepting: (CacheKey, CacheAnswer<Value>) -> Bool = { _, _ in true }
    ) throws(CachePersistenceError) -> CacheLoadResult {
        let entries = try CachePersistence.read([Lenient<PersistedEntry>].self, format: Self.fileFormat, from: url)
        var result = CacheLoadResult()
        for case let entry in entries {
            guard let entry = entry.element, accepting(entry.key, entry.answer) else {
                result.invalid += 1
                continue
            }
            if restore(key: entry.key, answer: entry.answer, expires: entry.expires) {
                result.loaded += 1
            } else {
                result.skipped += 1
            }
        }
        return result
    }
}

extension OptimisticCache where Value == CachedRRset {
    /// Whether a persisted answer is exactly what the bailiwick rules keep for its key (``ReplyScrubber``): its
    /// records form the chain from the key's name and its authority holds only that chain's zone data. Anything
    /// else was not written by this resolver, or was changed since.
    public static func entryBelongsToKey(_ key: CacheKey, _ answer: CacheAnswer<CachedRRset>) -> Bool {
        let question = DNSQuestion(name: key.name, type: RRType(key.type), class: RRClass(key.dnsClass))
        guard question.name == key.name else { return false }
        let payload = answer.payload
        let records = payload?.records ?? []
        let authority = payload?.authority ?? []
        let scrubbed = ReplyScrubber.scrub(
            answer: records, authority: authority, question: question, maximumHops: AliasChain.defaultMaximumHops * 2)
        switch answer {
        case .positive:
            // Authority of a positive answer is only the signer's proofs, which the scrub keeps within its zone.
            return !records.isEmpty && scrubbed.answer.count == records.count
                && Set(scrubbed.authority) == Set(authority)
        case .nodata, .nxdomain:
            return records.isEmpty && Set(scrubbed.authority) == Set(authority)
        }
    }
}
