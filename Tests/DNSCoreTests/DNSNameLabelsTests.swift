import DNSCore
import Testing

/// The one parser, wire reader and canonical text: case kept for DNS-SD, lowercased by DNSName.
@Suite struct DNSNameLabelsTests {
    @Test func strictSyntaxRefusesWhatMustBeEscapedAndLiberalKeepsIt() throws {
        #expect(throws: InvalidNameError.self) { try DNSName.parseLabels("My Printer.local", syntax: .strict) }
        #expect(throws: InvalidNameError.self) { try DNSName("café.example") }
        let labels = try DNSName.parseLabels("My Printer.café.local", syntax: .liberal)
        #expect(labels == [Array("My Printer".utf8), Array("café".utf8), Array("local".utf8)])
        // Escapes mean the same in both.
        #expect(try DNSName.parseLabels(#"My\032Printer.local"#, syntax: .strict) == [Array("My Printer".utf8), Array("local".utf8)])
        #expect(try DNSName.parseLabels(".") == [])
        for bad in ["", "a..b", ".a", #"a\"#, #"a\25"#, #"a\256"#, String(repeating: "x", count: 64)] {
            #expect(throws: InvalidNameError.self) { try DNSName.parseLabels(bad, syntax: .liberal) }
        }
    }

    @Test func wireLabelsKeepTheirCaseAndDNSNameLowercasesThem() throws {
        let labels = [Array("Kitchen".utf8), Array("_ipp".utf8), Array("local".utf8)]
        let wire = DNSName.wire(labels)
        #expect(try DNSName.labels(wire: wire) == labels)
        #expect(try DNSName(wire: wire).text == "kitchen._ipp.local.")
        #expect(DNSName.canonicalText(labels) == "kitchen._ipp.local.")
        let (read, next) = try DNSName.readLabels([0xFF] + wire + [0xEE], at: 1)
        #expect(read == labels && next == wire.count + 1)
        #expect(throws: DNSWireError.self) { try DNSName.labels(wire: wire + [0]) }
        #expect(throws: DNSWireError.self) { try DNSName.readLabels([0xC0, 0x0C], at: 0) }
        #expect(throws: DNSWireError.self) { try DNSName.readLabels([5, 0x61], at: 0) }
    }
}
