import DNSCore
import Testing

import Foundation

@testable import Resolver

@Suite("SVCB: RFC 9460 client processing")
struct SVCBProcessingTests {
    static let owner = "example.com."
    static let foo = "03666f6f 076578616d706c65 03636f6d 00"  // foo.example.com.
    static let bar = "03626172 076578616d706c65 03636f6d 00"  // bar.example.com.

    static func process(_ hexes: [String], supportedKeys: Set<SVCBParamKey> = HTTPSProcessing.supportedKeys)
        -> HTTPSRRSetOutcome
    {
        HTTPSProcessing.process(rdatas: hexes.map(wireBytes), ownerName: owner, supportedKeys: supportedKeys)
    }

    @Test("AliasMode wins over ServiceMode in the same RRset (§2.4.2)")
    func aliasWins() {
        #expect(Self.process(["0001 00", "0000" + Self.foo, "0002 00"]) == .alias(target: "foo.example.com."))
    }

    @Test("The first of several AliasMode records is used")
    func firstAlias() {
        #expect(Self.process(["0000" + Self.bar, "0000" + Self.foo]) == .alias(target: "bar.example.com."))
    }

    @Test("AliasMode to \".\" means the service is unavailable (§2.5.1)")
    func aliasToRoot() {
        #expect(Self.process(["0000 00"]) == .serviceUnavailable)
        #expect(Self.process(["0000 00"]).bindings.isEmpty)
    }

