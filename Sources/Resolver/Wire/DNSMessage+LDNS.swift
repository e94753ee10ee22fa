import CLDNS
import DNSCore

// The ldns half of the wire codec: parsing messages and building queries. The types live in DNSCore (no C).

extension DNSMessage {
    /// Parses a DNS message from wire bytes.
    ///
    /// - Parameter bytes: one complete message (for TCP, without the 2-byte length prefix).
    /// - Throws: `DNSWireError` when the bytes are not a well-formed message. A truncated UDP response
    ///   (TC set) whose records are cut short also throws; read `DNSHeader.parse(_:)` for its TC bit.
    public static func parse(_ bytes: [UInt8]) throws(DNSWireError) -> DNSMessage {
        try parse(bytes, header: try DNSHeader.parse(bytes))
    }

    /// ``parse(_:)`` of a message whose header the caller has read already (`PendingQuery.classify`).
    /// - Parameter knownQuestionName: the text and wire length of the name that starts the question section, when
    ///   the caller has compared it with a name it knows.
    static func parse(
        _ bytes: [UInt8], header: DNSHeader, knownQuestionName: (text: String, wireLength: Int)? = nil
    ) throws(DNSWireError) -> DNSMessage {
        if let message = CommonReplyParser.parse(bytes, header: header, knownQuestionName: knownQuestionName) {
            return message
        }
        return try parseWithLDNS(bytes, header: header)
    }

    /// The whole of ``parse(_:)`` through ldns: every message ``CommonReplyParser`` leaves aside.
    static func parseWithLDNS(_ bytes: [UInt8], header: DNSHeader) throws(DNSWireError) -> DNSMessage {
        let packet = try LDNSPacket(wire: bytes)
        let pkt = packet.pointer
        let questionRecords = try LDNSRecords.records(ldns_pkt_question(pkt), isQuestion: true)
        var edns: EDNSInfo?
        var rcodeValue = UInt16(header.rcode)
        if ldns_pkt_edns(pkt) != 0 {
            var options = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
            if let data = ldns_pkt_edns_data(pkt), let bytes = ldns_rdf_data(data) {
                options = UnsafeBufferPointer(start: bytes, count: ldns_rdf_size(data))
            }
            edns = EDNSInfo(
                udpPayloadSize: ldns_pkt_edns_udp_size(pkt), version: ldns_pkt_edns_version(pkt),
                dnssecOK: ldns_pkt_edns_do(pkt) != 0, options: options)
            rcodeValue |= UInt16(ldns_pkt_edns_extended_rcode(pkt)) << 4
        }
        return DNSMessage(
            header: header,
            rcode: RCode(rcodeValue),
            questions: questionRecords.map { DNSQuestion(name: $0.name, type: $0.type, class: $0.class) },
            answer: try LDNSRecords.records(ldns_pkt_answer(pkt)),
            authority: try LDNSRecords.records(ldns_pkt_authority(pkt)),
            additional: try LDNSRecords.records(ldns_pkt_additional(pkt)),
            edns: edns)
    }

}

/// Building query messages.
public enum DNSQuery {
    /// Default EDNS(0) UDP payload size (DNS Flag Day 2020).
    public static let defaultEDNSBufferSize: UInt16 = 1232

    /// Builds a recursive query (RD set) with an EDNS(0) OPT record.
    ///
    /// - Parameters:
    ///   - name: the name to query.
    ///   - type: the record type.
    ///   - class: the class, `IN` by default.
    ///   - id: the message ID; the caller supplies a random one (RFC 5452 §9.2).
    ///   - dnssecOK: sets the DO bit.
    ///   - ednsBufferSize: the advertised UDP payload size.
    /// - Returns: the query in wire format.
    /// - Throws: nothing now that the bytes are written here (the name is valid by construction); the signature
    ///   stays for the callers.
    public static func make(
        name: DNSName, type: RRType, class rrClass: RRClass = .in, id: UInt16, dnssecOK: Bool = false,
        ednsBufferSize: UInt16 = defaultEDNSBufferSize
    ) throws(DNSWireError) -> [UInt8] {
        make(
            nameWire: name.wire, type: type, class: rrClass, id: id, dnssecOK: dnssecOK, ednsBufferSize: ednsBufferSize)
    }

    /// The same query from the name's wire form (valid by the caller's construction: `DNSName.wire` or
    /// `DNSName.appendPlainWire`).
    static func make(
        nameWire: [UInt8], type: RRType, class rrClass: RRClass, id: UInt16, dnssecOK: Bool, ednsBufferSize: UInt16
    ) -> [UInt8] {
        // Written directly: header, the one question and an OPT record (RFC 6891 §6.1.2) with no options. ldns
        // built the same bytes (`makeWithLDNS` in the tests compares them) at about 12 000 instructions a
        // query on the miss path.
        var out: [UInt8] = []
        out.reserveCapacity(12 + nameWire.count + trailerLength)
        appendHeader(id: id, to: &out)
        out.append(contentsOf: nameWire)
        appendTrailer(type: type, class: rrClass, dnssecOK: dnssecOK, ednsBufferSize: ednsBufferSize, to: &out)
        return out
    }

    /// Bytes after the question name: type and class, then the OPT record.
    static let trailerLength = 4 + 11

    /// A query's header: `id`, RD set, one question, one additional record (the OPT). The name follows.
    static func appendHeader(id: UInt16, to out: inout [UInt8]) {
        // A tuple, not an array literal: the literal is an array allocated and freed on every call.
        let header: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (
            UInt8(id >> 8), UInt8(id & 0xFF), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1
        )
        withUnsafeBytes(of: header) { out.append(contentsOf: $0) }
    }

    /// What follows the question name: its type and class, and an OPT record without options.
    static func appendTrailer(
        type: RRType, class rrClass: RRClass, dnssecOK: Bool, ednsBufferSize: UInt16, to out: inout [UInt8]
    ) {
        let trailer:
            (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (
                UInt8(type.rawValue >> 8), UInt8(type.rawValue & 0xFF), UInt8(rrClass.rawValue >> 8),
                UInt8(rrClass.rawValue & 0xFF),
                0, 0, 41, UInt8(ednsBufferSize >> 8), UInt8(ednsBufferSize & 0xFF), 0, 0, dnssecOK ? 0x80 : 0, 0, 0, 0
            )
        withUnsafeBytes(of: trailer) { out.append(contentsOf: $0) }
    }

    /// Builds a query for a name in presentation format; see `make(name:type:class:id:dnssecOK:ednsBufferSize:)`.
    ///
    /// - Throws: `InvalidNameError` for an invalid name, `DNSWireError` when ldns fails.
    public static func make(
        name: String, type: RRType, class rrClass: RRClass = .in, id: UInt16, dnssecOK: Bool = false,
        ednsBufferSize: UInt16 = defaultEDNSBufferSize
    ) throws -> [UInt8] {
        try make(
            name: try DNSName(name), type: type, class: rrClass, id: id, dnssecOK: dnssecOK,
            ednsBufferSize: ednsBufferSize)
    }
}
