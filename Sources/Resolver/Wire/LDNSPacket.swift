import DNSCore
import CLDNS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Owns one `ldns_pkt*` and frees it in `deinit`.
///
/// ldns is only the codec here: no ldns resolver or socket is ever created. The packet never leaves the
/// function that made it (it is not `Sendable`), so no locking is needed.
final class LDNSPacket {
    let pointer: UnsafeMutablePointer<ldns_pkt>

    /// Parses wire bytes with `ldns_wire2pkt`.
    init(wire bytes: [UInt8]) throws(DNSWireError) {
        if let reason = LDNSWire.refusal(bytes) { throw DNSWireError(.malformedMessage, reason) }
        var packet: UnsafeMutablePointer<ldns_pkt>? = nil
        let status = bytes.withUnsafeBufferPointer { buffer in
            ldns_wire2pkt(&packet, buffer.baseAddress, buffer.count)
        }
        try Self.check(status, .malformedMessage)
        guard let packet else { throw DNSWireError(.malformedMessage, "ldns returned no packet") }
        self.pointer = packet
    }

    /// Builds a query packet with `ldns_pkt_query_new` for an already validated name.
    init(query name: DNSName, type: RRType, class rrClass: RRClass, flags: UInt16) throws(DNSWireError) {
        let wire = name.wire
        let rdf = wire.withUnsafeBufferPointer { buffer in
            ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, buffer.count, buffer.baseAddress)
        }
        guard let rdf else { throw DNSWireError(.encodingFailed, "ldns could not allocate the query name") }
        // ldns_pkt_query_new takes ownership of `rdf`. It only fails when malloc fails, and then it is not
        // documented whether `rdf` was freed: leaking a few bytes beats a double free, so we do not free it.
        guard
            let packet = ldns_pkt_query_new(
                rdf, ldns_rr_type(rawValue: UInt32(type.rawValue)), ldns_rr_class(rawValue: UInt32(rrClass.rawValue)),
                flags)
        else {
            throw DNSWireError(.encodingFailed, "ldns could not create the query packet")
        }
        self.pointer = packet
    }

    deinit {
        ldns_pkt_free(pointer)
    }

    /// Serialises the packet with `ldns_pkt2wire`.
    func wire() throws(DNSWireError) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        var size = 0
        let status = ldns_pkt2wire(&buffer, pointer, &size)
        // ldns allocates the output with malloc; we copy it and free it here whatever the status.
        defer { free(buffer) }
        try Self.check(status, .encodingFailed)
        guard let buffer else { throw DNSWireError(.encodingFailed, "ldns returned no wire data") }
        return Array(UnsafeBufferPointer(start: buffer, count: size))
    }

    /// Turns an ldns status into our error; `LDNS_STATUS_OK` passes.
    static func check(_ status: ldns_status, _ code: DNSWireError.Code) throws(DNSWireError) {
        guard status != LDNS_STATUS_OK else { return }
        let text = ldns_get_errorstr_by_id(status).map { String(cString: $0) } ?? "ldns status \(status.rawValue)"
        throw DNSWireError(code, text)
    }
}

/// Reading records out of ldns structures.
enum LDNSRecords {
    /// Converts every record of an `ldns_rr_list` (may be NULL) into `ResourceRecord`s.
    static func records(
        _ list: UnsafeMutablePointer<ldns_rr_list>?, isQuestion: Bool = false
    ) throws(DNSWireError) -> [ResourceRecord] {
        guard let list else { return [] }
        let count = ldns_rr_list_rr_count(list)
        var out: [ResourceRecord] = []
        out.reserveCapacity(count)
        for index in 0..<count {
            guard let rr = ldns_rr_list_rr(list, index) else {
                throw DNSWireError(.malformedMessage, "ldns returned no record at index \(index)")
            }
            out.append(try record(rr, isQuestion: isQuestion))
        }
        return out
    }

