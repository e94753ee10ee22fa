import CLDNS
import DNSCore
import Foundation
import Synchronization
import Testing

@testable import Resolver

/// The chain of trust with real signatures (libldns keys made in the test): a signed zone `example.` (the anchor,
/// ECDSA P-256), a signed child `sub.example.` (RSA/SHA-256), an unsigned child `plain.example.` whose missing DS
/// the parent proves with NSEC, and the bogus cases.
struct DNSSECWorld {
    static let start: UInt32 = 1_800_000_000
    let clock = ManualClock(Double(start))
    let transport = ReplyTransport()
    let parent = TestZoneKey(zone: "example.", inception: start - 3600, expiration: start + 86_400)
    let child = TestZoneKey(
        zone: "sub.example.", algorithm: LDNS_SIGN_RSASHA256, bits: 1024, inception: start - 3600,
        expiration: start + 86_400)

    init() {
        let t = transport
        let a = DNSSECRecords.a
        t.set("example.", RRType(48), reply(parent.signed([parent.dnskey])))
        t.set("www.example.", .a, reply(parent.signed([a("www.example.", [192, 0, 2, 1], 300)])))
        t.set("sub.example.", RRType(43), reply(parent.signed([child.ds])))
        t.set("sub.example.", RRType(48), reply(child.signed([child.dnskey])))
        t.set("www.sub.example.", .a, reply(child.signed([a("www.sub.example.", [192, 0, 2, 2], 300)])))
        // plain.example.: a delegation without DS, proven by the parent's NSEC (NS, no DS).
        let plainNSEC = DNSSECRecords.nsec("plain.example.", next: "q.example.", types: [2, 46, 47])
        t.set(
            "plain.example.", RRType(43),
            reply([], authority: parent.signed([DNSSECRecords.soa("example.")]) + parent.signed([plainNSEC])))
        t.set("host.plain.example.", .a, reply([a("host.plain.example.", [192, 0, 2, 3], 300)]))
        // Tampered: the signature of other data.
        let signature = parent.sign([a("bad.example.", [192, 0, 2, 4], 300)])
        t.set("bad.example.", .a, reply([a("bad.example.", [6, 6, 6, 6], 300), signature]))
        // Stripped: no RRSIG, and the parent's NSEC says stripped.example. is no delegation.
        t.set("stripped.example.", .a, reply([a("stripped.example.", [192, 0, 2, 5], 300)]))
        let strippedNSEC = DNSSECRecords.nsec("stripped.example.", next: "sub.example.", types: [1, 46, 47])
        t.set(
            "stripped.example.", RRType(43),
            reply([], authority: parent.signed([DNSSECRecords.soa("example.")]) + parent.signed([strippedNSEC])))
        // Expired: signed by the zone's key with a validity that has ended.
        let old = [a("old.example.", [192, 0, 2, 6], 300)]
        t.set("old.example.", .a, reply(old + [parent.sign(old, inception: Self.start - 7200, expiration: Self.start - 10)]))
        let future = [a("future.example.", [192, 0, 2, 6], 300)]
        t.set(
            "future.example.", .a,
            reply(future + [parent.sign(future, inception: Self.start + 3600, expiration: Self.start + 7200)]))
        // NXDOMAIN: the apex NSEC covers both the name and the wildcard.
        let apexNSEC = DNSSECRecords.nsec("example.", next: "www.example.", types: [2, 6, 46, 47, 48])
        t.set(
            "nope.example.", .a,
            reply([], authority: parent.signed([DNSSECRecords.soa("example.")]) + parent.signed([apexNSEC]), rcode: .nxDomain))
        // NODATA: www.example. has A only.
        let wwwNSEC = DNSSECRecords.nsec("www.example.", next: "x.example.", types: [1, 46, 47])
        t.set("www.example.", .aaaa, reply([], authority: parent.signed([DNSSECRecords.soa("example.")]) + parent.signed([wwwNSEC])))
        // A denial without proof.
        let unproven = reply([], authority: parent.signed([DNSSECRecords.soa("example.")]), rcode: .nxDomain)
        t.set("unproven.example.", .a, unproven)
        t.set("unproven.example.", RRType(43), unproven)
        // Wildcard: x.wild.example. from *.wild.example., with the NSEC that proves x.wild.example. absent.
        var wildcard = a("*.wild.example.", [192, 0, 2, 7], 300)
        var wildSignature = parent.sign([wildcard])
        wildcard.name = "x.wild.example."
        wildSignature.name = "x.wild.example."
        let wildNSEC = DNSSECRecords.nsec("*.wild.example.", next: "z.wild.example.", types: [1, 46, 47])
        t.set("x.wild.example.", .a, reply([wildcard, wildSignature], authority: parent.signed([wildNSEC])))
        var bare = wildcard
        bare.name = "y.wild.example."
        var bareSignature = wildSignature
        bareSignature.name = "y.wild.example."
        t.set("y.wild.example.", .a, reply([bare, bareSignature]))
        // Two labels below the wildcard: a.deep.wild.example. from *.wild.example. needs deep.wild.example. (the
        // next closer name) proven absent. With deep.wild.example. an empty non-terminal (x.deep.wild.example.
        // exists), the NSEC that covers the name does not cover the next closer name as absent: bogus. Without
        // it (next name z.wild.example.), the same answer is secure.
        for (owner, next) in [("a.deep.wild.example.", "x.deep.wild.example."), ("a.far.wild.example.", "z.wild.example.")] {
            var deep = wildcard
            deep.name = owner
            var deepSignature = wildSignature
            deepSignature.name = owner
            let nsec = DNSSECRecords.nsec("*.wild.example.", next: next, types: [1, 46, 47])
            t.set(owner, .a, reply([deep, deepSignature], authority: parent.signed([nsec])))
        }
        // A CNAME from the signed zone into the unsigned child: each link validated on its own.
        let cname = ResourceRecord(name: "alias.example.", type: .cname, ttl: 300, rdata: try! DNSName("host.plain.example.").wire)
        t.set("alias.example.", .a, reply(parent.signed([cname]) + [a("host.plain.example.", [192, 0, 2, 3], 300)]))
    }

