import CAvahi
import DNSSDModel
import Testing

@testable import Discovery

@Suite("Avahi conversions")
struct AvahiConversionTests {
    @Test("Avahi error codes become DNSSDError codes with Avahi's text")
    func avahiErrors() {
        #expect(DNSSDError.fromAvahi(0, "ok") == nil)
        let collision = DNSSDError.fromAvahi(-8, "add")
        #expect(collision?.code == .nameConflict)
        #expect(collision?.avahiErrorText == "Local name collision")
        #expect(DNSSDError.fromAvahi(-26, "x")?.code == .avahiUnavailable)
        #expect(DNSSDError.fromAvahi(-11, "x")?.code == .invalidServiceType)
        #expect(DNSSDError.fromAvahi(-15, "x")?.code == .timeout)
        #expect(DNSSDError.fromAvahi(-30, "x")?.code == .notFound)
        #expect(DNSSDError.fromAvahi(-1, "x")?.code == .avahiFailure)
        #expect(throws: DNSSDError.self) { try check(-8, "add") }
    }

    @Test("alternative service names")
    func alternativeNames() {
        #expect(AdvertisementRecord.alternativeName("Printer") == "Printer #2")
        #expect(AdvertisementRecord.alternativeName("Printer #2") == "Printer #3")
    }

    @Test("addresses from Avahi: IPv6 link-local gets %ifname, others stay as they are")
    func addressFormatting() throws {
        var address = AvahiAddress()
        #expect(avahi_address_parse("fe80::1", AvahiConversions.protocolIPv6, &address) != nil)
        #expect(AvahiConversions.format(&address, interface: 1) == "fe80::1%lo")
        #expect(AvahiConversions.format(&address, interface: 99999) == "fe80::1%99999")
        #expect(avahi_address_parse("2001:db8::7", AvahiConversions.protocolIPv6, &address) != nil)
        #expect(AvahiConversions.format(&address, interface: 1) == "2001:db8::7")
        #expect(avahi_address_parse("192.0.2.7", AvahiConversions.protocolIPv4, &address) != nil)
        #expect(AvahiConversions.format(&address, interface: 1) == "192.0.2.7")
        #expect(AvahiConversions.interfaceName(1) == "lo")
        #expect(AvahiConversions.interfaceIndex("lo") == 1)
        #expect(AvahiConversions.interfaceIndex("no-such-if0") == nil)
    }

    @Test("IPv6 link-local detection")
    func linkLocal() {
        #expect(AvahiConversions.isIPv6LinkLocal("fe80::1"))
        #expect(AvahiConversions.isIPv6LinkLocal("febf::1"))
        #expect(!AvahiConversions.isIPv6LinkLocal("fec0::1"))
        #expect(!AvahiConversions.isIPv6LinkLocal("2001:db8::1"))
        #expect(!AvahiConversions.isIPv6LinkLocal("192.0.2.1"))
    }

    @Test("string lists for publishing are built last string first (Avahi publishes them reversed)")
    func stringListOrder() throws {
        let txt = TXTRecord(strings: [Array("b=2".utf8), Array("a=1".utf8), [0xFF]])
        let listed = try AvahiConversions.withStringList(txt) { list in AvahiConversions.txtRecord(from: list) }
        #expect(listed.strings == txt.strings.reversed())
        let empty = try AvahiConversions.withStringList(TXTRecord()) { list in list == nil }
        #expect(empty)
    }
}
