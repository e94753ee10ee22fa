import DNSCore
import DNSSDModel
import Testing

@testable import Discovery

@Suite("Record look-up names, validation and merge")
struct RecordTests {
    @Test("presentation names parse into labels: escapes, optional trailing dot")
    func parsesNames() throws {
        #expect(try DNSName.recordLabels("lab-b.local") == [Array("lab-b".utf8), Array("local".utf8)])
        #expect(try DNSName.recordLabels("lab-b.local.") == DNSName.recordLabels("lab-b.local"))
        #expect(try DNSName.recordLabels(#"a\.b\\c\032d.local"#) == [Array("a.b\\c d".utf8), Array("local".utf8)])
        #expect(try DNSName.recordLabels(#"caf\195\169.local"#).first == Array("café".utf8))
        #expect(try DNSName.recordLabels("café.local").first == Array("café".utf8))
    }

    @Test(
        "malformed names are refused with invalidName",
        arguments: ["", ".", "a..b", ".a", #"a\"#, #"a\25"#, #"a\256"#, String(repeating: "x", count: 64) + ".local"]
    )
    func refusesNames(_ name: String) {
        #expect {
            try DNSName.recordLabels(name)
        } throws: { error in
            (error as? DNSSDError)?.code == .invalidName
        }
    }

    @Test("a name over 255 bytes in wire format is refused; one of exactly 255 is accepted")
    func wireLengthLimit() throws {
        let label63 = String(repeating: "a", count: 63)
        // 4 × (1 + 63) = 256 > 255; 3 × 64 + (1 + 61) + 1 = 255.
        #expect(throws: DNSSDError.self) {
            try DNSName.recordLabels([label63, label63, label63, label63].joined(separator: "."))
        }
        let exact = [label63, label63, label63, String(repeating: "b", count: 61)].joined(separator: ".")
        #expect(try DNSName.recordLabels(exact).count == 4)
    }

    @Test("canonical text: lowercased, absolute, special bytes escaped; Avahi text: avahi_escape_label's form")
    func writesNames() throws {
        let labels = [Array("My Printer (2); x.y".utf8), Array("_IPP".utf8), Array("local".utf8)]
        #expect(DNSName.canonicalText(labels) == #"my\032printer\032\(2\)\;\032x\.y._ipp.local."#)
        #expect(try DNSName.avahiText(labels) == #"My\032Printer\032\0402\041\059\032x\.y._IPP.local"#)
        #expect(DNSName.canonicalText([Array("café".utf8)]) == #"caf\195\169."#)
        // Round trip through Avahi's form.
        #expect(try DNSName.recordLabels(DNSName.avahiText(labels)) == labels)
        #expect(throws: DNSSDError.self) { try DNSName.avahiText([[0x61, 0x00]]) }
    }

    @Test("query validation: one concrete type and class, positive interface index")
    func queryValidation() throws {
        let query = try RecordLookups.Query(name: "Lab-B.local.", type: 1, dnsClass: 1, interface: nil)
        #expect(query.avahiName == "Lab-B.local")
        #expect(query.interface == AvahiConversions.interfaceUnspecified)
        for type: UInt16 in [0, 251, 252, 253, 254, 255] {
            #expect(throws: DNSSDError.self) {
                try RecordLookups.Query(name: "a.local", type: type, dnsClass: 1, interface: nil)
            }
        }
        for dnsClass: UInt16 in [0, 254, 255, 0x8001] {
            #expect(throws: DNSSDError.self) {
                try RecordLookups.Query(name: "a.local", type: 1, dnsClass: dnsClass, interface: nil)
            }
        }
        #expect(throws: DNSSDError.self) {
            try RecordLookups.Query(name: "a.local", type: 1, dnsClass: 1, interface: 0)
        }
        #expect(try RecordLookups.Query(name: "a.local", type: 65280, dnsClass: 1, interface: 3).interface == 3)
    }

    func event(_ kind: BrowserCallbackKind, interface: Int32, proto: Int32, rdata: [UInt8] = [192, 0, 2, 2])
        -> RecordBrowserEvent
    {
        RecordBrowserEvent(
            interface: interface,
            proto: proto,
            kind: kind,
            name: "Lab-B.local",
            dnsClass: 1,
            type: 1,
            rdata: rdata
        )
    }

    @Test("a record seen on several interfaces/protocols is added once and removed with its last sighting")
    func mergesSightings() throws {
        var set = RecordSet()
        let added = set.apply(event(.new, interface: 2, proto: 0))
        let record = MDNSRecord(name: "lab-b.local.", type: 1, ttl: 120, rdata: [192, 0, 2, 2], interfaceIndex: 2)
        #expect(added == .added(record))
        #expect(set.apply(event(.new, interface: 3, proto: 1)) == nil)
        #expect(set.apply(event(.new, interface: 2, proto: 0)) == nil, "a repeated sighting changes nothing")
        #expect(
            set.apply(event(.new, interface: 2, proto: 0, rdata: [192, 0, 2, 9])) != nil, "other rdata: new record")
        #expect(set.all.map(\.rdata) == [[192, 0, 2, 2], [192, 0, 2, 9]])
        #expect(set.apply(event(.remove, interface: 2, proto: 0)) == nil)
        #expect(set.apply(event(.remove, interface: 7, proto: 0)) == nil, "a sighting never seen is ignored")
        #expect(set.apply(event(.remove, interface: 3, proto: 1)) == .removed(record))
        #expect(set.all.map(\.rdata) == [[192, 0, 2, 9]])
    }

    @Test("nominal TTLs follow RFC 6762 §10: host records 120 s, others 4500 s")
    func nominalTTL() {
        #expect(MDNSRecord.nominalTTL(type: 1, name: "a.local.") == 120)
        #expect(MDNSRecord.nominalTTL(type: 33, name: "x._http._tcp.local.") == 120)
        #expect(MDNSRecord.nominalTTL(type: 12, name: "2.2.0.192.in-addr.arpa.") == 120)
        #expect(MDNSRecord.nominalTTL(type: 12, name: "_http._tcp.local.") == 4500)
        #expect(MDNSRecord.nominalTTL(type: 16, name: "x._http._tcp.local.") == 4500)
    }
}
