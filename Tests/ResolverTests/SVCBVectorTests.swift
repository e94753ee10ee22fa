import DNSCore
import Testing

@testable import Resolver

/// RFC 9460 Appendix D test vectors, on wire bytes.
@Suite("SVCB: RFC 9460 Appendix D")
struct SVCBVectorTests {
    static let fooExampleCom = "03666f6f 076578616d706c65 03636f6d 00"
    static let fooExampleOrg = "03666f6f 076578616d706c65 036f7267 00"

    @Test("D.1 AliasMode: example.com. HTTPS 0 foo.example.com.")
    func aliasMode() throws {
        let record = try SVCBRecord.parse(rdata: wireBytes("0000" + Self.fooExampleCom))
        #expect(record.isAliasMode)
        #expect(record.target.text == "foo.example.com.")
        #expect(record.params == SVCBParams())
    }

    /// One valid ServiceMode vector of D.2 with the binding it must produce.
    struct Vector: Sendable, CustomTestStringConvertible {
        var figure: String
        var hex: String
        var binding: ServiceBinding
        var testDescription: String { figure }
    }

    static let serviceMode: [Vector] = [
        Vector(
            figure: "Figure 3: example.com. SVCB 1 .", hex: "0001 00",
            binding: ServiceBinding(priority: 1, target: "example.com.")),
        Vector(
            figure: "Figure 4: SVCB 16 foo.example.com. port=53",
            hex: "0010" + fooExampleCom + "0003 0002 0035",
            binding: ServiceBinding(priority: 16, target: "foo.example.com.", port: 53)),
        Vector(
            figure: "Figure 5: SVCB 1 foo.example.com. key667=hello",
            hex: "0001" + fooExampleCom + "029b 0005 68656c6c6f",
            binding: ServiceBinding(
                priority: 1, target: "foo.example.com.", unknown: [.init(key: 667, value: "aGVsbG8=")])),
        Vector(
            figure: "Figure 6: SVCB 1 foo.example.com. key667=\"hello\\210qoo\"",
            hex: "0001" + fooExampleCom + "029b 0009 68656c6c6fd2716f6f",
            binding: ServiceBinding(
                priority: 1, target: "foo.example.com.", unknown: [.init(key: 667, value: "aGVsbG/ScW9v")])),
        Vector(
            figure: "Figure 7: SVCB 1 foo.example.com. ipv6hint=\"2001:db8::1,2001:db8::53:1\"",
            hex: "0001" + fooExampleCom
                + "0006 0020 20010db8000000000000000000000001 20010db8000000000000000000530001",
            binding: ServiceBinding(
                priority: 1, target: "foo.example.com.", ipv6hint: ["2001:db8::1", "2001:db8::53:1"])),
        Vector(
            figure: "Figure 8: SVCB 1 example.com. ipv6hint=\"2001:db8:122:344::192.0.2.33\"",
            hex: "0001 076578616d706c65 03636f6d 00 0006 0010 20010db8012203440000 0000c0000221",
            binding: ServiceBinding(priority: 1, target: "example.com.", ipv6hint: ["2001:db8:122:344::c000:221"])),
        Vector(
            figure: "Figure 9: SVCB 16 foo.example.org. alpn=h2,h3-19 mandatory=ipv4hint,alpn ipv4hint=192.0.2.1",
            hex: "0010" + fooExampleOrg
                + "0000 0004 0001 0004 0001 0009 026832 0568332d3139 0004 0004 c0000201",
            binding: ServiceBinding(
                priority: 16, target: "foo.example.org.", alpn: ["h2", "h3-19"], ipv4hint: ["192.0.2.1"],
                mandatory: ["alpn", "ipv4hint"])),
        Vector(
            figure: "Figure 10: SVCB 16 foo.example.org. alpn=\"f\\\\\\\\oo\\\\,bar,h2\"",
            hex: "0010" + fooExampleOrg + "0001 000c 08665c6f6f2c626172 026832",
            binding: ServiceBinding(priority: 16, target: "foo.example.org.", alpn: ["f\\oo,bar", "h2"])),
    ]