    func resolver(mode: DNSSECMode = .yes, anchors: TrustAnchors? = nil) -> DNSResolver {
        DNSResolver(
            transport: transport,
            configuration: .init(
                dnssec: mode, trustAnchors: anchors ?? TrustAnchors(positive: ["example.": [parent.ds]])),
            clock: clock)
    }
}

/// One walk: the result's state or the bogus verdict.
func verdict(_ resolver: DNSResolver, _ name: String, _ type: RRType = .a, checkingDisabled: Bool = false) async
    -> (state: DNSSECState, ede: UInt16?, reason: String?)
{
    var trace = WalkTrace(keepingSteps: true)
    do {
        _ = try await resolver.walk(
            name, type: type, options: WalkOptions(dnssecOK: true, checkingDisabled: checkingDisabled), trace: &trace)
        return (trace.dnssec, nil, nil)
    } catch {
        return (.bogus, error.dnssec?.ede, error.dnssec?.reason ?? error.description)
    }
}

@Suite("DNSSEC validation")
struct DNSSECValidationTests {
    @Test func aSignedAnswerTwoZonesBelowTheAnchorIsSecureAndItsKeysAreFetchedOnce() async {
        let world = DNSSECWorld()
        let resolver = world.resolver()
        let first = await verdict(resolver, "www.example.")
        #expect(first.state == .secure, "\(first)")
        let second = await verdict(resolver, "www.sub.example.")
        #expect(second.state == .secure, "\(second)")
        // Served again from the cache: the verdict was kept, nothing fetched again.
        #expect(await verdict(resolver, "www.sub.example.").state == .secure)
        #expect(world.transport.count("example.", RRType(48)) == 1)
        #expect(world.transport.count("sub.example.", RRType(43)) == 1)
        #expect(world.transport.count("sub.example.", RRType(48)) == 1)
        #expect(world.transport.count("www.sub.example.", .a) == 1)
        // Every upstream question carried DO.
        #expect(world.transport.questions.allSatisfy { $0.dnssecOK })
        #expect(resolver.validator.currentStatistics.secure >= 4)
    }

    @Test func anUnsignedChildIsInsecureOnlyWhenTheParentProvesIt() async {
        let world = DNSSECWorld()
        let resolver = world.resolver()
        let result = await verdict(resolver, "host.plain.example.")
        #expect(result.state == .insecure)
        #expect(world.transport.count("plain.example.", RRType(43)) == 1)
    }

    @Test func aTamperedSignatureIsBogusWithEDE6AndCDServesItAnyway() async {
        let world = DNSSECWorld()
        let resolver = world.resolver()
        let result = await verdict(resolver, "bad.example.")
        #expect(result.state == .bogus)
        #expect(result.ede == 6)
        #expect(result.reason?.contains("bad.example.") == true)
        #expect(await verdict(resolver, "bad.example.", checkingDisabled: true).state == .bogus)
        var trace = WalkTrace(keepingSteps: true)
        let served = try? await resolver.walk(
            "bad.example.", type: .a, options: WalkOptions(checkingDisabled: true), trace: &trace)
        #expect(served != nil)
        #expect(resolver.validator.currentStatistics.lastBogusName == "bad.example.")
    }

