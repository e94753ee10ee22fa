import DNSCore
import Testing

@testable import Resolver

@Suite("SVCB: SvcParams wire rules (RFC 9460 §2.2, §7, §8)")
struct SVCBParamsTests {
    static let target = "03666f6f 076578616d706c65 03636f6d 00"
    /// SvcPriority 1 and TargetName foo.example.com.
    static let service = "0001" + target

    struct Case: Sendable, CustomTestStringConvertible {
        var label: String
        var hex: String
        var code: SVCBError.Code
        var key: SVCBParamKey?
        var testDescription: String { label }
    }

    static let malformed: [Case] = [
        Case(label: "empty RDATA", hex: "", code: .truncated),
        Case(label: "one byte of priority", hex: "00", code: .truncated),
        Case(label: "no TargetName", hex: "0001", code: .truncated),
        Case(label: "TargetName cut in a label", hex: "0001 03666f", code: .truncated),
        Case(label: "TargetName compressed (§2.2: uncompressed)", hex: "0001 03666f6f c00c", code: .invalidTargetName),
        Case(label: "TargetName extended label type", hex: "0001 41 00", code: .invalidTargetName),
        Case(label: "keys decreasing (alpn after port)", hex: service + "0003 0002 01bb 0001 0003 026833",
             code: .keysNotIncreasing, key: .alpn),
        Case(label: "repeated known key", hex: service + "0003 0002 01bb 0003 0002 01bc",
             code: .keysNotIncreasing, key: .port),
        Case(label: "RDATA ends inside key", hex: service + "00", code: .paramOverrun),
        Case(label: "RDATA ends inside length", hex: service + "0001 00", code: .paramOverrun),
        Case(label: "value overruns RDATA", hex: service + "0001 0004 026833", code: .paramOverrun, key: .alpn),
        Case(label: "trailing bytes after last param", hex: service + "0003 0002 01bb 00", code: .paramOverrun),
        Case(label: "alpn with empty id", hex: service + "0001 0003 00 0168", code: .invalidValue, key: .alpn),
        Case(label: "alpn id overruns the value", hex: service + "0001 0003 056833", code: .invalidValue, key: .alpn),
        Case(label: "port of 3 bytes", hex: service + "0003 0003 01bb00", code: .invalidValue, key: .port),
        Case(label: "port of 1 byte", hex: service + "0003 0001 01", code: .invalidValue, key: .port),
        Case(label: "ipv4hint of 5 bytes", hex: service + "0004 0005 c000020101", code: .invalidValue,
             key: .ipv4hint),
        Case(label: "ipv6hint of 15 bytes", hex: service + "0006 000f 20010db8000000000000000000000000",
             code: .invalidValue, key: .ipv6hint),
        Case(label: "mandatory of odd length", hex: service + "0000 0003 000100", code: .invalidValue,
             key: .mandatory),
        Case(label: "mandatory not sorted", hex: service + "0000 0004 00030001 0001 0003 026832 0003 0002 01bb",
             code: .invalidValue, key: .mandatory),
        Case(label: "dohpath not UTF-8", hex: service + "0007 0002 c328", code: .invalidValue, key: .dohpath),
    ]

    @Test("Malformed ServiceMode RDATA throws the matching error", arguments: malformed)
    func malformedRecord(_ item: Case) {
        #expect {
            try SVCBRecord.parse(rdata: wireBytes(item.hex))
        } throws: { error in
            guard let error = error as? SVCBError else { return false }
            return error.code == item.code && error.key == item.key
        }
    }

    @Test("Every known key is decoded")
    func allKeys() throws {
        let rdata = wireBytes(
            "0001" + Self.target
                + "0000 0002 0003"  // mandatory=port
                + "0001 0006 026832 026833"  // alpn=h2,h3
                + "0002 0000"  // no-default-alpn
                + "0003 0002 20fb"  // port=8443
                + "0004 0008 c0000201 c0000202"  // ipv4hint
                + "0005 0003 010203"  // ech
                + "0006 0010 20010db8000000000000000000000001"  // ipv6hint
                + "0007 0010 2f646e732d71756572797b3f646e737d"  // dohpath=/dns-query{?dns}
                + "fde8 0000"  // key65000 with an empty value
        )
        let record = try SVCBRecord.parse(rdata: rdata)
        let params = record.params
        #expect(params.keys.map(\.rawValue) == [0, 1, 2, 3, 4, 5, 6, 7, 65000])
        #expect(params.mandatory == [.port])
        #expect(params.alpn == ["h2", "h3"])
        #expect(params.noDefaultAlpn)
        #expect(params.port == 8443)
        #expect(params.ipv4hint == ["192.0.2.1", "192.0.2.2"])
        #expect(params.ech == [1, 2, 3])
        #expect(params.ipv6hint == ["2001:db8::1"])
        #expect(params.dohpath == "/dns-query{?dns}")
        #expect(params.unknown == [SVCBUnknownParam(key: SVCBParamKey(65000), value: [])])

        let binding = ServiceBinding(record: record, ownerName: "example.com.")
        #expect(
            binding
                == ServiceBinding(
                    priority: 1, target: "foo.example.com.", port: 8443, alpn: ["h2", "h3"], noDefaultAlpn: true,
                    ipv4hint: ["192.0.2.1", "192.0.2.2"], ipv6hint: ["2001:db8::1"], ech: "AQID", mandatory: ["port"],
                    dohpath: "/dns-query{?dns}", unknown: [.init(key: 65000, value: "")]))
    }

    @Test("AliasMode ignores whatever follows TargetName (RFC 9460 §2.4.2)")
    func aliasIgnoresParams() throws {
        // Garbage, unsorted, overrunning: all ignored in AliasMode.
        let record = try SVCBRecord.parse(rdata: wireBytes("0000" + Self.target + "0003 0009 01 0001"))
        #expect(record.isAliasMode)
        #expect(record.params.keys.isEmpty)
    }

    @Test("Key names follow the registry, unknown keys print as keyNNNNN")
    func keyNames() {
        let names = (0...8).map { SVCBParamKey(UInt16($0)).description }
        #expect(names == ["mandatory", "alpn", "no-default-alpn", "port", "ipv4hint", "ech", "ipv6hint", "dohpath",
            "key8"])
        #expect(SVCBParamKey(667).description == "key667")
    }

    @Test("Non-UTF-8 ALPN ids are shown with \\DDD escapes")
    func alpnEscapes() throws {
        let params = try SVCBParams.parse(wireBytes("0001 0004 03 68ff33"))
        #expect(params.alpn == ["h\\2553"])
        #expect(params.alpnIDs == [[0x68, 0xFF, 0x33]])
    }

    @Test("The record accessor only decodes HTTPS and SVCB records")
    func recordAccessor() throws {
        let https = ResourceRecord(name: "example.com", type: .https, ttl: 1, rdata: wireBytes("0001 00"))
        #expect(try https.svcb().priority == 1)
        let a = ResourceRecord(name: "example.com", type: .a, ttl: 1, rdata: wireBytes("0001 00"))
        #expect(throws: SVCBError.self) { try a.svcb() }
    }
}
