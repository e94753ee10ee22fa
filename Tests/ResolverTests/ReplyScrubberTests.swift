import DNSCore
import Testing

@testable import Resolver

/// The bailiwick rules, case by case: what an upstream reply may add that is not kept.
@Suite("Reply scrubbing (bailiwick)")
struct ReplyScrubberTests {
    static func soa(_ zone: String, ttl: UInt32 = 300, minimum: UInt32 = 60) -> ResourceRecord {
        let names = ((try? DNSName("ns.\(zone)").wire) ?? [0]) + ((try? DNSName("host.\(zone)").wire) ?? [0])
        let numbers: [UInt32] = [1, 3600, 600, 86400, minimum]
        let rdata = names + numbers.flatMap { [UInt8($0 >> 24), UInt8($0 >> 16 & 0xff), UInt8($0 >> 8 & 0xff), UInt8($0 & 0xff)] }
        return ResourceRecord(name: zone, type: .soa, ttl: ttl, rdata: rdata)
    }

    static func rrsig(_ owner: String, covering type: RRType, signer: String) -> ResourceRecord {
        var rdata: [UInt8] = [UInt8(type.rawValue >> 8), UInt8(type.rawValue & 0xff), 13, 2]
        rdata += [0, 0, 1, 44] + [0x70, 0, 0, 0] + [0x60, 0, 0, 0] + [0x12, 0x34]
        rdata += (try? DNSName(signer).wire) ?? [0]
        rdata += Array(repeating: 0xAB, count: 64)
        return ResourceRecord(name: owner, type: ReplyScrubber.rrsig, ttl: 300, rdata: rdata)
    }

    static func record(_ name: String, _ type: RRType, _ rdata: [UInt8] = [0]) -> ResourceRecord {
        ResourceRecord(name: name, type: type, ttl: 300, rdata: rdata)
    }

    static func message(answer: [ResourceRecord], authority: [ResourceRecord] = [], additional: [ResourceRecord] = [], rcode: RCode = .noError)
        -> DNSMessage
    {
        let header = DNSHeader(
            id: 1, qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false,
            rcode: UInt8(rcode.rawValue), questionCount: 1, answerCount: UInt16(answer.count),
            authorityCount: UInt16(authority.count), additionalCount: UInt16(additional.count))
        return DNSMessage(
            header: header, rcode: rcode, questions: [], answer: answer, authority: authority, additional: additional)
    }

    static func scrub(_ name: String, _ type: RRType, _ message: DNSMessage) -> ReplyScrubber.Scrubbed {
        ReplyScrubber.scrub(message, question: DNSQuestion(name: name, type: type), maximumHops: 8)
    }

    @Test func anAddressOfAnotherNameBesideTheAnswerIsDropped() {
        let answer = aRecord("www.example.", [192, 0, 2, 1])
        let planted = aRecord("victim.example.", [6, 6, 6, 6])
        let scrubbed = Self.scrub("www.example.", .a, Self.message(answer: [answer, planted]))
        #expect(scrubbed.answer == [answer])
        #expect(scrubbed.hasData)
        #expect(scrubbed.dropped == 1)
    }

    @Test func anotherTypeAtTheNameIsDropped() {
        let answer = aRecord("www.example.", [192, 0, 2, 1])
        let extra = Self.record("www.example.", .txt, [3, 0x61, 0x62, 0x63])
        #expect(Self.scrub("www.example.", .a, Self.message(answer: [answer, extra])).answer == [answer])
    }

    @Test func aChainIsKeptAndWhatHangsOffItIsNot() {
        let alias = cnameRecord("www.example.", "cdn.example.net.")
        let target = aRecord("cdn.example.net.", [192, 0, 2, 9])
        // Records of an unrelated name the chain never reaches, and a second CNAME of the same owner.
        let unrelated = aRecord("bank.example.", [6, 6, 6, 6])
        let second = cnameRecord("www.example.", "evil.example.")
        let evil = aRecord("evil.example.", [6, 6, 6, 7])
        let scrubbed = Self.scrub(
            "www.example.", .a, Self.message(answer: [alias, second, target, unrelated, evil]))
        #expect(scrubbed.answer == [alias, target])
        #expect(scrubbed.chain == ["www.example.", "cdn.example.net."])
        #expect(scrubbed.dropped == 3)
    }

    @Test func aChainThatLeavesTheReplyEndsWithoutData() {
        let alias = cnameRecord("www.example.", "elsewhere.example.net.")
        let stray = aRecord("cdn.example.net.", [192, 0, 2, 9])
        let scrubbed = Self.scrub("www.example.", .a, Self.message(answer: [alias, stray]))
        #expect(scrubbed.answer == [alias])
        #expect(!scrubbed.hasData)
    }

    @Test func aLoopStopsAtTheFirstRepeat() {
        let one = cnameRecord("a.example.", "b.example.")
        let two = cnameRecord("b.example.", "a.example.")
        let scrubbed = Self.scrub("a.example.", .a, Self.message(answer: [one, two]))
        #expect(scrubbed.answer == [one, two])
        #expect(scrubbed.chain == ["a.example.", "b.example."])
    }