    static func record(_ rr: UnsafeMutablePointer<ldns_rr>, isQuestion: Bool) throws(DNSWireError) -> ResourceRecord {
        let name = try ownerName(rr)
        let type = RRType(UInt16(truncatingIfNeeded: ldns_rr_get_type(rr).rawValue))
        let rrClass = RRClass(UInt16(truncatingIfNeeded: ldns_rr_get_class(rr).rawValue))
        if isQuestion {
            return ResourceRecord(normalizedName: name, type: type, class: rrClass, ttl: 0, rdata: [])
        }
        return ResourceRecord(
            normalizedName: name, type: type, class: rrClass, ttl: ldns_rr_ttl(rr), rdata: try rdata(rr))
    }

    private static func ownerName(_ rr: UnsafeMutablePointer<ldns_rr>) throws(DNSWireError) -> String {
        guard let owner = ldns_rr_owner(rr), let data = ldns_rdf_data(owner) else {
            throw DNSWireError(.malformedMessage, "record without owner name")
        }
        let bytes = Array(UnsafeBufferPointer(start: data, count: ldns_rdf_size(owner)))
        return try DNSName(wire: bytes).text
    }

    /// The record's RDATA in uncompressed wire format (ldns has already expanded compression pointers).
    private static func rdata(_ rr: UnsafeMutablePointer<ldns_rr>) throws(DNSWireError) -> [UInt8] {
        guard let buffer = ldns_buffer_new(64) else {
            throw DNSWireError(.malformedMessage, "ldns could not allocate a buffer")
        }
        defer { ldns_buffer_free(buffer) }
        try LDNSPacket.check(ldns_rr_rdata2buffer_wire(buffer, rr), .malformedMessage)
        let length = ldns_buffer_position(buffer)
        guard length > 0 else { return [] }
        guard let start = ldns_buffer_begin(buffer) else {
            throw DNSWireError(.malformedMessage, "ldns buffer without data")
        }
        return Array(UnsafeBufferPointer(start: start, count: length))
    }
}

/// What must be checked before bytes from the network reach `ldns_wire2pkt`, which leaks on two shapes of message
/// (libldns 1.8.3, both found by the fuzzer):
///
/// - a second OPT or TSIG record: it keeps the last of each and never frees the ones before
///   (`EDNSOptionScan.repeatedOPTOrTSIG`);
/// - a record whose RDATA ldns reads past or short of its RDLENGTH: ldns reads RDATA by the type's fields, so a name
///   in it that runs on (TSIG's algorithm name, say) moves its reading off the record boundaries, and the bytes after
///   are taken for records of their own, a second TSIG among them, which leaks as above though no second TSIG was
///   sent. Each record is read here by ldns at the offset the RDLENGTHs give and must end where its RDLENGTH says;
///   one that does not, or that ldns cannot read, refuses the message (RDATA must fit RDLENGTH, RFC 1035 §3.2.1).
package enum LDNSWire {
    /// Why `bytes` must not be given to `ldns_wire2pkt`, or nil.
    package static func refusal(_ bytes: [UInt8]) -> String? {
        if let reason = EDNSOptionScan.repeatedOPTOrTSIG(in: bytes) { return reason }
        var reason: String?
        bytes.withUnsafeBufferPointer { buffer in
            _ = EDNSOptionScan.walkRecords(bytes) { record in
                let end = record.fixed + 10 + (Int(bytes[record.fixed + 8]) << 8 | Int(bytes[record.fixed + 9]))
                var position = record.start
                var rr: UnsafeMutablePointer<ldns_rr>? = nil
                let status = ldns_wire2rr(
                    &rr, buffer.baseAddress, buffer.count, &position,
                    record.isAdditional ? LDNS_SECTION_ADDITIONAL : LDNS_SECTION_ANSWER)
                if let rr { ldns_rr_free(rr) }
                guard status == LDNS_STATUS_OK else {
                    let why = String(cString: ldns_get_errorstr_by_id(status))
                    reason = "a record at offset \(record.start) cannot be read: \(why)"
                    return false
                }
                guard position == end else {
                    reason = "a record at offset \(record.start) has RDATA that does not fill its RDLENGTH exactly"
                    return false
                }
                return true
            }
        }
        return reason
    }
}
