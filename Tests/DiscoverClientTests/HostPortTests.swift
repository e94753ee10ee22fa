import DiscoverClient
import Testing

@Suite("Host and port as people type them")
struct HostPortTests {
    @Test(
        "valid forms",
        arguments: [
            ("example.com", "example.com", nil, false),
            ("example.com.", "example.com.", nil, false),
            ("example.com:8443", "example.com", 8443, false),
            ("192.0.2.10", "192.0.2.10", nil, true),
            ("192.0.2.10:53", "192.0.2.10", 53, true),
            ("2001:db8::10", "2001:db8::10", nil, true),
            ("[2001:db8::10]", "2001:db8::10", nil, true),
            ("[2001:db8::10]:443", "2001:db8::10", 443, true),
            ("fe80::1%eth0", "fe80::1%eth0", nil, true),
            ("[fe80::1%eth0]:8080", "fe80::1%eth0", 8080, true),
            ("::1", "::1", nil, true),
            ("https://example.com", "example.com", nil, false),
            ("HTTPS://example.com:8443/path?q", "example.com", 8443, false),
            ("1.2.3", "1.2.3", nil, false),
        ] as [(String, String, Int?, Bool)])
    func valid(text: String, host: String, port: Int?, literal: Bool) throws {
        let parsed = try HostPort(parsing: text)
        #expect(parsed.host == host)
        #expect(parsed.port == port)
        #expect(parsed.isAddressLiteral == literal)
    }

    @Test(
        "invalid forms say what is wrong",
        arguments: [
            ("", "missing host"),
            (":443", "missing host"),
            ("example.com:", "missing port"),
            ("example.com:http", "not a number"),
            ("example.com:0", "between 1 and 65535"),
            ("example.com:70000", "between 1 and 65535"),
            ("example.com:-1", "not a number"),
            ("[2001:db8::10", "without ']'"),
            ("[example.com]:443", "not one"),
            ("[2001:db8::10]443", "':PORT'"),
            ("a:b:c", "[ADDRESS]:PORT"),
            ("2001:db8::10::1", "[ADDRESS]:PORT"),
            ("http://example.com", "https://"),
        ])
    func invalid(text: String, fragment: String) {
        #expect {
            try HostPort(parsing: text)
        } throws: { error in
            (error as? HostPort.ParseError)?.message.contains(fragment) == true
        }
    }

    @Test("errors carry a code")
    func codes() {
        for (text, code) in [
            ("", HostPort.ParseError.Code.missingHost), ("ftp://x", .unsupportedScheme), ("[x]", .invalidBrackets),
            ("a:b:c", .invalidAddress), ("x:0", .invalidPort), ("x:", .invalidPort),
        ] {
            #expect(throws: HostPort.ParseError.self) { try HostPort(parsing: text) }
            do {
                _ = try HostPort(parsing: text)
            } catch {
                #expect(error.code == code, "\(text)")
            }
        }
    }

    @Test("printed back with brackets only where needed")
    func description() throws {
        #expect(try HostPort(parsing: "[2001:db8::10]:443").description == "[2001:db8::10]:443")
        #expect(try HostPort(parsing: "2001:db8::10").description == "2001:db8::10")
        #expect(HostPort(host: "example.com", port: 8443).description == "example.com:8443")
        #expect(HostPort(host: "192.0.2.1").isAddressLiteral)
    }
}
