/// The question of a DNS message: name (lowercased, absolute), type and class.
public struct DNSQuestion: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Lowercased, absolute presentation name with trailing dot, e.g. `example.com.`.
    public var name: String
    /// The record type.
    public var type: RRType
    /// The class, normally `IN`.
    public var `class`: RRClass

    /// Creates a question; `name` is normalised (lowercased, trailing dot) when it is a valid name.
    public init(name: String, type: RRType, class rrClass: RRClass = .in) {
        self.init(normalizedName: DNSName.normalized(name), type: type, class: rrClass)
    }

    /// Creates a question whose name is already lowercased and absolute (a parsed name, a cache key's, a
    /// `DNSName.text`): the miss path makes several and need not check the name each time.
    package init(normalizedName: String, type: RRType, class rrClass: RRClass) {
        self.name = normalizedName
        self.type = type
        self.class = rrClass
    }

    public var description: String { "\(name) \(`class`) \(type)" }
}

/// One resource record as received: owner name, type, class, TTL and raw RDATA bytes.
///
/// `rdata` is the record data in uncompressed wire format; use the typed accessors (`ipv4Address()`,
/// `svcb()`, ...) to decode it.
public struct ResourceRecord: Hashable, Sendable, Codable {
    /// Lowercased, absolute owner name with trailing dot.
    public var name: String
    /// The record type.
    public var type: RRType
    /// The class, normally `IN`.
    public var `class`: RRClass
    /// Time to live in seconds, as received.
    public var ttl: UInt32
    /// The RDATA in uncompressed wire format.
    public var rdata: [UInt8]

    /// Creates a record; `name` is normalised (lowercased, trailing dot) when it is a valid name.
    public init(name: String, type: RRType, class rrClass: RRClass = .in, ttl: UInt32, rdata: [UInt8]) {
        self.init(normalizedName: DNSName.normalized(name), type: type, class: rrClass, ttl: ttl, rdata: rdata)
    }

    /// Creates a record whose name is already lowercased and absolute (the parse path).
    package init(normalizedName: String, type: RRType, class rrClass: RRClass, ttl: UInt32, rdata: [UInt8]) {
        self.name = normalizedName
        self.type = type
        self.class = rrClass
        self.ttl = ttl
        self.rdata = rdata
    }

    /// The RDATA hashed as one run of bytes: the synthesized hash combined every byte on its own, about 20
    /// instructions each, and a negative answer's SOA is looked up by its records on every miss
    /// (``NegativePayloadKey``; BENCHMARKS.md, round 22).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(type)
        hasher.combine(`class`)
        hasher.combine(ttl)
        hasher.combine(rdata.count)
        rdata.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public static func == (lhs: ResourceRecord, rhs: ResourceRecord) -> Bool {
        lhs.type == rhs.type && lhs.class == rhs.class && lhs.ttl == rhs.ttl && lhs.rdata == rhs.rdata
            && lhs.name == rhs.name
    }
}

/// The fixed 12-byte DNS header (RFC 1035 §4.1.1), readable even when the rest of the message is cut short.
public struct DNSHeader: Hashable, Sendable {
    /// The message ID.
    public var id: UInt16
    /// Response (`true`) or query.
    public var qr: Bool
    /// The operation code; 0 for a standard query.
    public var opcode: UInt8
    /// Authoritative answer.
    public var aa: Bool
    /// Truncated: retry over TCP.
    public var tc: Bool
    /// Recursion desired.
    public var rd: Bool
    /// Recursion available.
    public var ra: Bool
    /// Authentic data (RFC 4035 §3.2.3).
    public var ad: Bool
    /// Checking disabled (RFC 4035 §3.2.2).
    public var cd: Bool
    /// The low 4 bits of the response code; see `DNSMessage.rcode` for the extended value.
    public var rcode: UInt8
    /// QDCOUNT as written in the header.
    public var questionCount: UInt16
    /// ANCOUNT as written in the header.
    public var answerCount: UInt16
    /// NSCOUNT as written in the header.
    public var authorityCount: UInt16
    /// ARCOUNT as written in the header.
    public var additionalCount: UInt16

    /// Creates a header from its fields (tests, synthesised messages).
    public init(
        id: UInt16, qr: Bool, opcode: UInt8, aa: Bool, tc: Bool, rd: Bool, ra: Bool, ad: Bool, cd: Bool, rcode: UInt8,
        questionCount: UInt16, answerCount: UInt16, authorityCount: UInt16, additionalCount: UInt16
    ) {
        self.id = id
        self.qr = qr
        self.opcode = opcode
        self.aa = aa
        self.tc = tc
        self.rd = rd
        self.ra = ra
        self.ad = ad
        self.cd = cd
        self.rcode = rcode
        self.questionCount = questionCount
        self.answerCount = answerCount
        self.authorityCount = authorityCount
        self.additionalCount = additionalCount
    }