    @Test func strippedSignaturesInASignedZoneAreEDE10() async {
        let world = DNSSECWorld()
        let result = await verdict(world.resolver(), "stripped.example.")
        #expect(result.state == .bogus)
        #expect(result.ede == 10)
    }

    @Test func anExpiredSignatureIsEDE7AndOneNotYetValidEDE8() async {
        let world = DNSSECWorld()
        let resolver = world.resolver()
        #expect(await verdict(resolver, "old.example.").ede == 7)
        #expect(await verdict(resolver, "future.example.").ede == 8)
    }

    @Test func aKeyThatCannotBeFetchedFailsTheQuestionWithoutCachingAVerdict() async {
        let world = DNSSECWorld()
        world.transport.remove("example.", RRType(48))
        let resolver = world.resolver()
        let result = await verdict(resolver, "www.example.")
        #expect(result.ede == 22)
        #expect(resolver.cache.lookup(CacheKey(name: "www.example.", type: 1)) == .miss)
        world.transport.set("example.", RRType(48), reply(world.parent.signed([world.parent.dnskey])))
        #expect(await verdict(resolver, "www.example.").state == .secure)
    }

    @Test func signedDenialsAreSecureAndAnUnprovenOneIsEDE12() async {
        let world = DNSSECWorld()
        let resolver = world.resolver()
        #expect(await verdict(resolver, "nope.example.").state == .secure)
        #expect(await verdict(resolver, "www.example.", .aaaa).state == .secure)
        let unproven = await verdict(resolver, "unproven.example.")
        #expect(unproven.state == .bogus)
        #expect(unproven.ede == 12)
    }

    @Test func aWildcardAnswerNeedsItsProof() async {
        let world = DNSSECWorld()
        let resolver = world.resolver()
        #expect(await verdict(resolver, "x.wild.example.").state == .secure)
        let bare = await verdict(resolver, "y.wild.example.")
        #expect(bare.state == .bogus)
        #expect(bare.ede == 12)
        // RFC 4035 §5.3.4: the next closer name must be proven absent, not only the name asked.
        #expect(await verdict(resolver, "a.far.wild.example.").state == .secure)
        let underEmptyNonTerminal = await verdict(resolver, "a.deep.wild.example.")
        #expect(underEmptyNonTerminal.state == .bogus)
        #expect(underEmptyNonTerminal.ede == 12)
    }

    @Test func aSignerMustBeAnAncestorByLabelsNotByText() async {
        // `evil\.sub.example.` is one label, `evil.sub`, under `example.`: the parent's name, not the child's. Its
        // text ends in `.sub.example.`, and a suffix test on text took `sub.example.` for its zone, so whoever holds
        // the child's key could sign data in the parent's name space and have it validate as secure.
        let world = DNSSECWorld()
        let forged = [DNSSECRecords.a("evil\\.sub.example.", [6, 6, 6, 6], ttl: 300)]
        world.transport.set("evil\\.sub.example.", .a, reply(world.child.signed(forged)))
        let result = await verdict(world.resolver(), "evil\\.sub.example.")
        #expect(result.state == .bogus, "\(result)")
        #expect(result.ede == 6)
        #expect(result.reason?.contains("signer") == true, "\(result)")
        // The same record signed by the zone it belongs to is secure: the label is read with its escape.
        world.transport.set("evil\\.sub.example.", .a, reply(world.parent.signed(forged)))
        let resolver = world.resolver()
        let proper = await verdict(resolver, "evil\\.sub.example.")
        #expect(proper.state == .secure, "\(proper)")
    }

