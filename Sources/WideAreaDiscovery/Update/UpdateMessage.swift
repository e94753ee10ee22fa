import DNSCore
import CLDNS
import Resolver

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A DNS UPDATE message (RFC 2136) built and TSIG-signed (RFC 8945) with ldns, and the check of its reply.
///
/// Owns its `ldns_pkt` and frees it in `deinit`. It is not `Sendable` and lives inside one call of
/// ``UpdateClient``, so no locking is needed. The signed packet is kept until the reply is verified: the reply's
/// MAC covers the request's MAC (RFC 8945 §5.3), which ldns reads from this packet's TSIG record.
final class UpdateMessage {
    private let packet: UnsafeMutablePointer<ldns_pkt>
    /// The signed wire bytes to send.
    let wire: [UInt8]
    let id: UInt16
    private let key: TSIGKey

    /// Builds and signs the message.
    /// - Parameters:
    ///   - zone: the zone's apex as raw labels (the Zone section, RFC 2136 §2.3).
    ///   - prerequisites: the Prerequisite section.
    ///   - updates: the Update section.
    ///   - lease: RFC 9664 UPDATE-LEASE seconds to ask for (an EDNS option), or nil.
    ///   - key: the TSIG key.
    /// - Throws: `invalidParameter` when ldns cannot build or sign it (a bad record, an unknown algorithm).
    init(zone: [[UInt8]], prerequisites: [UpdateRecord], updates: [UpdateRecord], lease: UInt32?, key: TSIGKey)
        throws(WideAreaError)
    {
        let zoneWire = DNSName.wire(zone)
        guard
            let zoneRDF = zoneWire.withUnsafeBufferPointer({
                ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, $0.count, $0.baseAddress)
            })
        else { throw WideAreaError(.invalidParameter, "UPDATE: ldns could not allocate the zone name") }
        let prerequisiteList = try Self.list(prerequisites)
        defer { ldns_rr_list_deep_free(prerequisiteList) }
        let updateList = try Self.list(updates)
        defer { ldns_rr_list_deep_free(updateList) }
        // ldns_update_pkt_new takes `zoneRDF` and clones the lists.
        guard let packet = ldns_update_pkt_new(zoneRDF, LDNS_RR_CLASS_IN, prerequisiteList, updateList, nil) else {
            throw WideAreaError(.invalidParameter, "UPDATE: ldns could not create the message")
        }
        self.packet = packet
        self.key = key
        id = UInt16.random(in: 1...UInt16.max)
        ldns_pkt_set_id(packet, id)
        // RFC 2136 §2.2: the bits where a query has RD are zero in an UPDATE.
        ldns_pkt_set_rd(packet, 0)
        if let lease {
            // RFC 9664 §4: option code 2, the 4-byte LEASE.
            let option: [UInt8] = [0, 2, 0, 4] + withUnsafeBytes(of: lease.bigEndian, Array.init)
            ldns_pkt_set_edns_udp_size(packet, 1232)
            let data = option.withUnsafeBufferPointer { ldns_rdf_new_frm_data(LDNS_RDF_TYPE_UNKNOWN, $0.count, $0.baseAddress) }
            ldns_pkt_set_edns_data(packet, data)
        }
        let status = ldns_pkt_tsig_sign(packet, key.name, key.secret, 300, key.algorithm, nil)
        guard status == LDNS_STATUS_OK else {
            throw WideAreaError(.invalidParameter, "UPDATE: TSIG signing with \(key) failed: \(Self.text(status))")
        }
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        var size = 0
        let encoded = ldns_pkt2wire(&buffer, packet, &size)
        // ldns allocates the output with malloc; copied here and freed whatever the status.
        defer { free(buffer) }
        guard encoded == LDNS_STATUS_OK, let buffer else {
            throw WideAreaError(.invalidParameter, "UPDATE: ldns could not encode the message: \(Self.text(encoded))")
        }
        wire = Array(UnsafeBufferPointer(start: buffer, count: size))
    }

    deinit {
        ldns_pkt_free(packet)
    }

    /// What the reply says, after its TSIG is checked.
    struct Reply: Hashable, Sendable {
        /// The rcode name: the TSIG error when there is one (BADSIG, BADKEY, BADTIME), else the header's rcode.
        var rcode: String
        /// The lease the server granted (RFC 9664), when it answered the option.
        var lease: UInt32?
        var isSuccess: Bool { rcode == "NOERROR" }
    }

    /// Parses and checks the reply to this message.
    /// - Throws: `badReplySignature` when a successful reply is unsigned or its MAC does not verify (RFC 8945
    ///   §5.3: then the reply must be treated as if none came); `lookupFailed` for bytes that are not a reply to it.
    func check(reply bytes: [UInt8]) throws(WideAreaError) -> Reply {
        if let reason = LDNSWire.refusal(bytes) {
            throw WideAreaError(.lookupFailed, "UPDATE reply is not a valid DNS message: \(reason)")
        }
        var parsed: UnsafeMutablePointer<ldns_pkt>? = nil
        let status = bytes.withUnsafeBufferPointer { ldns_wire2pkt(&parsed, $0.baseAddress, $0.count) }
        guard status == LDNS_STATUS_OK, let reply = parsed else {
            throw WideAreaError(.lookupFailed, "UPDATE reply is not a DNS message: \(Self.text(status))")
        }
        defer { ldns_pkt_free(reply) }
        guard ldns_pkt_id(reply) == id, ldns_pkt_qr(reply) != 0 else {
            throw WideAreaError(.lookupFailed, "UPDATE reply does not answer our message (id or QR)")
        }
        var rcode = Self.rcodeName(UInt16(ldns_pkt_get_rcode(reply).rawValue))
        let tsig = ldns_pkt_tsig(reply)
        if let tsig, ldns_rr_rd_count(tsig) >= 6, let errorField = ldns_rr_rdf(tsig, 5) {
            let tsigError = ldns_rdf2native_int16(errorField)
            if tsigError != 0 { rcode = Self.rcodeName(tsigError) }
        }
        if rcode == "NOERROR" {
            guard tsig != nil else {
                throw WideAreaError(.badReplySignature, "UPDATE reply is not signed with TSIG", rcode: "BADSIG")
            }
            let queryMAC = ldns_pkt_tsig(packet).flatMap { ldns_rr_rdf($0, 3) }
            let verified = bytes.withUnsafeBufferPointer {
                ldns_pkt_tsig_verify(reply, $0.baseAddress, $0.count, key.name, key.secret, queryMAC)
            }
            guard verified != 0 else {
                throw WideAreaError(
                    .badReplySignature, "UPDATE reply's TSIG does not verify with \(key)", rcode: "BADSIG")
            }
        }
        return Reply(rcode: rcode, lease: Self.lease(in: reply))
    }

    /// The granted lease of an RFC 9664 option in the reply's OPT record.
    private static func lease(in reply: UnsafeMutablePointer<ldns_pkt>) -> UInt32? {
        guard let data = ldns_pkt_edns_data(reply) else { return nil }
        let bytes = Array(UnsafeBufferPointer(start: ldns_rdf_data(data), count: ldns_rdf_size(data)))
        var index = 0
        while index + 4 <= bytes.count {
            let code = UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
            let length = Int(UInt16(bytes[index + 2]) << 8 | UInt16(bytes[index + 3]))
            guard index + 4 + length <= bytes.count else { return nil }
            if code == 2, length >= 4 {
                return bytes[(index + 4)..<(index + 8)].reduce(0) { $0 << 8 | UInt32($1) }
            }
            index += 4 + length
        }
        return nil
    }

    /// Standard names of rcodes, TSIG errors included (RFC 2136 §2.2, RFC 8945 §3).
    static func rcodeName(_ code: UInt16) -> String {
        let names: [UInt16: String] = [
            0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED", 6: "YXDOMAIN",
            7: "YXRRSET", 8: "NXRRSET", 9: "NOTAUTH", 10: "NOTZONE", 16: "BADSIG", 17: "BADKEY", 18: "BADTIME",
            22: "BADTRUNC",
        ]
        return names[code] ?? "RCODE\(code)"
    }

    private static func list(_ records: [UpdateRecord]) throws(WideAreaError) -> UnsafeMutablePointer<ldns_rr_list> {
        guard let list = ldns_rr_list_new() else { throw WideAreaError(.invalidParameter, "UPDATE: out of memory") }
        for record in records {
            let wire = record.wire
            var rr: UnsafeMutablePointer<ldns_rr>? = nil
            var position = 0
            let status = wire.withUnsafeBufferPointer {
                ldns_wire2rr(&rr, $0.baseAddress, $0.count, &position, LDNS_SECTION_ANSWER)
            }
            guard status == LDNS_STATUS_OK, let rr else {
                ldns_rr_list_deep_free(list)
                throw WideAreaError(.invalidParameter, "UPDATE: a record cannot be encoded: \(text(status))")
            }
            _ = ldns_rr_list_push_rr(list, rr)
        }
        return list
    }

    private static func text(_ status: ldns_status) -> String {
        ldns_get_errorstr_by_id(status).map { String(cString: $0) } ?? "ldns status \(status.rawValue)"
    }
}