    /// Reads the header only, so the I/O layer can check the ID and the TC bit of a packet that ldns rejects
    /// because it was truncated.
    ///
    /// - Throws: `DNSWireError.Code.truncated` when fewer than 12 bytes are given.
    public static func parse(_ bytes: [UInt8]) throws(DNSWireError) -> DNSHeader {
        var reader = WireReader(bytes)
        guard reader.remaining >= 12 else { throw DNSWireError(.truncated, "shorter than a DNS header") }
        let id = try reader.readUInt16()
        let flags = try reader.readUInt16()
        return DNSHeader(
            id: id, qr: flags & 0x8000 != 0, opcode: UInt8(flags >> 11 & 0x0F), aa: flags & 0x0400 != 0,
            tc: flags & 0x0200 != 0, rd: flags & 0x0100 != 0, ra: flags & 0x0080 != 0, ad: flags & 0x0020 != 0,
            cd: flags & 0x0010 != 0, rcode: UInt8(flags & 0x000F), questionCount: try reader.readUInt16(),
            answerCount: try reader.readUInt16(), authorityCount: try reader.readUInt16(),
            additionalCount: try reader.readUInt16())
    }
}

/// The EDNS(0) information of a message (RFC 6891), taken from its OPT record.
public struct EDNSInfo: Hashable, Sendable {
    /// The requestor's (or responder's) UDP payload size.
    public var udpPayloadSize: UInt16
    /// The EDNS version; 0 is the only one defined.
    public var version: UInt8
    /// The DO bit (RFC 3225).
    public var dnssecOK: Bool
    /// The Extended DNS Errors (RFC 8914) among the options, in order: read from replies (an upstream's reason for
    /// a SERVFAIL), empty in a query.
    public var extendedErrors: [ExtendedDNSError]
    /// The length of the PADDING option (RFC 7830), when the message carries one: a server that pads its replies
    /// over TLS (RFC 8467) says so here.
    public var padding: Int?

    public init(
        udpPayloadSize: UInt16, version: UInt8, dnssecOK: Bool, extendedErrors: [ExtendedDNSError] = [],
        padding: Int? = nil
    ) {
        self.udpPayloadSize = udpPayloadSize
        self.version = version
        self.dnssecOK = dnssecOK
        self.extendedErrors = extendedErrors
        self.padding = padding
    }

    /// The EDNS of an OPT record whose RDATA is `options`, read in one walk of its options: the EDEs (code 15) in
    /// order, and the first PADDING option's length (code 12). Never traps: an option cut short ends the walk,
    /// keeping what came before it (ldns accepts such an OPT, so a reply is not refused for it).
    public init(udpPayloadSize: UInt16, version: UInt8, dnssecOK: Bool, options: UnsafeBufferPointer<UInt8>) {
        self.init(udpPayloadSize: udpPayloadSize, version: version, dnssecOK: dnssecOK)
        var at = 0
        while at + 4 <= options.count {
            let code = Int(options[at]) << 8 | Int(options[at + 1])
            let size = Int(options[at + 2]) << 8 | Int(options[at + 3])
            let value = at + 4
            guard value + size <= options.count else { break }
            if code == 12, padding == nil { padding = size }
            if code == 15, let error = ExtendedDNSError.read(options[value..<(value + size)]) {
                extendedErrors.append(error)
            }
            at = value + size
        }
    }
}

/// A decoded DNS message. The Resolver module parses it with ldns (`DNSMessage.parse`, `ldns_wire2pkt`); every
/// ldns status is checked, so malformed input throws and never crashes.
public struct DNSMessage: Hashable, Sendable {
    /// Header flags and counts as received.
    public var header: DNSHeader
    /// The full response code, including the EDNS extended bits (RFC 6891 §6.1.3).
    public var rcode: RCode
    /// The questions; a normal message has exactly one.
    public var questions: [DNSQuestion]
    /// The answer section.
    public var answer: [ResourceRecord]
    /// The authority section (SOA for negative answers).
    public var authority: [ResourceRecord]
    /// The additional section without the OPT record, which ldns moves into `edns`.
    public var additional: [ResourceRecord]
    /// EDNS information when the message carried an OPT record.
    public var edns: EDNSInfo?

    /// The message ID.
    public var id: UInt16 { header.id }
    /// The single question, or `nil` when the message has none or several.
    public var question: DNSQuestion? { questions.count == 1 ? questions[0] : nil }

    /// `SERVFAIL, EDE 7 (Signature Expired): ...`: the response code and the Extended DNS Errors, as Status and
    /// `discover query --short` name an error answer.
    public var rcodeAndReasons: String {
        "\(rcode)" + (edns?.extendedErrors.map { ", EDE \($0)" } ?? []).joined()
    }

    /// Creates a message from parts (for tests and synthesised answers).
    public init(
        header: DNSHeader, rcode: RCode, questions: [DNSQuestion], answer: [ResourceRecord] = [],
        authority: [ResourceRecord] = [], additional: [ResourceRecord] = [], edns: EDNSInfo? = nil
    ) {
        self.header = header
        self.rcode = rcode
        self.questions = questions
        self.answer = answer
        self.authority = authority
        self.additional = additional
        self.edns = edns
    }

    /// Whether this message is the response to a query with `id` and `question`: QR set, same ID, exactly one
    /// question with the same name (case-insensitive), type and class. Anything else must be dropped (RFC 5452 §9.1).
    public func matches(id: UInt16, question expected: DNSQuestion) -> Bool {
        guard header.qr, header.id == id, let question else { return false }
        return question.type == expected.type && question.class == expected.class
            && (question.name == expected.name
                || DNSName.normalized(question.name) == DNSName.normalized(expected.name))
    }
}