    @Test func aSignedNSEC3WithAnUnknownHashIsIgnoredNotFatal() async {
        // RFC 5155 §8.1: a validator ignores NSEC3 records with an unknown hash algorithm. libldns hashes with the
        // first record's algorithm, gets NULL for any but SHA-1, and aborts on it: a zone owner could sign such a
        // record and stop every validating discoverd that asked for a name in the zone. Signed here by the zone's
        // own key, so it passes the signature check and reaches the denial.
        let world = DNSSECWorld()
        func nsec3(
            _ algorithm: UInt8, flags: UInt8 = 0, owner: String = "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example.",
            hashLength: Int = 20
        ) -> ResourceRecord {
            let hash = [UInt8](repeating: 0x42, count: hashLength)
            let rdata: [UInt8] = [algorithm, flags, 0, 0, 0, UInt8(hashLength)] + hash + DNSSECRecords.bitmap([1, 46])
            return ResourceRecord(name: owner, type: RRType(50), ttl: 300, rdata: rdata)
        }
        let soa = world.parent.signed([DNSSECRecords.soa("example.")])
        for (name, record) in [
            ("gone.example.", nsec3(2)), ("flags.example.", nsec3(1, flags: 0x80)),
            ("root.example.", nsec3(1, owner: ".")),
        ] {
            world.transport.set(name, .a, reply([], authority: soa + world.parent.signed([record]), rcode: .nxDomain))
            let result = await verdict(world.resolver(), name)
            #expect(result.state == .bogus, "\(name): \(result)")
            #expect(result.ede != nil, "\(name): \(result)")
        }
        // The same check straight on the cryptography, unsigned: ignored records prove nothing, and nothing aborts.
        // A next hashed owner of another size than SHA-1's makes ldns_nsec_covers_name read a NULL name.
        let unusable = [
            nsec3(0), nsec3(2), nsec3(255), nsec3(1, flags: 2), nsec3(1, owner: "."), nsec3(1, hashLength: 0),
            nsec3(1, hashLength: 1), nsec3(1, hashLength: 40), nsec3(1, hashLength: 255),
        ]
        for record in unusable {
            let denial = DNSSECCrypto.denial(
                name: "x.example.", type: .a, nameExists: false, proof: [record], signatures: [])
            #expect(denial != .proven, "\(record.rdata.prefix(6))")
            #expect(!DNSSECCrypto.covers("x.example.", proof: [record]))
            #expect(DNSSECCrypto.matchingNSEC3("x.example.", in: [record]) == nil)
            #expect(!DNSSECCrypto.provesWildcardExpansion("a.x.example.", labels: 1, proof: [record]))
        }
        #expect(DNSSECCrypto.usableNSEC3([nsec3(2), nsec3(1), nsec3(1, flags: 1)]).count == 2)
    }

    @Test func eachLinkOfACNAMEChainIsValidated() async {
        let world = DNSSECWorld()
        // The alias is signed, its target lies in the unsigned child: insecure, the weaker of the two.
        #expect(await verdict(world.resolver(), "alias.example.").state == .insecure)
    }

    @Test func namesOutsideTheAnchorsOrUnderANegativeAnchorAreInsecure() async {
        let world = DNSSECWorld()
        world.transport.set("www.example.org.", .a, reply([DNSSECRecords.a("www.example.org.", [192, 0, 2, 9])]))
        #expect(await verdict(world.resolver(), "www.example.org.").state == .insecure)
        // A negative anchor below the positive one turns validation off there (bad.example. is tampered).
        var anchors = TrustAnchors(positive: ["example.": [world.parent.ds]])
        anchors.negative.insert("bad.example.")
        #expect(await verdict(world.resolver(anchors: anchors), "bad.example.").state == .insecure)
    }

    @Test func aDSOfAnUnsupportedAlgorithmMakesTheZoneInsecure() async {
        let world = DNSSECWorld()
        var ds = world.parent.ds
        ds.rdata[2] = 5  // RSASHA1: not validated here (RFC 8624 allows it; we follow RFC 4035 §5.2)
        let resolver = world.resolver(anchors: TrustAnchors(positive: ["example.": [ds]]))
        #expect(await verdict(resolver, "www.example.").state == .insecure)
        // A DS that matches no key is bogus with EDE 9.
        var wrong = world.parent.ds
        wrong.rdata[wrong.rdata.count - 1] ^= 0xFF
        #expect(await verdict(world.resolver(anchors: TrustAnchors(positive: ["example.": [wrong]])), "www.example.").ede == 9)
    }

    @Test func expiredSecureDataIsIndeterminateAndNeverServedPastItsSignatures() async {
        let world = DNSSECWorld()
        let resolver = world.resolver()
        #expect(await verdict(resolver, "www.example.").state == .secure)
        // Past the TTL (300 s), the network gone: the stale answer stands in, no longer secure.
        world.transport.remove("www.example.", .a)
        world.clock.advance(400)
        var trace = WalkTrace(keepingSteps: true)
        _ = try? await resolver.walk("www.example.", type: .a, options: WalkOptions(dnssecOK: true), trace: &trace)
        #expect(trace.dnssec == .indeterminate)
        // Past the signatures' expiry (a day): not served at all.
        world.clock.advance(86_400)
        var late = WalkTrace(keepingSteps: true)
        let served = try? await resolver.walk(
            "www.example.", type: .a, options: WalkOptions(dnssecOK: true), trace: &late)
        #expect(served == nil)
    }

