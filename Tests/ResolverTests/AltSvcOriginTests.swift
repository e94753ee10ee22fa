import DNSCore
import Testing

@testable import Resolver

@Suite("Alt-Svc origins")
struct AltSvcOriginTests {
    @Test(
        "valid origins are normalized",
        arguments: [
            ("https://example.com:443", "example.com", UInt16(443), "https://example.com:443"),
            ("https://example.com", "example.com", 443, "https://example.com:443"),
            ("HTTPS://Example.COM", "example.com", 443, "https://example.com:443"),
            ("https://example.com:8443/", "example.com", 8443, "https://example.com:8443"),
            ("https://example.com/", "example.com", 443, "https://example.com:443"),
            ("https://192.0.2.1", "192.0.2.1", 443, "https://192.0.2.1:443"),
            ("https://[2001:DB8::1]:8443", "2001:db8::1", 8443, "https://[2001:db8::1]:8443"),
            ("https://[::1]", "::1", 443, "https://[::1]:443"),
            ("https://_svc.example.com", "_svc.example.com", 443, "https://_svc.example.com:443"),
            ("https://xn--bcher-kva.example", "xn--bcher-kva.example", 443, "https://xn--bcher-kva.example:443"),
        ])
    func valid(text: String, host: String, port: UInt16, serialized: String) throws {
        let origin = try AltSvcOrigin(parsing: text)
        #expect(origin.host == host)
        #expect(origin.port == port)
        #expect(origin.description == serialized)
        #expect(try AltSvcOrigin(parsing: serialized) == origin)
        #expect(try AltSvcOrigin(host: host, port: port) == origin)
    }

    @Test(
        "invalid origins throw invalidOrigin",
        arguments: [
            "",
            "example.com",
            "http://example.com",
            "ftp://example.com",
            "https:/example.com",
            "https://",
            "https://:443",
            "https://user@example.com",
            "https://user:pw@example.com:443",
            "https://example.com/path",
            "https://example.com//",
            "https://example.com?x=1",
            "https://example.com#top",
            "https://example.com:",
            "https://example.com:0",
            "https://example.com:65536",
            "https://example.com:4a3",
            "https://example.com:443:443",
            "https://exa mple.com",
            "https://bücher.example",
            "https://-bad.example",
            "https://bad-.example",
            "https://a..b",
            "https://[::1",
            "https://[::1]x",
            "https://[example.com]",
            "https://2001:db8::1",
            "https://%65xample.com",
            " https://example.com",
        ])
    func invalid(text: String) {
        #expect {
            try AltSvcOrigin(parsing: text)
        } throws: { error in
            guard let error = error as? AltSvcError else { return false }
            return error.code == .invalidOrigin && error.parameter == "origin"
        }
    }

    @Test("a non-ASCII host asks for the A-label")
    func idnMessage() {
        do {
            _ = try AltSvcOrigin(parsing: "https://bücher.example")
            Issue.record("expected an error")
        } catch {
            #expect(error.message.contains("A-label"))
        }
    }

    @Test("labels longer than 63 bytes are rejected")
    func longLabel() throws {
        let ok = String(repeating: "a", count: 63) + ".example"
        #expect(try AltSvcOrigin(host: ok).host == ok)
        #expect(throws: AltSvcError.self) { try AltSvcOrigin(host: "a" + ok) }
    }
}
