import CLDNS
import DNSCore
import NIOCore
import NIOPosix
import Synchronization

/// One query as sent on one try, and the rules for accepting a reply to it.
///
/// Every try gets its own `PendingQuery` with a fresh random ID (RFC 5452 §9.2), so a reply to an earlier try is
/// never accepted by a later one.
struct PendingQuery: Sendable {
    /// The message ID of this try.
    let id: UInt16
    /// The question the reply must echo.
    let question: DNSQuestion
    /// The query as built: the shared template (any ID in its first two bytes) until ``wire`` stamps `id` into a
    /// copy, or a wire that carries `id` already (`stamped`). Only the question bytes are read before sending.
    private let bytes: [UInt8]
    private let stamped: Bool
    /// Length of the question section in `wire` (name, type, class), which starts right after the header.
    let questionLength: Int

    /// The query in wire format, as sent (without a TCP length prefix). A template query makes a copy on every
    /// read: read it once per send.
    var wire: [UInt8] { stamped ? bytes : Self.stamp(bytes, id: id) }

    /// A query built once by `DNSQuery.make` with any ID, sent with `id`: the template is shared, not copied, until
    /// the bytes are needed (a padded copy for DoT and DoH is made from it directly, with `id`).
    ///
    /// - Parameters:
    ///   - template: the query in wire format; its first two bytes are replaced when sent.
    ///   - nameLength: the wire length of the query name.
    init(template: [UInt8], id: UInt16, question: DNSQuestion, nameLength: Int) {
        self.id = id
        self.question = question
        self.bytes = template
        self.stamped = false
        self.questionLength = nameLength + 4
    }

    /// A query whose wire carries `id` already (a padded copy of another try's query): kept as it is, not copied
    /// to stamp the ID again.
    init(stampedWire wire: [UInt8], id: UInt16, question: DNSQuestion, questionLength: Int) {
        self.id = id
        self.question = question
        self.bytes = wire
        self.stamped = true
        self.questionLength = questionLength
    }

    /// The same query with another ID.
    func withID(_ id: UInt16) -> PendingQuery {
        guard stamped else {
            return PendingQuery(template: bytes, id: id, question: question, nameLength: questionLength - 4)
        }
        return PendingQuery(
            stampedWire: Self.stamp(bytes, id: id), id: id, question: question, questionLength: questionLength)
    }

    /// The query with keepalive and padding options (``EDNSPadding``) and its ID, built in one copy; nil if it has
    /// no OPT record to carry them.
    func padded(keepalive: Bool) -> PendingQuery? {
        guard let wire = EDNSPadding.pad(bytes, id: id, questionLength: questionLength, keepalive: keepalive) else {
            return nil
        }
        return PendingQuery(stampedWire: wire, id: id, question: question, questionLength: questionLength)
    }

    private static func stamp(_ bytes: [UInt8], id: UInt16) -> [UInt8] {
        var wire = bytes
        wire[0] = UInt8(id >> 8)
        wire[1] = UInt8(id & 0xFF)
        return wire
    }

    /// What a received message means for this query.
    ///
    /// RFC 5452 §9.1: a reply counts only when it is a response with our ID and our question; everything else is
    /// dropped and the try keeps waiting. Over UDP a matching reply with TC set asks for a retry over TCP
    /// (RFC 1035 §4.2.1, RFC 7766 §5), whatever its sections hold. Never traps, whatever `bytes` contains.
    ///
    /// - Parameters:
    ///   - bytes: one message (a datagram, or a TCP frame without its length prefix).
    ///   - overTCP: whether it came over TCP, where TC is not followed.
    func classify(_ bytes: [UInt8], overTCP: Bool) -> ReplyVerdict {
        let header: DNSHeader
        do {
            header = try DNSHeader.parse(bytes)
        } catch {
            return .drop("shorter than a DNS header (\(bytes.count) bytes)")
        }
        guard header.qr else { return .drop("not a response") }
        guard header.id == id else { return .drop("wrong ID \(header.id), expected \(id)") }
        if header.tc && !overTCP {
            // ldns may reject a message cut short, so compare the question bytes themselves.
            if echoesQuestion(bytes, header: header) { return .truncated(RCode(UInt16(header.rcode))) }
            if let message = try? DNSMessage.parse(bytes), message.matches(id: id, question: question) {
                return .truncated(message.rcode)
            }
            return .drop("truncated reply for another question")
        }
        let message: DNSMessage
        do {
            // A reply that echoes our question byte for byte (case aside) names it as we do: the parser takes our
            // text instead of decoding it again.
            let known = echoesQuestion(bytes, header: header) ? (question.name, questionLength - 4) : nil
            message = try DNSMessage.parse(bytes, header: header, knownQuestionName: known)
        } catch {
            return .drop("unparseable reply: \(error)")
        }
        guard message.matches(id: id, question: question) else {
            return .drop("reply for another question (\(message.questions.map(\.description)))")
        }
        return .accept(message)
    }

