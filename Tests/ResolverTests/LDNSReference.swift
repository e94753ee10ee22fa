import CLDNS
import DNSCore

@testable import Resolver

extension DNSQuery {
    /// `make(name:type:class:id:dnssecOK:ednsBufferSize:)` as ldns builds it: the reference the Swift encoder is
    /// compared with (it was the encoder until the miss path wrote queries itself).
    static func makeWithLDNS(
        name: DNSName, type: RRType, class rrClass: RRClass = .in, id: UInt16, dnssecOK: Bool = false,
        ednsBufferSize: UInt16 = defaultEDNSBufferSize
    ) throws(DNSWireError) -> [UInt8] {
        let packet = try LDNSPacket(query: name, type: type, class: rrClass, flags: UInt16(LDNS_RD))
        ldns_pkt_set_id(packet.pointer, id)
        ldns_pkt_set_rd(packet.pointer, 1)
        ldns_pkt_set_edns_udp_size(packet.pointer, ednsBufferSize)
        ldns_pkt_set_edns_do(packet.pointer, dnssecOK ? 1 : 0)
        return try packet.wire()
    }
}
