import Testing

@testable import DNSSDModel

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
        #expect(throws: DNSSDError.self, "advertising stays strict (RFC 6335)") {
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
            (error as? DNSSDError)?.code == .invalidServiceType
        }
    }

    @Test("subtypes in short and full form")
    func subtypes() throws {
        #expect(try ServiceValidation.subtype("_printer", of: "_http._tcp") == "_printer")
        #expect(try ServiceValidation.subtype("printer", of: "_http._tcp") == "_printer")
        #expect(try ServiceValidation.subtype("_printer._sub._http._tcp", of: "_http._tcp") == "_printer")
        #expect(throws: DNSSDError.self) {
            try ServiceValidation.subtype("_printer._sub._ipp._tcp", of: "_http._tcp")
        }
        #expect(throws: DNSSDError.self) { try ServiceValidation.subtype("_", of: "_http._tcp") }
        #expect(throws: DNSSDError.self) { try ServiceValidation.subtype("_a b", of: "_http._tcp") }
        #expect(throws: DNSSDError.self) { try ServiceValidation.subtype("_a.b", of: "_http._tcp") }
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
            #expect(throws: DNSSDError.self) { try ServiceValidation.domain(bad) }
        }
    }
}
