import DNSSDModel
import DiscoverAPI
import Foundation
import Testing

@Suite("TXT as text and JSON")
struct TXTTextTests {
    @Test("CLI arguments: key=value, key= and a boolean key; duplicates refused case-insensitively")
    func parsesArguments() throws {
        let parsed = try TXTText.attributes(["flag", "k=v", "e=", "x=a=b"])
        #expect(parsed == ["flag": nil, "k": "v", "e": "", "x": "a=b"])
        #expect(parsed.keys.contains("flag"))
        #expect(throws: TXTText.InvalidArgument.self) { try TXTText.attributes(["k=1", "K=2"]) }
        #expect(throws: TXTText.InvalidArgument.self) { try TXTText.attributes(["flag", "flag=1"]) }
        #expect(throws: TXTText.InvalidArgument.self) { try TXTText.attributes(["=v"]) }
    }

    @Test("text output: boolean keys bare, raw strings in wire order with non-UTF-8 bytes escaped")
    func displays() {
        let plain = DNSSDService(name: "n", type: "_t._tcp", domain: "local", txt: ["k": "v", "flag": nil, "e": ""])
        #expect(TXTText.display(plain) == ["e=", "flag", "k=v"])
        let raw = [Array("bin=".utf8) + [0xFF, 0x00, 0x5C] + Array("é".utf8), Array("k=1".utf8), Array("k=2".utf8)]
        let service = DNSSDService(
            name: "n", type: "_t._tcp", domain: "local", txt: ["k": "1"],
            txtRaw: raw)
        #expect(TXTText.display(service) == [#"bin=\xff\x00\\é"#, "k=1", "k=2"])
    }

    @Test("a boolean attribute is JSON null, both through JSONWriter and JSONEncoder, and decodes back")
    func jsonNull() throws {
        let service = DNSSDService(name: "n", type: "_t._tcp", domain: "local", txt: ["flag": nil, "k": "v"])
        var writer = JSONWriter()
        service.write(to: &writer)
        let written = try JSONSerialization.jsonObject(with: Data(writer.bytes)) as? [String: Any]
        let txt = try #require(written?["txt"] as? [String: Any])
        #expect(txt["flag"] is NSNull)
        #expect(txt["k"] as? String == "v")
        #expect(try JSONDecoder().decode(DNSSDService.self, from: Data(writer.bytes)) == service)
        let encoded = try JSONEncoder().encode(AdvertiseParameters(type: "_t._tcp", port: 1, txt: ["flag": nil]))
        #expect(String(decoding: encoded, as: UTF8.self).contains(#""flag":null"#))
        let decoded = try JSONDecoder().decode(AdvertiseParameters.self, from: encoded)
        #expect(decoded.txt == ["flag": nil])
    }
}
