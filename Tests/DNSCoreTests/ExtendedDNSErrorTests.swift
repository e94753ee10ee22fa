import DNSCore
import Testing

/// Reading an upstream's Extended DNS Errors (RFC 8914) out of an OPT record's options.
@Suite("Extended DNS Errors")
struct ExtendedDNSErrorTests {
    static func option(_ code: UInt16, _ value: [UInt8]) -> [UInt8] {
        [UInt8(code >> 8), UInt8(code & 0xFF), UInt8(value.count >> 8), UInt8(value.count & 0xFF)] + value
    }

    static func scan(_ options: [UInt8]) -> [ExtendedDNSError] {
        options.withUnsafeBufferPointer { EDNSInfo(udpPayloadSize: 1232, version: 0, dnssecOK: false, options: $0) }
            .extendedErrors
    }

    @Test("EDE options are read in order among others; the text is optional")
    func readsInOrder() {
        let options =
            Self.option(12, [0, 0, 0, 0]) + Self.option(15, [0, 9] + Array("no DNSKEY for example.".utf8))
            + Self.option(10, Array(repeating: 7, count: 8)) + Self.option(15, [0, 23])
        #expect(
            Self.scan(options) == [
                ExtendedDNSError(code: 9, text: "no DNSKEY for example."), ExtendedDNSError(code: 23, text: ""),
            ])
        #expect(Self.scan([]) == [])
        #expect(Self.scan(Self.option(12, [0, 0])) == [])
    }

    @Test("The first PADDING option's length is read in the same walk; none gives nil")
    func padding() {
        func scan(_ options: [UInt8]) -> (errors: [ExtendedDNSError], padding: Int?) {
            let edns = options.withUnsafeBufferPointer {
                EDNSInfo(udpPayloadSize: 1232, version: 0, dnssecOK: false, options: $0)
            }
            return (edns.extendedErrors, edns.padding)
        }
        let bogus = Self.option(15, [0, 6] + Array("bogus".utf8))
        let read = scan(Self.option(12, Array(repeating: 0, count: 377)) + bogus + Self.option(12, [0]))
        #expect(read.padding == 377 && read.errors == [ExtendedDNSError(code: 6, text: "bogus")])
        #expect(scan(Self.option(12, [])).padding == 0)
        #expect(scan(bogus).padding == nil)
        // Cut short before its data ends: not read, like an EDE there.
        #expect(scan(bogus + [0, 12, 0, 40, 0]).padding == nil)
    }

    @Test("A cut-short option ends the scan and keeps what came before it; an EDE without its code is skipped")
    func malformedOptions() {
        let good = Self.option(15, [0, 6] + Array("bogus".utf8))
        #expect(Self.scan(good + [0, 15, 0, 40, 0, 6]) == [ExtendedDNSError(code: 6, text: "bogus")])
        #expect(Self.scan(good + [0, 15]) == [ExtendedDNSError(code: 6, text: "bogus")])
        #expect(Self.scan(Self.option(15, [0]) + good) == [ExtendedDNSError(code: 6, text: "bogus")])
    }

    @Test("The text never carries raw control characters, invalid UTF-8 or a trailing NUL")
    func textIsMadeSafe() {
        let text: [UInt8] = Array("line\none".utf8) + [0x1B] + Array("[31m".utf8) + [0xFF] + Array("é".utf8) + [0, 0]
        let read = Self.scan(Self.option(15, [0, 0] + text))
        #expect(read == [ExtendedDNSError(code: 0, text: "line\\010one\\027[31m\u{FFFD}é")])
        #expect(Self.scan(Self.option(15, [0, 3, 0])) == [ExtendedDNSError(code: 3, text: "")])
        // A text past the bound is cut to end in "…" within it, and says so.
        let long = Self.scan(Self.option(15, [0, 6] + Array(repeating: UInt8(ascii: "x"), count: 3000)))
        #expect(long == [ExtendedDNSError(code: 6, text: String(repeating: "x", count: 509) + "…")])
        #expect(long.first?.text.utf8.count == ExtendedDNSError.maximumTextBytes)
        let exact = Self.scan(Self.option(15, [0, 6] + Array(repeating: UInt8(ascii: "y"), count: 512)))
        #expect(exact == [ExtendedDNSError(code: 6, text: String(repeating: "y", count: 512))])
    }

    @Test("A long text is cut before a character, never inside one")
    func cutBeforeACharacter() {
        // 507 bytes, then a 4-byte character over the cut at 509, then more: the character goes whole.
        let emoji = Array(repeating: UInt8(ascii: "x"), count: 507) + Array("😀 and more".utf8)
        #expect(Self.scan(Self.option(15, [0, 6] + emoji)) == [
            ExtendedDNSError(code: 6, text: String(repeating: "x", count: 507) + "…"),
        ])
        // A 2-byte character ending exactly at the cut is kept.
        let accent = Array(repeating: UInt8(ascii: "x"), count: 507) + Array("ézzzzzzzzz".utf8)
        #expect(Self.scan(Self.option(15, [0, 6] + accent)) == [
            ExtendedDNSError(code: 6, text: String(repeating: "x", count: 507) + "é…"),
        ])
        // Bytes that are not UTF-8 at all are cut where they fall, replaced, and never trap.
        let junk = Self.scan(Self.option(15, [0, 6] + Array(repeating: 0x80, count: 600)))
        #expect(junk.first?.text.hasSuffix("\u{FFFD}…") == true)
        #expect(junk.first.map { !$0.text.unicodeScalars.contains { $0.value < 0x20 } } == true)
    }

    @Test("Codes print as dig prints them, with the registry's name when it has one")
    func description() {
        let bogus = ExtendedDNSError(code: 6, text: "x.example: RRSIG bad")
        #expect("\(bogus)" == "6 (DNSSEC Bogus): x.example: RRSIG bad")
        #expect("\(ExtendedDNSError(code: 22, text: ""))" == "22 (No Reachable Authority)")
        #expect(ExtendedDNSError(code: 30, text: "").name == "Invalid Query Type")
        #expect("\(ExtendedDNSError(code: 600, text: "new"))" == "600: new")
    }
}