    @Test func aDNAMEKeepsItsSynthesizedCNAMEOnlyWhenConsistent() throws {
        let dname = ResourceRecord(
            name: "example.", type: ReplyScrubber.dname, ttl: 300, rdata: try DNSName("example.net.").wire)
        let honest = cnameRecord("www.example.", "www.example.net.")
        let target = aRecord("www.example.net.", [192, 0, 2, 5])
        let kept = Self.scrub("www.example.", .a, Self.message(answer: [dname, honest, target]))
        #expect(kept.answer.contains(dname) && kept.answer.contains(honest) && kept.answer.contains(target))
        // A CNAME that contradicts the DNAME is replaced by the one the DNAME implies.
        let liar = cnameRecord("www.example.", "evil.example.")
        let rewritten = Self.scrub("www.example.", .a, Self.message(answer: [dname, liar, target]))
        #expect(!rewritten.answer.contains(liar))
        #expect(rewritten.chain == ["www.example.", "www.example.net."])
        #expect(rewritten.answer.contains(target))
        // The liar counts as dropped; the CNAME made in its place is no record of the reply and counts as nothing.
        #expect(rewritten.dropped == 1)
        // A DNAME alone (an upstream may leave the CNAME to the resolver) and one injected record: the CNAME made
        // from the DNAME is kept, and the injected record is still counted as dropped.
        let injected = aRecord("victim.example.org.", [6, 6, 6, 6])
        let alone = Self.scrub("www.example.", .a, Self.message(answer: [dname, target, injected]))
        #expect(alone.answer.count == 3 && !alone.answer.contains(injected))
        #expect(alone.dropped == 1)
    }

    @Test func theSOAOfAnotherZoneIsDroppedAndSetsNoNegativeTTL() {
        let foreign = Self.soa("attacker.example.", ttl: 172_800, minimum: 172_800)
        let scrubbed = Self.scrub("missing.example.org.", .a, Self.message(answer: [], authority: [foreign], rcode: .nxDomain))
        #expect(scrubbed.authority.isEmpty)
        #expect(DNSResolver.negativeTTL(scrubbed.authority) == nil)
        let own = Self.soa("example.org.", ttl: 300, minimum: 60)
        let kept = Self.scrub("missing.example.org.", .a, Self.message(answer: [], authority: [foreign, own]))
        #expect(kept.authority == [own])
        #expect(DNSResolver.negativeTTL(kept.authority) == 60)
    }

    @Test func theSOAMustBeAtTheChainsEndOrAbove() {
        // NODATA after a CNAME: the SOA belongs to the target's zone, not the question's.
        let alias = cnameRecord("www.example.", "host.example.net.")
        let targetZone = Self.soa("example.net.")
        let questionZone = Self.soa("example.")
        let scrubbed = Self.scrub(
            "www.example.", .aaaa, Self.message(answer: [alias], authority: [questionZone, targetZone]))
        #expect(scrubbed.authority == [targetZone])
        // A child zone's SOA is below the name: not its zone.
        let child = Self.soa("sub.missing.example.org.")
        #expect(Self.scrub("missing.example.org.", .a, Self.message(answer: [], authority: [child])).authority.isEmpty)
    }

    @Test func additionalDataIsNeverKept() {
        let answer = Self.record("example.", .ns, (try? DNSName("ns1.example.").wire) ?? [0])
        let glue = aRecord("ns1.example.", [192, 0, 2, 53])
        let planted = aRecord("www.bank.example.", [6, 6, 6, 6])
        let scrubbed = Self.scrub("example.", .ns, Self.message(answer: [answer], additional: [glue, planted]))
        #expect(scrubbed.answer == [answer])
        #expect(scrubbed.authority.isEmpty)
        #expect(scrubbed.dropped == 2)
    }

    @Test func signaturesAreKeptOnlyOverKeptRRsets() {
        let answer = aRecord("www.example.", [192, 0, 2, 1])
        let signature = Self.rrsig("www.example.", covering: .a, signer: "example.")
        let otherType = Self.rrsig("www.example.", covering: .txt, signer: "example.")
        let otherName = Self.rrsig("victim.example.", covering: .a, signer: "example.")
        let scrubbed = Self.scrub("www.example.", .a, Self.message(answer: [answer, signature, otherType, otherName]))
        #expect(scrubbed.answer == [answer, signature])
    }

