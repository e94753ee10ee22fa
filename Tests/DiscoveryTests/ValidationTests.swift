import CAvahi
import Testing

@testable import Discovery

@Suite("Validation")
struct ValidationTests {
    @Test(
        "valid service types",
        arguments: [
            "_http._tcp", "_ipp._tcp", "_a._udp", "_x-y-z._tcp", "_123abc._udp", "_abcdefghijklmno._tcp",
            "_HTTP._TCP",
        ]
    )
    func validTypes(type: String) throws {
        let parsed = try ServiceValidation.serviceType(type)
        #expect(parsed.string.lowercased() == type.lowercased())
    }

    @Test(
        "invalid service types",
        arguments: [
            "", "http._tcp", "_http", "_http._sctp", "_._tcp", "_abcdefghijklmnop._tcp", "_-http._tcp", "_http-._tcp",
            "_ht--tp._tcp", "_123._tcp", "_ht_tp._tcp", "_http._tcp.local", "_h\u{E9}._tcp", "_http.._tcp",
        ]
    )
    func invalidTypes(type: String) {
        do {
            try ServiceValidation.serviceType(type)
            Issue.record("\(type) was accepted")
        } catch {
            #expect(error.code == .invalidServiceType)
        }
    }

    @Test(
        "browsing accepts any service name Avahi can report, up to 62 bytes",
        arguments: [
            "_androidtvremote2._tcp", "_nvstream_dbd._tcp", "_ht--tp._tcp", "_123._udp", "_-x-._tcp",
            "_" + String(repeating: "a", count: 62) + "._tcp", "_abcdefghijklmnop._tcp",
        ]
    )
    func browsableTypes(type: String) throws {
        #expect(try ServiceValidation.browsableServiceType(type).string == type)
        #expect(throws: DiscoveryError.self, "advertising stays strict (RFC 6335)") {
            try ServiceValidation.serviceType(type)
        }
    }

    @Test(
        "browsing still refuses what is no service type",
        arguments: [
            "", "http._tcp", "_http", "_http._sctp", "_._tcp", "_a b._tcp", "_a\\b._tcp", "_h\u{E9}._tcp",
            "_" + String(repeating: "a", count: 63) + "._tcp", "_http._tcp.local",
        ]
    )
    func unbrowsableTypes(type: String) {
        #expect {
            try ServiceValidation.browsableServiceType(type)
        } throws: { error in
            (error as? DiscoveryError)?.code == .invalidServiceType
        }
    }

    @Test("subtypes in short and full form")
    func subtypes() throws {
        #expect(try ServiceValidation.subtype("_printer", of: "_http._tcp") == "_printer")
        #expect(try ServiceValidation.subtype("printer", of: "_http._tcp") == "_printer")
        #expect(try ServiceValidation.subtype("_printer._sub._http._tcp", of: "_http._tcp") == "_printer")
        #expect(throws: DiscoveryError.self) {
            try ServiceValidation.subtype("_printer._sub._ipp._tcp", of: "_http._tcp")
        }
        #expect(throws: DiscoveryError.self) { try ServiceValidation.subtype("_", of: "_http._tcp") }
        #expect(throws: DiscoveryError.self) { try ServiceValidation.subtype("_a b", of: "_http._tcp") }
        #expect(throws: DiscoveryError.self) { try ServiceValidation.subtype("_a.b", of: "_http._tcp") }
    }

    @Test("instance names: 1-63 bytes of UTF-8, no control characters")
    func instanceNames() throws {
        try ServiceValidation.instanceName("Living Room Printer")
        try ServiceValidation.instanceName(String(repeating: "x", count: 63))
        // 21 three-byte characters = 63 bytes.
        try ServiceValidation.instanceName(String(repeating: "\u{20AC}", count: 21))
        for bad in ["", String(repeating: "x", count: 64), String(repeating: "\u{20AC}", count: 22), "a\u{0}b", "a\nb"]
        {
            do {
                try ServiceValidation.instanceName(bad)
                Issue.record("\(bad.debugDescription) was accepted")
            } catch {
                #expect(error.code == .invalidName)
            }
        }
    }

    @Test("ports 0-65535")
    func ports() throws {
        #expect(try ServiceValidation.port(0) == 0)
        #expect(try ServiceValidation.port(65535) == 65535)
        for bad in [-1, 65536, Int.max] {
            do {
                _ = try ServiceValidation.port(bad)
                Issue.record("\(bad) was accepted")
            } catch {
                #expect(error.code == .invalidParameter)
            }
        }
    }

    @Test("domains and host names")
    func domains() throws {
        try ServiceValidation.domain("local")
        try ServiceValidation.domain("local.")
        try ServiceValidation.domain("example.com")
        try ServiceValidation.hostName("printer.local")
        for bad in ["", ".", "a..b", "a b", String(repeating: "x", count: 64) + ".com"] {
            #expect(throws: DiscoveryError.self) { try ServiceValidation.domain(bad) }
        }
    }

    @Test("Avahi error codes become DiscoveryError codes with Avahi's text")
    func avahiErrors() {
        #expect(DiscoveryError.fromAvahi(0, "ok") == nil)
        let collision = DiscoveryError.fromAvahi(-8, "add")
        #expect(collision?.code == .nameConflict)
        #expect(collision?.avahiErrorText == "Local name collision")
        #expect(DiscoveryError.fromAvahi(-26, "x")?.code == .avahiUnavailable)
        #expect(DiscoveryError.fromAvahi(-11, "x")?.code == .invalidServiceType)
        #expect(DiscoveryError.fromAvahi(-15, "x")?.code == .timeout)
        #expect(DiscoveryError.fromAvahi(-30, "x")?.code == .notFound)
        #expect(DiscoveryError.fromAvahi(-1, "x")?.code == .avahiFailure)
        #expect(throws: DiscoveryError.self) { try check(-8, "add") }
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
