import DNSCore
import Testing

@testable import Resolver

@Suite("NSEC denial logic")
struct NSECDenialTests {
    static func l(_ name: String) -> NSECDenial.Labels { NSECDenial.labels(name)! }

    @Test func canonicalOrderIsRFC4034Section6Point1() {
        // The example list of RFC 4034 §6.1, in order.
        let ordered = [
            "example.", "a.example.", "yljkjljk.a.example.", "Z.a.example.", "zABC.a.EXAMPLE.", "z.example.",
            "\\001.z.example.", "*.z.example.", "\\200.z.example.",
        ].map { (try! DNSName($0)).labels }
        for (a, b) in zip(ordered, ordered.dropFirst()) { #expect(NSECDenial.compare(a, b) < 0) }
    }

    @Test func nxdomainNeedsTheWildcardAtTheClosestEncloser() {
        let covering = DNSSECRecords.nsec("a.example.", next: "m.example.", types: [1, 46, 47])
        let wildcard = DNSSECRecords.nsec("example.", next: "a.example.", types: [2, 6, 46, 47, 48])
        // b.c.example.: the closest encloser is example., so *.example. must be covered (the apex NSEC does it).
        #expect(NSECDenial.proves(name: "b.c.example.", type: .a, nameExists: false, records: [covering, wildcard]))
        #expect(!NSECDenial.proves(name: "b.c.example.", type: .a, nameExists: false, records: [covering]))
        // A name that exists is not NXDOMAIN.
        #expect(!NSECDenial.proves(name: "a.example.", type: .a, nameExists: false, records: [covering, wildcard]))
    }

    @Test func nodataAtTheNameAtAnEmptyNonTerminalAndAtAWildcard() {
        let atName = DNSSECRecords.nsec("www.example.", next: "x.example.", types: [1, 46, 47])
        #expect(NSECDenial.proves(name: "www.example.", type: .aaaa, nameExists: true, records: [atName]))
        #expect(!NSECDenial.proves(name: "www.example.", type: .a, nameExists: true, records: [atName]))
        // wild.example. has only children: the NSEC before it points below it.
        let ent = DNSSECRecords.nsec("tampered.example.", next: "*.wild.example.", types: [1, 46, 47])
        #expect(NSECDenial.proves(name: "wild.example.", type: .a, nameExists: true, records: [ent]))
        // x.wild.example. AAAA from *.wild.example., which has only A.
        let cover = DNSSECRecords.nsec("*.wild.example.", next: "z.wild.example.", types: [1, 46, 47])
        #expect(NSECDenial.proves(name: "x.wild.example.", type: .aaaa, nameExists: true, records: [cover]))
        #expect(!NSECDenial.proves(name: "x.wild.example.", type: .a, nameExists: true, records: [cover]))
    }
}