    @Test func allowDowngradeValidatesUntilAProbeShowsTheUpstreamsStripDNSSEC() async {
        let world = DNSSECWorld()
        let resolver = world.resolver(mode: .allowDowngrade)
        // Before any evidence: no validation, nothing asked with DO.
        world.transport.remove("example.", RRType(48))
        var trace = WalkTrace(keepingSteps: false)
        _ = try? await resolver.walk("www.sub.example.", type: .a, options: WalkOptions(), trace: &trace)
        #expect(trace.dnssec == .insecure)
        #expect(world.transport.questions.contains { !$0.dnssecOK && $0.name == "www.sub.example." })
        #expect(!world.transport.questions.contains { $0.dnssecOK })
        // A probe that gets no reply changes nothing.
        await resolver.probeDNSSEC()
        #expect(resolver.validator.upstreamCapability == .unknown)
        // A probe answered with signed keys: validation as with `yes`.
        world.transport.set("example.", RRType(48), reply(world.parent.signed([world.parent.dnskey])))
        await resolver.probeDNSSEC()
        #expect(resolver.validator.upstreamCapability == .capable)
        #expect(await verdict(resolver, "stripped.example.").ede == 10)
        // A probe answered without RRSIGs: the upstreams strip DNSSEC data; answers become insecure.
        world.transport.set("example.", RRType(48), reply([world.parent.dnskey]))
        await resolver.probeDNSSEC()
        #expect(resolver.validator.upstreamCapability == .incapable)
        world.transport.set("fresh.example.", .a, reply([DNSSECRecords.a("fresh.example.", [192, 0, 2, 8])]))
        #expect(await verdict(resolver, "fresh.example.").state == .insecure)
        // And back, on the next probe with signatures.
        world.transport.set("example.", RRType(48), reply(world.parent.signed([world.parent.dnskey])))
        await resolver.probeDNSSEC()
        #expect(resolver.validator.upstreamCapability == .capable)
    }

    @Test func validationOffMarksEverythingInsecure() async {
        let world = DNSSECWorld()
        let resolver = world.resolver(mode: .no)
        #expect(await verdict(resolver, "bad.example.").state == .insecure)
    }
}

@Suite("Trust anchors")
struct TrustAnchorTests {
    @Test func theBuiltInRootAnchorsParseAndTheClosestAnchorDecides() throws {
        #expect(TrustAnchors.rootDS.count == 2)
        #expect(TrustAnchors.rootDS.allSatisfy { $0.name == "." && $0.type.rawValue == 43 })
        let anchors = TrustAnchors.builtIn
        guard case .positive(let zone, _) = anchors.closest("www.example.com.") else {
            Issue.record("expected the root anchor")
            return
        }
        #expect(zone == ".")
        #expect(anchors.closest("printer.local.") == .negative(zone: "local."))
        #expect(anchors.closest("1.168.192.in-addr.arpa.") == .negative(zone: "168.192.in-addr.arpa."))
        var lab = anchors
        lab.add(try TrustAnchors.parse("dnssec.test. IN DS 2371 13 2 " + String(repeating: "AB", count: 32), source: "x", line: 1))
        guard case .positive(let labZone, _) = lab.closest("www.dnssec.test.") else {
            Issue.record("expected the lab anchor below the negative test.")
            return
        }
        #expect(labZone == "dnssec.test.")
        #expect(lab.closest("other.test.") == .negative(zone: "test."))
        // By labels: `printer\.local.` is one label under the root, `x\.dnssec.test.` one under test.
        guard case .positive(let escapedZone, _) = lab.closest("printer\\.local.") else {
            Issue.record("expected the root anchor for a name whose one label holds a dot")
            return
        }
        #expect(escapedZone == ".")
        #expect(lab.closest("x\\.dnssec.test.") == .negative(zone: "test."))
        // An anchor written in capitals is found for the lowercased names of the wire.
        var capitals = TrustAnchors(positive: [:])
        let line = "Lab.Example. IN DS 2371 13 2 " + String(repeating: "AB", count: 32)
        capitals.add(try TrustAnchors.parse(line, source: "x", line: 1))
        #expect(capitals.closest("www.lab.example.") != .none)
    }

    @Test func resolvedsFilesAreReadWithFileAndLineInErrors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("anchors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "; lab\nexample. IN DS 12345 13 2 \(String(repeating: "0A", count: 32))\n"
            .write(to: directory.appendingPathComponent("lab.positive"), atomically: true, encoding: .utf8)
        try "broken.example\n\ncorp.example ; a comment\n"
            .write(to: directory.appendingPathComponent("off.negative"), atomically: true, encoding: .utf8)
        var anchors = TrustAnchors()
        try anchors.load(directory: directory.path)
        #expect(anchors.positive["example."]?.count == 1)
        #expect(anchors.negative == ["broken.example.", "corp.example."])
        try "example. IN A 192.0.2.1\n".write(to: directory.appendingPathComponent("bad.positive"), atomically: true, encoding: .utf8)
        var again = TrustAnchors()
        #expect(throws: TrustAnchorError.self) { try again.load(directory: directory.path) }
        do {
            try again.load(directory: directory.path)
        } catch {
            #expect(error.description.hasSuffix("bad.positive:1: a trust anchor is a DS or DNSKEY record"))
        }
    }
}