    @Test func denialProofsAreKeptInsideTheZoneOnly() {
        let soa = Self.soa("example.")
        let soaSignature = Self.rrsig("example.", covering: .soa, signer: "example.")
        let proof = Self.record("a.example.", ReplyScrubber.nsec, [0])
        let proofSignature = Self.rrsig("a.example.", covering: ReplyScrubber.nsec, signer: "example.")
        let foreignProof = Self.record("a.other.", ReplyScrubber.nsec, [0])
        let ns = Self.record("example.", .ns, (try? DNSName("ns1.example.").wire) ?? [0])
        let scrubbed = Self.scrub(
            "b.example.", .a,
            Self.message(answer: [], authority: [soa, soaSignature, proof, proofSignature, foreignProof, ns], rcode: .nxDomain))
        #expect(Set(scrubbed.authority) == [soa, soaSignature, proof, proofSignature])
        // A positive (wildcard) answer: proofs inside the signer's zone stay, with no SOA.
        let answer = aRecord("x.example.", [192, 0, 2, 1])
        let wildcardSignature = Self.rrsig("x.example.", covering: .a, signer: "example.")
        let positive = Self.scrub(
            "x.example.", .a, Self.message(answer: [answer, wildcardSignature], authority: [proof, proofSignature, foreignProof]))
        #expect(Set(positive.authority) == [proof, proofSignature])
    }

    @Test func otherClassesAreDropped() {
        let chaos = ResourceRecord(name: "www.example.", type: .a, class: .ch, ttl: 300, rdata: [1, 2, 3, 4])
        let answer = aRecord("www.example.", [192, 0, 2, 1])
        #expect(Self.scrub("www.example.", .a, Self.message(answer: [chaos, answer])).answer == [answer])
    }

    /// The shortcuts, for a plain answer (only the asked type at the asked name, no authority) and for a plain
    /// negative one (no answer, one SOA), keep what the rules keep: random replies built from a few names, types,
    /// classes, signatures and SOAs, both ways.
    @Test func theShortcutAgreesWithTheRules() {
        var generator = SystemRandomNumberGenerator()
        let names = ["www.example.", "alias.example.", "other.test."]
        let types: [RRType] = [.a, .aaaa, .cname, .https, ReplyScrubber.rrsig, .any]
        func pick<T>(_ items: [T]) -> T { items.randomElement(using: &generator)! }
        func randomRecord() -> ResourceRecord {
            let name = pick(names)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0: return Self.rrsig(name, covering: pick([.a, .cname]), signer: "example.")
            case 1: return Self.record(name, .cname, (try? DNSName(pick(names)).wire) ?? [0])
            case 2: return ResourceRecord(name: name, type: .a, class: .ch, ttl: 300, rdata: [1, 2, 3, 4])
            default: return Self.record(name, pick([.a, .a, .a, .aaaa]), [192, 0, 2, UInt8.random(in: 0...255, using: &generator)])
            }
        }
        var shortcuts = 0
        var negativeShortcuts = 0
        for _ in 0..<5_000 {
            let question = DNSQuestion(name: pick(names), type: pick(types))
            let plain = Bool.random(using: &generator)
            var answer = (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                plain ? Self.record(question.name, question.type == .any ? .a : question.type, [192, 0, 2, 7]) : randomRecord()
            }
            // An SOA of the name's zone or of another, in this class or CHAOS, sometimes signed.
            let soa = Self.soa(pick(["example.", "test.", "www.example.", "."]))
            let authority: [ResourceRecord] =
                switch Int.random(in: 0..<8, using: &generator) {
                case 0: [soa]
                case 1: [ResourceRecord(name: soa.name, type: .soa, class: .ch, ttl: 300, rdata: soa.rdata)]
                case 2: [soa, Self.rrsig(soa.name, covering: .soa, signer: soa.name)]
                default: []
                }
            if Bool.random(using: &generator), authority.count == 1 {
                answer = []  // a negative answer, often enough to take its shortcut
            }
            let additional = Int.random(in: 0...2, using: &generator)
            let fast = ReplyScrubber.scrub(
                answer: answer, authority: authority, additionalCount: additional, question: question, maximumHops: 8)
            let rules = ReplyScrubber.scrubByTheRules(
                answer: answer, authority: authority, additionalCount: additional, question: question, maximumHops: 8)
            #expect(fast == rules, "\(question) \(answer) \(authority)")
            if authority.isEmpty, !answer.isEmpty, answer.allSatisfy({ $0.type == question.type && $0.name == question.name }),
                question.type != .any, question.type != ReplyScrubber.rrsig
            {
                shortcuts += 1
            }
            if answer.isEmpty, authority.count == 1, authority[0].class == .in, fast.authority == authority {
                negativeShortcuts += 1
            }
        }
        #expect(shortcuts > 500, "the random replies must take the shortcut often")
        #expect(negativeShortcuts > 100, "and the negative one")
    }

    @Test(arguments: [
        ("example.", "www.example.", true), ("example.", "example.", true), (".", "www.example.", true),
        ("ample.", "www.example.", false), ("www.example.", "example.", false), ("example.", "www\\.example.", false),
        ("example.", "www\\\\.example.", true), ("exam\\.ple.", "www.exam\\.ple.", true),
        ("example.", "www.examplf.", false),
    ])
    func ancestorsAreWholeLabels(zone: String, name: String, expected: Bool) {
        #expect(ReplyScrubber.isAncestor(zone, of: name) == expected)
    }
}
