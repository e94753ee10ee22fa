import Testing

@testable import DNSSDModel

@Suite("TXTRecord codec")
struct TXTRecordTests {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("key=value strings decode to a dictionary")
    func decodesPairs() {
        let txt = TXTRecord(strings: [bytes("a=1"), bytes("path=/x=y"), bytes("empty=")])
        #expect(txt.dictionary == ["a": "1", "path": "/x=y", "empty": ""])
        #expect(!txt.hasNonUTF8Content)
    }

    @Test("a key without '=' is a boolean attribute")
    func booleanKey() {
        let txt = TXTRecord(strings: [bytes("flag"), bytes("v=1")])
        #expect(txt.attributes.map(\.key) == ["flag", "v"])
        #expect(txt.attributes[0].value == .present)
        #expect(txt.attributes[1].value == .bytes(bytes("1")))
        #expect(txt.dictionary == ["flag": nil, "v": "1"], "a boolean attribute is nil, distinct from key=")
        #expect(txt.dictionary.keys.contains("flag"))
        #expect(!txt.dictionaryIsLossy)
    }

    @Test("a nil value encodes as a boolean key without '=', an empty one as key=")
    func encodesBooleanKey() throws {
        let txt = try TXTRecord(validating: ["flag": nil, "empty": "", "k": "v"])
        #expect(txt.strings == [bytes("empty="), bytes("flag"), bytes("k=v")])
        #expect(txt.dictionary == ["flag": nil, "empty": "", "k": "v"])
    }

    @Test("raw strings repeating a key are refused for publishing, case-insensitively")
    func refusesRepeatedRawKeys() {
        #expect(throws: DNSSDError.self) { try TXTRecord(validating: [bytes("a=1"), bytes("A=2")]) }
        #expect(throws: DNSSDError.self) { try TXTRecord(validating: [bytes("flag"), bytes("flag=")]) }
        #expect((try? TXTRecord(validating: [bytes("flag"), bytes("flagged=1")])) != nil)
    }

    @Test("duplicate keys: the first wins, compared case-insensitively (RFC 6763 §6.4)")
    func duplicateKeys() {
        let txt = TXTRecord(strings: [bytes("Key=first"), bytes("key=second"), bytes("KEY"), bytes("other=x")])
        #expect(txt.dictionary == ["Key": "first", "other": "x"])
        #expect(txt.attributes.count == 2)
        #expect(txt.dictionaryIsLossy, "the raw strings must be kept: txtRaw keeps all")
    }

    @Test("strings without a key are ignored")
    func missingKey() {
        let txt = TXTRecord(strings: [bytes("=value"), [], bytes("a=b")])
        #expect(txt.dictionary == ["a": "b"])
        #expect(txt.dictionaryIsLossy)
    }

    @Test("non-UTF-8 values are left out of the dictionary and flagged")
    func nonUTF8() {
        let txt = TXTRecord(strings: [bytes("bin=") + [0xFF, 0x00, 0xC3], bytes("ok=yes")])
        #expect(txt.dictionary == ["ok": "yes"])
        #expect(txt.hasNonUTF8Content)
        #expect(txt.attributes.first?.value == .bytes([0xFF, 0x00, 0xC3]))
    }

    @Test("wire format round trip")
    func wireRoundTrip() throws {
        let txt = try TXTRecord(validating: ["a": "1", "bb": "two"])
        #expect(txt.wireFormat == [3] + bytes("a=1") + [6] + bytes("bb=two"))
        #expect(TXTRecord(wireFormat: txt.wireFormat) == txt)
    }

    @Test("an empty record is one empty string on the wire, and decodes to nothing")
    func emptyWire() {
        #expect(TXTRecord().wireFormat == [0])
        #expect(TXTRecord(wireFormat: [0]).strings.isEmpty)
        #expect(TXTRecord(wireFormat: []).strings.isEmpty)
    }

    @Test("truncated wire data does not trap")
    func truncatedWire() {
        let txt = TXTRecord(wireFormat: [5] + bytes("ab"))
        #expect(txt.strings == [bytes("ab")])
    }

    @Test("encoding from a dictionary is sorted and writes empty values as key=")
    func encodingOrder() throws {
        let txt = try TXTRecord(validating: ["z": "", "a": "x"])
        #expect(txt.strings == [bytes("a=x"), bytes("z=")])
    }

    @Test(
        "invalid keys are rejected",
        arguments: ["", "a=b", "caf\u{E9}", "tab\tkey", "del\u{7F}"]
    )
    func invalidKeys(key: String) {
        #expect(throws: DNSSDError.self) { try TXTRecord(validating: [key: "v"]) }
        do {
            _ = try TXTRecord(validating: [key: "v"])
        } catch {
            #expect(error.code == .invalidParameter)
        }
    }

    @Test("keys differing only in case are rejected when encoding")
    func caseDuplicate() {
        #expect(throws: DNSSDError.self) { try TXTRecord(validating: ["Key": "1", "key": "2"]) }
    }

    @Test("printable ASCII keys with spaces and symbols are accepted")
    func printableKeys() throws {
        let txt = try TXTRecord(validating: ["a key~!": "v"])
        #expect(txt.dictionary == ["a key~!": "v"])
    }

    @Test("a string over 255 bytes is rejected")
    func longString() {
        #expect(throws: DNSSDError.self) {
            try TXTRecord(validating: ["k": String(repeating: "x", count: 254)])
        }
        #expect(throws: Never.self) {
            try TXTRecord(validating: ["k": String(repeating: "x", count: 253)])
        }
    }

    @Test("a record over 8900 bytes is rejected")
    func longRecord() {
        var big: [String: String] = [:]
        for index in 0..<40 { big["key\(index)"] = String(repeating: "v", count: 240) }
        #expect(throws: DNSSDError.self) { try TXTRecord(validating: big) }
        var fits: [String: String] = [:]
        for index in 0..<30 { fits["key\(index)"] = String(repeating: "v", count: 240) }
        #expect(throws: Never.self) { try TXTRecord(validating: fits) }
    }

    @Test("raw strings: any value bytes, but keys are checked and empty strings refused")
    func rawValidation() throws {
        let raw = try TXTRecord(validating: [bytes("bin=") + [0, 0xFF], bytes("flag")])
        #expect(raw.strings.count == 2)
        #expect(throws: DNSSDError.self) { try TXTRecord(validating: [[]]) }
        #expect(throws: DNSSDError.self) { try TXTRecord(validating: [[0xFF, UInt8(ascii: "=")]]) }
    }
}