/// Two upstreams behind one transport: `query` goes to the one named by `primary` (as failover would), `queryEach`
/// asks both; every reply is credited to the upstream that sent it, as `UpstreamClient` does.
final class TwoUpstreams: DNSTransport {
    let upstreams: [String: ReplyTransport]
    let primary: Mutex<String>

    init(_ upstreams: [String: ReplyTransport], primary: String) {
        self.upstreams = upstreams
        self.primary = Mutex(primary)
    }

    var upstreamNames: [String] { upstreams.keys.sorted() }

    func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
        try await query(question, dnssecOK: false)
    }

    func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange {
        let name = primary.withLock { $0 }
        return try await Self.credited(upstreams[name]!, name, question, dnssecOK)
    }

    func queryEach(_ question: DNSQuestion, dnssecOK: Bool) async -> [UpstreamReply] {
        var replies: [UpstreamReply] = []
        for name in upstreamNames {
            let exchange = try? await Self.credited(upstreams[name]!, name, question, dnssecOK)
            replies.append(UpstreamReply(server: name, message: exchange?.message))
        }
        return replies
    }

    static func credited(_ transport: ReplyTransport, _ name: String, _ question: DNSQuestion, _ dnssecOK: Bool)
        async throws(DNSTransportError) -> DNSExchange
    {
        var exchange = try await transport.query(question, dnssecOK: dnssecOK)
        for index in exchange.attempts.indices { exchange.attempts[index].server = name }
        return exchange
    }
}

@Suite("allow-downgrade decides per upstream")
struct UpstreamDNSSECStatesTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func probeRepliesGiveEvidenceAndNothingElseDoes() {
        let key = DNSSECRecords.a("example.", [192, 0, 2, 1])
        let world = DNSSECWorld()
        let signed = reply(world.parent.signed([world.parent.dnskey]))
        let stripped = reply([world.parent.dnskey])
        let empty = reply([])
        let cases: [(DNSMessage?, DNSSECProbeEvidence?)] = [
            (signed, .signed), (stripped, .stripped), (empty, .stripped), (reply([key]), .stripped),
            (reply([], rcode: .servFail), nil), (reply([], rcode: .refused), nil), (reply([], rcode: .nxDomain), nil),
            (nil, nil),
        ]
        for (message, expected) in cases { #expect(DNSSECProbeEvidence.of(message) == expected) }
        #expect(DNSSECProbeEvidence.combined([nil, .stripped, .signed]) == .signed)
        #expect(DNSSECProbeEvidence.combined([nil, .stripped]) == .stripped)
        #expect(DNSSECProbeEvidence.combined([nil, nil]) == nil)
        #expect(DNSSECProbeEvidence.combined([]) == nil)
    }

    @Test func eachUpstreamHasItsStateAndOnlyEvidenceChangesIt() {
        var states = UpstreamDNSSECStates()
        states.configure(["a", "b"])
        #expect(states.summary == .unknown && states.unknown == ["a", "b"] && !states.anyCapable)
        let decidedA = states.record("a", .signed, detail: "signed", at: Self.now)
        let decidedB = states.record("b", .stripped, detail: "stripped", at: Self.now)
        #expect(decidedA && decidedB)
        #expect(states.capability(of: "a") == .capable && states.capability(of: "b") == .incapable)
        #expect(states.summary == .mixed && states.anyCapable && states.unknown.isEmpty)
        // No usable reply (timeout, SERVFAIL, garbage) never changes a state, however often.
        var changes = 0
        for _ in 0..<1000 {
            if states.record("a", nil, detail: "timeout", at: Self.now) { changes += 1 }
            if states.record("b", nil, detail: "garbage", at: Self.now) { changes += 1 }
        }
        #expect(changes == 0)
        #expect(states.capability(of: "a") == .capable && states.capability(of: "b") == .incapable)
        // The same evidence again is no change; other evidence is.
        let same = states.record("a", .signed, detail: "signed", at: Self.now)
        let other = states.record("b", .signed, detail: "signed", at: Self.now)
        #expect(!same && other)
        #expect(states.summary == .capable)
        // An upstream nobody probed, or no upstream named: unknown, so its answers are not validated.
        #expect(states.capability(of: "c") == .unknown && states.capability(of: nil) == .unknown)
    }