    @Test("ServiceMode records come out by priority, equal priorities in record order")
    func priorityOrder() {
        let outcome = Self.process(["0003" + Self.foo, "0001" + Self.bar, "0003 00", "0002" + Self.foo])
        #expect(outcome.bindings.map(\.priority) == [1, 2, 3, 3])
        #expect(outcome.bindings.map(\.target) == [
            "bar.example.com.", "foo.example.com.", "foo.example.com.", "example.com.",
        ])
    }

    @Test("TargetName \".\" in ServiceMode is the owner name (§2.5.2)")
    func serviceModeRootTarget() {
        let outcome = HTTPSProcessing.process(rdatas: [wireBytes("0001 00")], ownerName: "_8443._https.Example.com")
        #expect(outcome.bindings.first?.target == "_8443._https.example.com.")
    }

    @Test("A malformed record rejects the entire RRset (§2.2)")
    func malformedRejectsSet() {
        let outcome = Self.process(["0001 00", "0002" + Self.foo + "0003 0001 01"])
        #expect(outcome == .malformed(SVCBError(.invalidValue, key: .port, "value must be exactly 2 octets")))
        #expect(outcome.bindings.isEmpty)
        #expect(!outcome.h3)
    }

    @Test("A record with an unsupported mandatory key is ignored, the others kept (§8)")
    func unsupportedMandatory() {
        // mandatory=key667 key667=hello: well-formed, but we do not support key667.
        let unsupported = "0001" + Self.foo + "0000 0002 029b 029b 0005 68656c6c6f"
        // mandatory=alpn alpn=h3: supported.
        let supported = "0002" + Self.bar + "0000 0002 0001 0001 0003 026833"
        let outcome = Self.process([unsupported, supported])
        #expect(outcome.bindings.map(\.target) == ["bar.example.com."])
        #expect(outcome.bindings.first?.mandatory == ["alpn"])
        // An unknown key that is not mandatory is simply kept raw.
        let optional = Self.process(["0001" + Self.foo + "029b 0005 68656c6c6f"])
        #expect(optional.bindings.first?.unknown == [ServiceBinding.UnknownParam(key: 667, value: "aGVsbG8=")])
    }

    @Test("A mandatory key missing from the record makes it not self-consistent (§8, §2.4.3)")
    func mandatoryNotPresent() {
        // mandatory=port but no port parameter: port is supported, so only self-consistency fails.
        let outcome = Self.process(["0001" + Self.foo + "0000 0002 0003 0001 0003 026833", "0002 00"])
        #expect(outcome.bindings.map(\.priority) == [2])
    }

    @Test("port and no-default-alpn are automatically mandatory (§9.1)")
    func automaticallyMandatory() {
        let withPort = "0001" + Self.foo + "0003 0002 20fb"
        let withNoDefault = "0002" + Self.foo + "0001 0003 026833 0002 0000"
        let plain = "0003" + Self.foo + "0001 0003 026833"
        // We support both keys: all three are usable.
        #expect(Self.process([withPort, withNoDefault, plain]).bindings.map(\.priority) == [1, 2, 3])
        // A client that did not support port or no-default-alpn would have to ignore those records.
        var reduced = HTTPSProcessing.supportedKeys
        reduced.remove(.port)
        reduced.remove(.noDefaultAlpn)
        #expect(Self.process([withPort, withNoDefault, plain], supportedKeys: reduced).bindings.map(\.priority) == [3])
    }

    @Test("no-default-alpn without alpn is unusable (§7.1.1)")
    func noDefaultWithoutALPN() {
        #expect(Self.process(["0001" + Self.foo + "0002 0000"]) == .bindings([]))
    }

    struct ALPNCase: Sendable, CustomTestStringConvertible {
        var label: String
        var params: String
        var effective: [String]
        var h3: Bool
        var testDescription: String { label }
    }

    static let alpnCases: [ALPNCase] = [
        ALPNCase(label: "no alpn: default only", params: "", effective: ["http/1.1"], h3: false),
        ALPNCase(label: "alpn=h3", params: "0001 0003 026833", effective: ["h3", "http/1.1"], h3: true),
        ALPNCase(label: "alpn=h2,h3", params: "0001 0006 026832 026833", effective: ["h2", "h3", "http/1.1"], h3: true),
        ALPNCase(label: "alpn=h3 no-default-alpn", params: "0001 0003 026833 0002 0000", effective: ["h3"], h3: true),
        ALPNCase(label: "alpn=h3-29 only", params: "0001 0006 05 68332d3239", effective: ["h3-29", "http/1.1"],
                 h3: false),
        ALPNCase(label: "alpn=http/1.1,h2", params: "0001 000c 08 687474702f312e31 026832",
                 effective: ["http/1.1", "h2"], h3: false),
    ]

    @Test("The ALPN set is alpn + http/1.1 unless no-default-alpn (§7.1.2)", arguments: alpnCases)
    func alpnSet(_ item: ALPNCase) throws {
        let outcome = Self.process(["0001 00" + item.params])
        let binding = try #require(outcome.bindings.first)
        #expect(binding.effectiveALPN == item.effective)
        #expect(binding.supportsH3 == item.h3)
        #expect(outcome.h3 == item.h3)
    }

    @Test("HTTPS records are taken only from the RRset's owner and type")
    func recordFiltering() {
        let records = [
            ResourceRecord(name: "Example.com", type: .https, ttl: 60, rdata: wireBytes("0001 00 0001 0003 026833")),
            ResourceRecord(name: "other.example.", type: .https, ttl: 60, rdata: wireBytes("0000 00")),
            ResourceRecord(name: "example.com", type: .a, ttl: 60, rdata: [192, 0, 2, 1]),
        ]
        let outcome = HTTPSProcessing.process(records: records, ownerName: "EXAMPLE.com.")
        #expect(outcome.bindings.map(\.alpn) == [["h3"]])
    }

    @Test("ServiceBinding encodes exactly the API field names")
    func bindingJSON() throws {
        let binding = ServiceBinding(
            priority: 1, target: "example.com.", port: 8443, alpn: ["h3"], noDefaultAlpn: false,
            ipv4hint: ["192.0.2.1"], ipv6hint: [], ech: "AQID", mandatory: ["port"], dohpath: nil,
            unknown: [.init(key: 667, value: "aGVsbG8=")])
        let data = try JSONEncoder().encode(binding)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Set(object.keys) == [
            "priority", "target", "port", "alpn", "noDefaultAlpn", "ipv4hint", "ipv6hint", "ech", "mandatory",
            "unknown",
        ])
        #expect(try JSONDecoder().decode(ServiceBinding.self, from: data) == binding)
    }

    // MARK: Alias chains

    @Test("Alias chains stop at 8 hops")
    func chainLimit() throws {
        var chain = AliasChain(start: "a0.example")
        for hop in 1...8 { try chain.follow(to: "a\(hop).example") }
        #expect(chain.aliases.count == 8)
        #expect(chain.current == "a8.example.")
        #expect(throws: AliasChainError.self) { try chain.follow(to: "a9.example") }
    }

    @Test("Alias loops are detected, whatever the case")
    func chainLoop() throws {
        var chain = AliasChain(start: "a.example")
        try chain.follow(to: "b.example")
        #expect(throws: AliasChainError(.loop, chain: ["a.example.", "b.example.", "a.example."])) {
            try chain.follow(to: "A.EXAMPLE.")
        }
    }

    @Test("CNAMEs inside one answer are followed to the records of the queried type")
    func followCNAMEs() throws {
        let answers = [
            ResourceRecord(name: "www.example.com", type: .cname, ttl: 60, rdata: TestMessage.name("cdn.example.net")),
            ResourceRecord(name: "cdn.example.net", type: .https, ttl: 60, rdata: wireBytes("0001 00")),
        ]
        var chain = AliasChain(start: "WWW.example.com")
        let records = try chain.followCNAMEs(type: .https, in: answers)
        #expect(records.count == 1)
        #expect(chain.current == "cdn.example.net.")
        #expect(chain.aliases == ["cdn.example.net."])

        // A CNAME whose target is not in the answer: the caller queries the target next.
        var partial = AliasChain(start: "www.example.com")
        #expect(try partial.followCNAMEs(type: .https, in: [answers[0]]).isEmpty)
        #expect(partial.current == "cdn.example.net.")

        // A CNAME loop inside the answer.
        let loop = [
            ResourceRecord(name: "a.example", type: .cname, ttl: 1, rdata: TestMessage.name("b.example")),
            ResourceRecord(name: "b.example", type: .cname, ttl: 1, rdata: TestMessage.name("a.example")),
        ]
        var looping = AliasChain(start: "a.example")
        #expect(throws: AliasChainError.self) { try looping.followCNAMEs(type: .a, in: loop) }
    }
}