    @Test("D.2 ServiceMode vectors parse to the expected binding", arguments: serviceMode)
    func serviceModeVector(_ vector: Vector) throws {
        let record = try SVCBRecord.parse(rdata: wireBytes(vector.hex))
        #expect(!record.isAliasMode)
        #expect(HTTPSProcessing.isCompatible(record))
        #expect(ServiceBinding(record: record, ownerName: "example.com") == vector.binding)
        // The whole RRset goes through client processing unchanged.
        #expect(
            HTTPSProcessing.process(rdatas: [wireBytes(vector.hex)], ownerName: "example.com")
                == .bindings([vector.binding]))
    }

    /// One D.3 failure case, encoded in wire format as its presentation form implies.
    struct Failure: Sendable, CustomTestStringConvertible {
        var presentation: String
        var params: String
        var code: SVCBError.Code
        var key: SVCBParamKey?
        var testDescription: String { presentation }
    }

    static let failures: [Failure] = [
        Failure(
            presentation: "key123=abc key123=def (multiple instances of the same SvcParamKey)",
            params: "007b 0003 616263 007b 0003 646566", code: .keysNotIncreasing, key: SVCBParamKey(123)),
        Failure(presentation: "mandatory (missing value)", params: "0000 0000", code: .invalidValue, key: .mandatory),
        Failure(presentation: "alpn (missing value)", params: "0001 0000", code: .invalidValue, key: .alpn),
        Failure(presentation: "port (missing value)", params: "0003 0000", code: .invalidValue, key: .port),
        Failure(presentation: "ipv4hint (missing value)", params: "0004 0000", code: .invalidValue, key: .ipv4hint),
        Failure(presentation: "ipv6hint (missing value)", params: "0006 0000", code: .invalidValue, key: .ipv6hint),
        Failure(
            presentation: "no-default-alpn=abc (value MUST be empty)", params: "0002 0003 616263",
            code: .invalidValue, key: .noDefaultAlpn),
        Failure(
            presentation: "mandatory=mandatory (MUST NOT be in its own list)", params: "0000 0002 0000",
            code: .invalidValue, key: .mandatory),
        Failure(
            presentation: "mandatory=key123,key123 key123=abc (duplicate key in the mandatory list)",
            params: "0000 0004 007b007b 007b 0003 616263", code: .invalidValue, key: .mandatory),
    ]

    @Test("D.3 failure cases are malformed and reject the RRset", arguments: failures)
    func failureCase(_ failure: Failure) {
        let rdata = wireBytes("0001" + Self.fooExampleCom + failure.params)
        #expect {
            try SVCBRecord.parse(rdata: rdata)
        } throws: { error in
            guard let error = error as? SVCBError else { return false }
            return error.code == failure.code && error.key == failure.key
        }
        let good = wireBytes("0001 00")
        guard case .malformed = HTTPSProcessing.process(rdatas: [good, rdata], ownerName: "example.com") else {
            Issue.record("a malformed record must reject the whole RRset")
            return
        }
    }

    @Test("D.3 mandatory=key123 without key123: well-formed, but not self-consistent, so the record is ignored")
    func mandatoryKeyMissing() throws {
        let rdata = wireBytes("0001" + Self.fooExampleCom + "0000 0002 007b")
        let record = try SVCBRecord.parse(rdata: rdata)
        #expect(record.params.mandatory == [SVCBParamKey(123)])
        #expect(!HTTPSProcessing.isCompatible(record))
        // RFC 9460 §2.4.3 rejects the RR; the other record of the set stays usable.
        #expect(
            HTTPSProcessing.process(rdatas: [rdata, wireBytes("0002 00")], ownerName: "example.com")
                == .bindings([ServiceBinding(priority: 2, target: "example.com.")]))
    }
}