    @Test func aReconfigurationKeepsWhatItKeepsAndStartsNewOnesUnknown() {
        var states = UpstreamDNSSECStates()
        states.configure(["a", "b"])
        states.record("a", .signed, detail: "signed", at: Self.now)
        states.record("b", .stripped, detail: "stripped", at: Self.now)
        states.configure(["c", "a"])
        #expect(states.entries.map(\.server) == ["c", "a"])
        #expect(states.capability(of: "a") == .capable && states.capability(of: "c") == .unknown)
        #expect(states.capability(of: "b") == .unknown)
        #expect(states.summary == .mixed && states.unknown == ["c"])
        states.configure([])
        #expect(states.summary == .unknown)
    }

    @Test func answersAreValidatedOnlyFromTheUpstreamShownCapable() async {
        let world = DNSSECWorld()
        // b strips DNSSEC data: its DNSKEY reply has no RRSIGs, and it answers without them.
        let stripping = ReplyTransport()
        stripping.set("example.", RRType(48), reply([world.parent.dnskey]))
        let transport = TwoUpstreams(["a": world.transport, "b": stripping], primary: "a")
        let resolver = DNSResolver(
            transport: transport,
            configuration: .init(
                dnssec: .allowDowngrade, trustAnchors: TrustAnchors(positive: ["example.": [world.parent.ds]])),
            clock: world.clock)
        await resolver.probeDNSSEC()
        let states = resolver.validator.upstreamStates
        #expect(states.capability(of: "a") == .capable && states.capability(of: "b") == .incapable)
        #expect(resolver.validator.upstreamCapability == .mixed)
        #expect(resolver.validator.active)
        // From a (capable): validated; secure, and an unsigned answer in the signed zone is bogus.
        #expect(await verdict(resolver, "www.example.").state == .secure)
        #expect(await verdict(resolver, "stripped.example.").ede == 10)
        // From b (incapable), a name not cached yet: not validated, insecure, not SERVFAIL.
        transport.primary.withLock { $0 = "b" }
        stripping.set("other.example.", .a, reply([DNSSECRecords.a("other.example.", [192, 0, 2, 9])]))
        #expect(await verdict(resolver, "other.example.").state == .insecure)
        // A probe round where b gives nothing and a is lost changes neither.
        stripping.remove("example.", RRType(48))
        world.transport.remove("example.", RRType(48))
        await resolver.probeDNSSEC()
        #expect(resolver.validator.upstreamStates == states)
    }
}

@Suite("A plan says whether its ECH came from an authenticated answer")
struct ECHAuthenticationTests {
    /// HTTPS `1 . alpn=h2 ipv4hint=192.0.2.7 ech=AQID`.
    static func httpsWithECH(_ name: String) -> ResourceRecord {
        let alpn: [UInt8] = [0, 1, 0, 3, 2] + Array("h2".utf8)
        let hint: [UInt8] = [0, 4, 0, 4, 192, 0, 2, 7]
        let ech: [UInt8] = [0, 5, 0, 3, 1, 2, 3]
        return ResourceRecord(name: name, type: .https, ttl: 300, rdata: [0, 1, 0] + alpn + hint + ech)
    }

    @Test func theRule() {
        #expect(ECHAuthentication.of(dnssec: .secure, authenticatedTransport: false) == .dnssec)
        #expect(ECHAuthentication.of(dnssec: .secure, authenticatedTransport: true) == .dnssec)
        for state in [DNSSECState.insecure, .indeterminate, .bogus] {
            #expect(ECHAuthentication.of(dnssec: state, authenticatedTransport: true) == .encryptedTransport)
            #expect(ECHAuthentication.of(dnssec: state, authenticatedTransport: false) == .unauthenticated)
        }
    }

