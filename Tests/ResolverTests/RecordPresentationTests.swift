import DNSCore
import Testing

@testable import Resolver

@Suite("Records in presentation format (discover query)")
struct RecordPresentationTests {
    private func record(_ type: RRType, _ hex: String, name: String = "h3.lab.test.") -> ResourceRecord {
        ResourceRecord(name: name, type: type, ttl: 300, rdata: wireBytes(hex))
    }

    @Test("An HTTPS record reads as dig and kdig print it, its SvcParams by name")
    func https() {
        #expect(record(.https, "0001 00 0001 0006 02683302 6832").presentationData() == "1 . alpn=h3,h2")
        // AliasMode to a target name.
        #expect(record(.https, "0000 026833 036c6162 0474657374 00").presentationData() == "0 h3.lab.test.")
    }

    @Test("An SOA's names and numbers, and an A record, in their usual form")
    func soaAndAddress() {
        let soa = record(
            .soa,
            "026e73 036c6162 0474657374 00 0a686f73746d6173746572 036c6162 0474657374 00"
                + "78c40465 00000e10 00000258 00015180 0000003c", name: "lab.test.")
        #expect(soa.presentationData() == "ns.lab.test. hostmaster.lab.test. 2026112101 3600 600 86400 60")
        #expect(record(.a, "c000021a").presentationData() == "192.0.2.26")
    }

    @Test("A DNSKEY's key tag is a comment for people and left out for scripts")
    func dnskeyComments() {
        let key = record(.init(48), "0101 03 0d 0102030405060708", name: "dnssec.test.")
        #expect(key.presentationData() == "257 3 13 AQIDBAUGBwg=")
        let commented = key.presentationData(comments: true)
        #expect(commented.hasPrefix("257 3 13 AQIDBAUGBwg= ;{id = ") && commented.contains("ksk"))
    }

    @Test("A type ldns does not know, and RDATA that does not fit its type, fall back to RFC 3597's generic form")
    func generic() {
        #expect(record(.init(65400), "abcdef").presentationData() == "\\# 3 abcdef")
        // Three octets are no IPv4 address.
        #expect(record(.a, "c00002").presentationData() == "\\# 3 c00002")
        #expect(record(.init(65400), "").presentationData() == "\\# 0")
    }
}
