import DNSCore
import Testing

@testable import Resolver

/// A negative answer's authority (its SOA) kept once per zone and found again by its records
/// (``DNSResolver/negativeAuthority(_:dnssecOK:validation:)``), and the record equality and hash it is found by.
@Suite("Negative answers' shared payload")
struct NegativePayloadTests {
    static let soaA = ReplyScrubberTests.soa("a.example.")
    static let soaB = ReplyScrubberTests.soa("b.example.")

    @Test func aZoneSOAIsStoredOnceAndEachAnswerHasItsOwnVerdictAndMemo() throws {
        let resolver = DNSResolver(transport: ScriptedTransport([:]), clock: ManualClock())
        let verdict = DNSSECValidation.insecure("allow-downgrade: upstream u is unknown")
        let first = try #require(resolver.negativeAuthority([Self.soaA], dnssecOK: false, validation: verdict))
        let second = try #require(resolver.negativeAuthority([Self.soaA], dnssecOK: false))
        #expect(first.wire === second.wire, "the same SOA, the same storage")
        #expect(first.memo !== second.memo, "hits derived per entry stay per entry")
        #expect(first.validation == verdict)
        #expect(second.validation == nil, "the verdict of one answer is not the shared storage's")
        #expect(first.authority == [Self.soaA] && first.records.isEmpty)

        // Another zone in between (the last one found changes), then the first again: found by its records.
        let other = try #require(resolver.negativeAuthority([Self.soaB], dnssecOK: false))
        #expect(other.wire !== first.wire)
        let again = try #require(resolver.negativeAuthority([Self.soaA], dnssecOK: false))
        #expect(again.wire === first.wire)
        // The same records asked with DO are another payload (they may carry proofs).
        let withDO = try #require(resolver.negativeAuthority([Self.soaA], dnssecOK: true))
        #expect(withDO.wire !== first.wire && withDO.dnssecOK)
    }

    @Test func whatANegativeAnswerDoesNotKeepIsLeftOut() throws {
        let resolver = DNSResolver(transport: ScriptedTransport([:]), clock: ManualClock())
        let ns = ResourceRecord(name: "a.example.", type: .ns, ttl: 300, rdata: try DNSName("ns.a.example.").wire)
        let kept = try #require(resolver.negativeAuthority([ns, Self.soaA], dnssecOK: false))
        #expect(kept.authority == [Self.soaA])
        #expect(kept.wire === resolver.negativeAuthority([Self.soaA], dnssecOK: false)?.wire)
        #expect(resolver.negativeAuthority([ns], dnssecOK: false) == nil)
    }

    @Test func recordsAreEqualExactlyWhenEveryFieldIsAndEqualOnesHashAlike() {
        let base = Self.soaA
        var otherByte = base
        otherByte.rdata[otherByte.rdata.count - 1] ^= 1
        var otherTTL = base
        otherTTL.ttl += 1
        var otherName = base
        otherName.name = "b.example."
        var otherType = base
        otherType.type = .ns
        for changed in [otherByte, otherTTL, otherName, otherType] { #expect(changed != base) }
        // Equal records from separate storage: equal, and the same hash.
        let copy = ResourceRecord(name: "A.Example", type: .soa, ttl: base.ttl, rdata: base.rdata.map { $0 })
        #expect(copy == base)
        #expect(copy.hashValue == base.hashValue)
        #expect(Set([base, copy, otherByte, otherTTL, otherName, otherType]).count == 5)
    }
}