    @Test func securePlainAndEncryptedTransport() async throws {
        let world = DNSSECWorld()
        let t = world.transport
        t.set("ech.example.", .https, reply(world.parent.signed([Self.httpsWithECH("ech.example.")])))
        t.set("ech.plain.example.", .https, reply([Self.httpsWithECH("ech.plain.example.")]))
        t.set("tls.plain.example.", .https, reply([Self.httpsWithECH("tls.plain.example.")]))
        let resolver = world.resolver()
        let secure = try await resolver.connectionPlan(host: "ech.example.")
        #expect(secure.plan.endpoints.contains { $0.ech == "AQID" })
        #expect(secure.echAuthentication == .dnssec)
        let plain = try await resolver.connectionPlan(host: "ech.plain.example.")
        #expect(plain.plan.endpoints.contains { $0.ech == "AQID" })
        #expect(plain.echAuthentication == .unauthenticated)
        // Over a verified encrypted upstream: authenticated by the transport, also when served from the cache.
        t.authenticated.store(true, ordering: .relaxed)
        let encrypted = try await resolver.connectionPlan(host: "tls.plain.example.")
        #expect(encrypted.echAuthentication == .encryptedTransport)
        t.authenticated.store(false, ordering: .relaxed)
        let cached = try await resolver.connectionPlan(host: "tls.plain.example.")
        #expect(cached.echAuthentication == .encryptedTransport)
        // No ECH, nothing said about it.
        t.set("noech.plain.example.", .https, reply([httpsRecord("noech.plain.example.", priority: 1, target: ".", alpn: ["h2"])]))
        t.set("noech.plain.example.", .a, reply([DNSSECRecords.a("noech.plain.example.", [192, 0, 2, 9])]))
        let none = try await resolver.connectionPlan(host: "noech.plain.example.")
        #expect(none.echAuthentication == nil)
    }
}

@Suite("Signatures verified once")
struct VerifiedSignatureMemoTests {
    @Test func aRepeatedRRsetIsNotCheckedAgainButTamperingAndTheClockStillCount() {
        let now = Date()
        let t = UInt32(now.timeIntervalSince1970)
        let key = TestZoneKey(zone: "memo.example.", inception: t - 3600, expiration: t + 3600)
        // A fresh RRset per run (the memo is process-wide and other tests sign too).
        let address: [UInt8] = [192, 0, 2, UInt8.random(in: 1...254)]
        let rrset = [DNSSECRecords.a("w\(UInt32.random(in: 0...UInt32.max)).memo.example.", address)]
        let signature = key.sign(rrset)
        let memo = DNSSECCrypto.VerifiedSignatures.shared
        let common = DNSSECCrypto.VerifiedSignatures.key(rrset: rrset, keys: [key.dnskey])!
        #expect(!memo.contains(common + signature.rdata))
        let first = DNSSECCrypto.verify(rrset: rrset, signatures: [signature], keys: [key.dnskey], now: now)
        #expect(first == .valid(expiration: t + 3600))
        #expect(memo.contains(common + signature.rdata))
        // The same inputs again: the same verdict (from the memo).
        #expect(DNSSECCrypto.verify(rrset: rrset, signatures: [signature], keys: [key.dnskey], now: now) == first)
        // Other records under the same signature: not in the memo, and bogus.
        let forged = [DNSSECRecords.a(rrset[0].name, [198, 51, 100, 1])]
        guard case .bogus = DNSSECCrypto.verify(rrset: forged, signatures: [signature], keys: [key.dnskey], now: now)
        else {
            Issue.record("a forged RRset verified")
            return
        }
        // The memo never outlives the signature: after its expiration, and before its inception, ldns decides.
        let later = now.addingTimeInterval(7200)
        #expect(DNSSECCrypto.verify(rrset: rrset, signatures: [signature], keys: [key.dnskey], now: later) == .expired)
        let earlier = now.addingTimeInterval(-7200)
        #expect(
            DNSSECCrypto.verify(rrset: rrset, signatures: [signature], keys: [key.dnskey], now: earlier) == .notYetValid)
        // A different key set: the memo does not apply (the key is part of the memo's key).
        let other = TestZoneKey(zone: "memo.example.", inception: t - 3600, expiration: t + 3600)
        guard case .bogus = DNSSECCrypto.verify(rrset: rrset, signatures: [signature], keys: [other.dnskey], now: now)
        else {
            Issue.record("a signature verified with a key that did not make it")
            return
        }
    }

    @Test func theWindowFollowsSerialNumberArithmetic() {
        func rrsig(inception: UInt32, expiration: UInt32) -> ResourceRecord {
            let be = { (v: UInt32) in [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: v >> $0) } }
            return ResourceRecord(
                name: "x.example.", type: RRType(46), ttl: 300,
                rdata: [0, 1, 13, 2] + be(300) + be(expiration) + be(inception) + [0, 1] + [0])
        }
        let W = DNSSECCrypto.VerifiedSignatures.self
        #expect(W.inWindow(rrsig(inception: 100, expiration: 200), now: 150))
        #expect(!W.inWindow(rrsig(inception: 100, expiration: 200), now: 201))
        #expect(!W.inWindow(rrsig(inception: 100, expiration: 200), now: 99))
        // Across the 2^32 wrap (RFC 4034 §3.1.5).
        #expect(W.inWindow(rrsig(inception: UInt32.max - 10, expiration: 20), now: 5))
        #expect(!W.inWindow(rrsig(inception: 200, expiration: 100), now: 150))
    }
}