    /// Whether `bytes` holds exactly one question equal to ours: name compared case-insensitively (RFC 4343),
    /// type and class byte for byte.
    private func echoesQuestion(_ bytes: [UInt8], header: DNSHeader) -> Bool {
        guard header.questionCount == 1, bytes.count >= 12 + questionLength, self.bytes.count >= 12 + questionLength
        else { return false }
        let nameEnd = 12 + questionLength - 4
        let end = 12 + questionLength
        return self.bytes.withUnsafeBufferPointer { sent in
            bytes.withUnsafeBufferPointer { received in
                // The name: equal, or equal once ASCII letters are folded (label length octets are at most 63,
                // below "A", so folding them changes nothing).
                for offset in 12..<nameEnd where sent[offset] != received[offset] {
                    if sent[offset] | 0x20 != received[offset] | 0x20 { return false }
                    let folded = received[offset] | 0x20
                    if folded < UInt8(ascii: "a") || folded > UInt8(ascii: "z") { return false }
                }
                // Type and class, byte for byte.
                for offset in nameEnd..<end where sent[offset] != received[offset] { return false }
                return true
            }
        }
    }
}

/// The meaning of one received message for the try waiting on it.
enum ReplyVerdict: Sendable {
    /// The reply to our question.
    case accept(DNSMessage)
    /// Our reply, cut short (TC): ask again over TCP. Carries the header's response code, for the timing report.
    case truncated(RCode)
    /// Not ours or not readable; the try keeps waiting. The reason is for the debug log.
    case drop(String)
}

/// How one try (one query on one socket) ended.
enum ExchangeOutcome: Sendable {
    /// An acceptable response.
    case response(DNSMessage)
    /// A UDP response with TC set.
    case truncated(RCode)
    /// Nothing acceptable came within the try's timeout.
    case timedOut
    /// The socket failed before the timeout: connection refused (ICMP or RST), closed by the server, no route.
    case failed(String)
    /// The calling task was cancelled.
    case cancelled
    /// The upstream could not be reached as securely as required: a TLS handshake or certificate check failed,
    /// or `encryption = strict` forbids it. Nothing was sent in clear text; the reason names what failed.
    case insecure(String)

    /// A socket call that failed (`step`: "connect", "send", "receive"), in the system's words ("connect: Connection
    /// refused") rather than NIO's description of its error type, so UDP, TCP and DoH read as DoT does.
    static func failed(_ step: String, _ error: any Error) -> ExchangeOutcome {
        var underlying = error
        if let attempts = error as? NIOConnectionError, let first = attempts.connectionErrors.first?.error {
            underlying = first
        }
        switch underlying {
        case let io as IOError: return .failed("\(step): " + String(cString: strerror(io.errnoCode)))
        case ChannelError.connectTimeout(let limit):
            return .failed("\(step): timed out after \(limit.nanoseconds / 1_000_000) ms")
        default: return .failed("\(step): \(underlying)")
        }
    }
}

/// Message IDs for tries (RFC 5452 §9.2: unpredictable), from the kernel's CSPRNG 512 bytes at a time: one
/// `getrandom` for 256 IDs instead of one per try (as Unbound draws its IDs from an in-process arc4random).
enum QueryID {
    private struct Pool: ~Copyable {
        var bytes = [UInt8](repeating: 0, count: 512)
        var next = 512
    }

    private static let pool = Mutex(Pool())

    static func random() -> UInt16 {
        pool.withLock { state in
            if state.next + 2 > state.bytes.count {
                refill(&state.bytes)
                state.next = 0
            }
            let id = UInt16(state.bytes[state.next]) << 8 | UInt16(state.bytes[state.next + 1])
            state.next += 2
            return id
        }
    }

    private static func refill(_ bytes: inout [UInt8]) {
        var filled = 0
        bytes.withUnsafeMutableBytes { raw in
            while filled < raw.count {
                let got = getrandom(raw.baseAddress! + filled, raw.count - filled, 0)
                if got <= 0 { break }
                filled += got
            }
        }
        guard filled < bytes.count else { return }
        // getrandom failed (it does not, short of a kernel without it): the standard library's generator instead.
        var generator = SystemRandomNumberGenerator()
        for index in filled..<bytes.count { bytes[index] = generator.next() }
    }
}
