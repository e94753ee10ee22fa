import DNSCore
import Testing

@testable import Resolver

@Suite("Alt-Svc header parsing")
struct AltSvcHeaderTests {
    private static func alt(
        _ protocolID: String,
        _ host: String?,
        _ port: UInt16,
        ma: UInt32 = 86_400,
        persist: Bool = false
    ) -> AltSvcAlternative {
        AltSvcAlternative(protocolID: protocolID, host: host, port: port, maxAge: ma, persist: persist)
    }

    @Test(
        "valid values, including the RFC 7838 examples",
        arguments: [
            // RFC 7838 §3 examples
            ("h2=\"new.example.org:80\"", [alt("h2", "new.example.org", 80)]),
            ("h2=\":443\"", [alt("h2", nil, 443)]),
            ("h2=\"alt.example.com:8000\", h2=\":443\"", [alt("h2", "alt.example.com", 8000), alt("h2", nil, 443)]),
            ("h2=\":443\"; ma=3600", [alt("h2", nil, 443, ma: 3600)]),
            ("h2=\":443\"; ma=2592000; persist=1", [alt("h2", nil, 443, ma: 2_592_000, persist: true)]),
            // RFC 7838 §3: ALPN "w=x:y#z" is sent percent-encoded
            ("w%3Dx%3Ay#z=\":443\"", [alt("w=x:y#z", nil, 443)]),
            // What servers send today
            (
                "h3=\":443\"; ma=86400, h3-29=\":443\"; ma=86400",
                [alt("h3", nil, 443), alt("h3-29", nil, 443)]
            ),
            ("h3=\":443\";ma=60,h2=\":443\";ma=60", [alt("h3", nil, 443, ma: 60), alt("h2", nil, 443, ma: 60)]),
            ("  \th3=\":8443\"  ", [alt("h3", nil, 8443)]),
            // quoted-string escapes, IPv6, case
            ("h2=\"alt\\.example\\.com:443\"", [alt("h2", "alt.example.com", 443)]),
            ("h3=\"[2001:DB8::1]:443\"", [alt("h3", "2001:db8::1", 443)]),
            ("h3=\"ALT.Example.COM:443\"", [alt("h3", "alt.example.com", 443)]),
            ("h3=\"192.0.2.1:443\"", [alt("h3", "192.0.2.1", 443)]),
            ("H3=\":443\"", [alt("H3", nil, 443)]),
            // parameters
            ("h3=\":443\"; foo=bar; ma=60; x=\"y;z\"", [alt("h3", nil, 443, ma: 60)]),
            ("h3=\":443\"; ma=\"120\"", [alt("h3", nil, 443, ma: 120)]),
            ("h3=\":443\"; MA=5", [alt("h3", nil, 443, ma: 5)]),
            ("h3=\":443\"; ma=5; ma=10", [alt("h3", nil, 443, ma: 5)]),
            ("h3=\":443\"; ma=0", [alt("h3", nil, 443, ma: 0)]),
            ("h3=\":443\"; ma=99999999999999999999", [alt("h3", nil, 443, ma: 2_147_483_648)]),
            ("h3=\":443\"; persist=2", [alt("h3", nil, 443)]),
            ("h3=\":443\"; persist=\"1\"", [alt("h3", nil, 443, persist: true)]),
            // list rules (RFC 7230 §7) and tolerated empty parameters
            (", h3=\":443\" ,, ", [alt("h3", nil, 443)]),
            ("h3=\":443\";", [alt("h3", nil, 443)]),
            ("h3=\":443\" ; ; ma=7", [alt("h3", nil, 443, ma: 7)]),
            // a protocol id that is not UTF-8 is an unknown protocol: skipped
            ("%FF%FE=\":443\", h3=\":443\"", [alt("h3", nil, 443)]),
            // "clear" is only special as the whole value; as a protocol-id it is an ordinary token
            ("clear=\":443\"", [alt("clear", nil, 443)]),
        ])
    func valid(value: String, expected: [AltSvcAlternative]) throws {
        #expect(try AltSvcHeader(parsing: value) == .alternatives(expected))
    }

    @Test("clear", arguments: ["clear", "  clear\t"])
    func clear(value: String) throws {
        #expect(try AltSvcHeader(parsing: value) == .clear)
    }

    @Test(
        "malformed values throw malformedHeader",
        arguments: [
            "",
            "   ",
            ",",
            " , ,",
            "h3",
            "h3=",
            "h3=:443",
            "h3=\":443",
            "h3=\"443\"",
            "h3=\":\"",
            "h3=\":0\"",
            "h3=\":65536\"",
            "h3=\":44a\"",
            "h3=\"bad host!:443\"",
            "h3=\"[::1:443\"",
            "h3=\"[nothex::1]:443\"",
            "h3=\"-bad.example:443\"",
            "h3 =\":443\"",
            "h3= \":443\"",
            "h3=\":443\" garbage",
            "h3=\":443\"; ma=abc",
            "h3=\":443\"; ma=-1",
            "h3=\":443\"; ma=",
            "h3=\":443\"; =5",
            "h3=\":443\"; ma",
            "h3%zz=\":443\"",
            "h3%4=\":443\"",
            "h3=\"a\u{01}b:443\"",
            "h3=\":443\\",
            "clear, h3=\":443\"",
            "h3=\":443\", clear",
            "Clear",
            "clear clear",
            "\"h3\"=\":443\"",
        ])
    func malformed(value: String) {
        #expect {
            try AltSvcHeader(parsing: value)
        } throws: { error in
            guard let error = error as? AltSvcError else { return false }
            return error.code == .malformedHeader && error.parameter == "header" && !error.message.isEmpty
        }
    }

    @Test("errors name the offset of the problem")
    func errorOffset() {
        do {
            _ = try AltSvcHeader(parsing: "h3=\":443\"; ma=x")
            Issue.record("expected an error")
        } catch {
            #expect(error.offset == 14)
            #expect(error.description.contains("ma"))
        }
    }

    @Test("oversized values are rejected and long lists are cut to the most preferred")
    func limits() throws {
        let huge = String(repeating: "h3=\":443\", ", count: 2_000)
        #expect(throws: AltSvcError.self) { try AltSvcHeader(parsing: huge) }
        let long = (1...100).map { "h3=\":\($0)\"" }.joined(separator: ",")
        guard case .alternatives(let alternatives) = try AltSvcHeader(parsing: long) else {
            Issue.record("expected alternatives")
            return
        }
        #expect(alternatives.count == AltSvcHeader.maxAlternatives)
        #expect(alternatives.first?.port == 1)
    }

    @Test("arbitrary bytes never crash the parser")
    func fuzz() {
        var generator = SplitMix64(seed: 7838)
        let alphabet = Array("h3=\":;,\\ \t%aZ09[]-.clear".utf8) + [0, 0x7F, 0x80, 0xFF]
        var accepted = 0
        for _ in 0..<5_000 {
            let length = Int(generator.next() % 40)
            let bytes = (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }
            if (try? AltSvcHeader(parsing: String(decoding: bytes, as: UTF8.self))) != nil { accepted += 1 }
        }
        // Random strings are almost never valid; the point is reaching here without a trap.
        #expect(accepted < 5_000)
    }
}

/// A small deterministic generator so the fuzz cases are the same on every run.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
