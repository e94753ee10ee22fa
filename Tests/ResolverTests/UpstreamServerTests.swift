import DNSCore
import Testing

@testable import Resolver

/// The upstream syntax of #16: plain, resolved's `ADDR#NAME`, `tls://` and `https://` (dnsproxy's forms).
@Suite struct UpstreamServerTests {
    @Test(arguments: [
        ("192.0.2.53", UpstreamServer.Transport.plain, "192.0.2.53", 53, nil as String?, ""),
        ("192.0.2.53:5353", .plain, "192.0.2.53", 5353, nil, ""),
        ("2001:db8::53", .plain, "2001:db8::53", 53, nil, ""),
        ("[2001:db8::53]:54", .plain, "2001:db8::53", 54, nil, ""),
        ("192.0.2.53#dns.example", .tls, "192.0.2.53", 853, "dns.example", ""),
        ("192.0.2.53:8853#DNS.Example.", .tls, "192.0.2.53", 8853, "dns.example", ""),
        ("[2001:db8::53]#dns.example", .tls, "2001:db8::53", 853, "dns.example", ""),
        ("tls://192.0.2.53", .tls, "192.0.2.53", 853, nil, ""),
        ("TLS://192.0.2.53:10853#dns.example", .tls, "192.0.2.53", 10853, "dns.example", ""),
        ("https://dns.example/dns-query#192.0.2.53", .https, "192.0.2.53", 443, "dns.example", "/dns-query"),
        ("https://dns.example:8443/q#2001:db8::53", .https, "2001:db8::53", 8443, "dns.example", "/q"),
        ("https://dns.example", .https, "", 443, "dns.example", "/dns-query"),
        ("https://192.0.2.53/dns-query", .https, "192.0.2.53", 443, nil, "/dns-query"),
        ("https://[2001:db8::53]:444/x", .https, "2001:db8::53", 444, nil, "/x"),
        // RFC 8484 §4.1 URI templates, as Firefox and the RFC's examples write them.
        ("https://dns.example/q{?dns}#192.0.2.53", .https, "192.0.2.53", 443, "dns.example", "/q{?dns}"),
        ("https://192.0.2.53/q?v=2{&dns}", .https, "192.0.2.53", 443, nil, "/q?v=2{&dns}"),
        ("https://192.0.2.53/q?v=2", .https, "192.0.2.53", 443, nil, "/q?v=2"),
    ])
    func parses(_ text: String, _ transport: UpstreamServer.Transport, _ host: String, _ port: Int, _ name: String?, _ path: String)
        throws
    {
        let server = try UpstreamServer(parsing: text)
        #expect(server.transport == transport)
        #expect(server.host == host)
        #expect(server.port == port)
        #expect(server.tlsName == name)
        #expect(server.path == path)
        // The description parses back to the same server.
        #expect(try UpstreamServer(parsing: server.description) == server || host.isEmpty)
    }

    @Test(arguments: [
        ("", "empty"), ("dns.example", "not an IPv4 or IPv6 address"), ("192.0.2.53:0", "port"),
        ("192.0.2.53:99999", "port"), ("192.0.2.53#", "not a valid host name"), ("192.0.2.53#bad name", "not a valid"),
        ("tls://dns.example", "write its address and the name to check, tls://ADDR#dns.example"),
        ("tls://dns.example#dns.example", "host names are not allowed"), ("quic://192.0.2.53", "unknown scheme"),
        ("http://x/", "unknown scheme"),
        ("https://dns.example/q#notanip", "not an IPv4"), ("https://192.0.2.53/q#192.0.2.54", "differs"),
        ("https://dns.example/a b", "visible ASCII"), ("https://dns.example/q?dns=x", "carries a dns parameter"),
        ("https://dns.example/q{dns}", "not {?dns} or {&dns}"), ("https://dns.example/q?a{?dns}", "write {&dns}"),
        ("https://dns.example/q{&dns}", "without a query"), ("https://dns.example/q{?dns", "unclosed"),
        ("https://dns.example/q{?dns}{?x}", "more than one"), ("https://dns.example/q}", "visible ASCII"),
        ("https://dns.example/é", "visible ASCII"),
        ("[2001:db8::53", "'[' without ']'"), ("udp://192.0.2.53#x.example", "for DNS over TLS only"),
        ("192.0.2.53 encryption=maybe", "'maybe' is not strict, opportunistic or no"),
        ("192.0.2.53 ddr=no", "unknown option 'ddr=no'"), ("192.0.2.53 encryption=no x=y", "unknown option 'x=y'"),
        ("tls://192.0.2.53 encryption=no", "for plain upstreams"),
        ("192.0.2.53 pin-sha256=urKlXhFA6MdhOFU9fWbyITD/k8C2gI2LCH/jpIldRk0=", "for DoT and DoH upstreams"),
        // Not 32 bytes (a SHA-1 pin), not base64, unpadded, or with bits left in the last character.
        ("tls://192.0.2.53 pin-sha256=2fmbLQnnCsAjI4RZzmXPDMtSn6M=", "not the base64 of a SHA-256 digest"),
        ("tls://192.0.2.53 pin-sha256=urKlXhFA6MdhOFU9fWbyITD_k8C2gI2LCH-jpIldRk0=", "not the base64"),
        ("tls://192.0.2.53 pin-sha256=urKlXhFA6MdhOFU9fWbyITD/k8C2gI2LCH/jpIldRk0", "not the base64"),
        ("tls://192.0.2.53 pin-sha256=urKlXhFA6MdhOFU9fWbyITD/k8C2gI2LCH/jpIldRk1=", "not the base64"),
        ("tls://192.0.2.53 pin-sha256=", "not the base64"),
        // A list, as resolved's DNS= takes one: each server is a value of its own.
        ("tls://192.0.2.63#dns.lab.test, tls://192.0.2.64#dns.lab.test, 192.0.2.58", "3 upstreams in one value"),
        ("192.0.2.53 192.0.2.54", "2 upstreams in one value"), ("9.9.9.9#dns.quad9.net,[2001:db8::53]", "2 upstreams"),
        ("192.0.2.53, bad", "not an IPv4 or IPv6 address"),
    ])
    func rejects(_ text: String, _ reason: String) {
        #expect(throws: UpstreamSyntaxError.self) { try UpstreamServer(parsing: text) }
        do {
            _ = try UpstreamServer(parsing: text)
        } catch {
            #expect(error.reason.contains(reason), "\(text): \(error.reason)")
            #expect(error.description.contains("upstream '\(text)'"))
        }
    }

    @Test func perUpstreamEncryptionMode() throws {
        let router = try UpstreamServer(parsing: "  192.168.1.1  encryption=NO ")
        #expect(router.transport == .plain && router.host == "192.168.1.1" && router.encryption == .no)
        #expect(router.description == "192.168.1.1:53 encryption=no")
        #expect(try UpstreamServer(parsing: router.description) == router)
        #expect(try UpstreamServer(parsing: "[2001:db8::53]:54\tencryption=strict").encryption == .strict)
        #expect(try UpstreamServer(parsing: "192.0.2.53").encryption == nil)
        #expect(router != UpstreamServer(host: "192.168.1.1"))
    }

    @Test func pinnedKeys() throws {
        let pin = "urKlXhFA6MdhOFU9fWbyITD/k8C2gI2LCH/jpIldRk0="
        let backup = "z+CSdg86xLixdOCssooO9IMCv8BFGjaynWRKVFz+1og="
        // RFC 7469 writes the value in quotes; the option's name in any case, the value exactly.
        let dot = try UpstreamServer(parsing: "tls://192.0.2.65 PIN-SHA256=\"\(pin)\" pin-sha256=\(backup)")
        #expect(dot.transport == .tls && dot.pins == [pin, backup] && dot.tlsName == nil)
        #expect(dot.pinDigests.count == 2 && dot.pinDigests.allSatisfy { $0.count == 32 })
        #expect(dot.pinDigests[0].prefix(3) == [0xba, 0xb2, 0xa5])
        #expect(dot.description == "tls://192.0.2.65:853 pin-sha256=\(pin) pin-sha256=\(backup)")
        #expect(try UpstreamServer(parsing: dot.description) == dot)
        let doh = try UpstreamServer(parsing: "https://dns.lab.test/dns-query#192.0.2.65 pin-sha256=\(pin)")
        #expect(doh.description == "https://dns.lab.test:443/dns-query#192.0.2.65 pin-sha256=\(pin)")
        #expect(try UpstreamServer(parsing: "192.0.2.65#dns.lab.test pin-sha256=\(pin)").pins == [pin])
        // A pinned upstream is another upstream than the same address verified by a CA.
        #expect(dot != (try UpstreamServer(parsing: "tls://192.0.2.65")))
        #expect(try UpstreamServer(parsing: "tls://192.0.2.65").pins.isEmpty)
    }

    @Test func base64DecodesWhatItEncodesAndRefusesTheRest() {
        for count in 0..<40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 37 + count) }
            #expect(Base64.decode(Base64.encode(bytes)) == (count == 0 ? nil : bytes))
        }
        #expect(Base64.decode("TWFu") == Array("Man".utf8) && Base64.decode("TWE=") == Array("Ma".utf8))
        #expect(Base64.decode("TQ==") == Array("M".utf8))
        for bad in ["TWF", "TW=u", "T===", "TWE", "TR==", "TWF=", "TW u", "TW-_", "====", "TWFu===="] {
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
    }

    @Test func descriptions() throws {
        #expect(try UpstreamServer(parsing: "192.0.2.53").description == "192.0.2.53:53")
        #expect(try UpstreamServer(parsing: "192.0.2.53#dns.example").description == "tls://192.0.2.53:853#dns.example")
        #expect(
            try UpstreamServer(parsing: "https://dns.example/dns-query#192.0.2.53").description
                == "https://dns.example:443/dns-query#192.0.2.53")
        #expect(try UpstreamServer(parsing: "https://dns.example/dns-query#192.0.2.53").authority == "dns.example")
        #expect(try UpstreamServer(parsing: "https://[2001:db8::1]:8443/q").authority == "[2001:db8::1]:8443")
    }
}

/// RFC 8484 §4.1: where POST and GET go for a DoH URI template, and which templates are refused.
@Suite struct DoHPathTemplateTests {
    @Test(arguments: [
        ("/dns-query", false, "/dns-query", "/dns-query?dns=AAA"),
        ("/dns-query{?dns}", true, "/dns-query", "/dns-query?dns=AAA"),
        ("/q?v=2{&dns}", true, "/q?v=2", "/q?v=2&dns=AAA"),
        ("/q?v=2", false, "/q?v=2", "/q?v=2&dns=AAA"),
        ("/%7Euser/q{?dns}", true, "/%7Euser/q", "/%7Euser/q?dns=AAA"),
    ])
    func expands(_ template: String, _ named: Bool, _ post: String, _ get: String) throws {
        let parsed = try DoHPathTemplate(template)
        #expect(parsed.hasDNSVariable == named)
        #expect(parsed.postPath == post)
        #expect(parsed.getPath(dns: "AAA") == get)
        #expect(parsed.description == template)
    }

    @Test(arguments: [
        ("", "must start with '/'"), ("dns-query{?dns}", "must start with '/'"), ("/q\r\n", "visible ASCII"),
        ("/q#frag", "visible ASCII"), ("/q{?dns", "unclosed"), ("/q{?{dns}", "unclosed"),
        ("/q{+dns}", "{+dns} is not"), ("/q{?dns,ct}", "is not {?dns}"), ("/q?dns=1", "carries a dns parameter"),
        ("/q?a=1&dns", "carries a dns parameter"), ("/a{?dns}&x=1", "goes on after"), ("/q?a{&dns}1", "goes on after"), ("/" + String(repeating: "a", count: 1024), "longer than 1024"),
    ])
    func refuses(_ template: String, _ reason: String) {
        do {
            _ = try DoHPathTemplate(template)
            Issue.record("'\(template)' was accepted")
        } catch {
            #expect(error.reason.contains(reason), "\(template): \(error.reason)")
            #expect(!error.reason.contains("\r"), "control characters are shown escaped: \(error.reason)")
        }
    }
}

/// RFC 7766 §6.2.3: which failed tries are sent once more on a new connection.
@Suite struct ResendTests {
    @Test func aQueryIsSentAgainWhenTheServerClosedOrBrokeItsConnectionNotWhenTheHandshakeFailed() {
        #expect(EncryptedTransport.resends(.failed(EncryptedConnections.closedByServer)))
        #expect(EncryptedTransport.resends(.failed(EncryptedConnections.closedByServer("write: Broken pipe"))))
        #expect(EncryptedTransport.resends(.failed(EncryptedConnections.abandoned)))
        #expect(!EncryptedTransport.resends(.failed("the server closed the connection during the TLS handshake")))
        #expect(!EncryptedTransport.resends(.failed("HTTP status 500 from the DoH server")))
        #expect(!EncryptedTransport.resends(.insecure(EncryptedConnections.closedByServer)))
        #expect(!EncryptedTransport.resends(.timedOut))
    }
}

/// RFC 7830 / RFC 8467: queries over encrypted transports are padded to a multiple of 128 bytes.
@Suite struct EDNSPaddingTests {
    @Test(arguments: ["a.", "www.lab.test.", String(repeating: "x", count: 60) + ".lab.test.", "name-" + String(repeating: "y", count: 58) + "." + String(repeating: "z", count: 63) + "."])
    func padsToBlocks(_ name: String) throws {
        let dnsName = try DNSName(name)
        let wire = try DNSQuery.make(name: dnsName, type: .a, class: .in, id: 7, dnssecOK: false, ednsBufferSize: 1232)
        let questionLength = dnsName.wire.count + 4
        for keepalive in [false, true] {
            let padded = try #require(EDNSPadding.pad(wire, questionLength: questionLength, keepalive: keepalive))
            #expect(padded.count % 128 == 0)
            #expect(Array(padded.prefix(wire.count - 2)) == Array(wire.prefix(wire.count - 2)))
            // ldns reads it back: same question, EDNS still present.
            let message = try DNSMessage.parse(padded)
            #expect(message.question?.name == dnsName.text)
            #expect(message.edns != nil)
            // The OPT RDATA holds the options: keepalive (11, empty) first when asked, then padding (12).
            let optStart = 12 + questionLength
            let rdLength = Int(padded[optStart + 9]) << 8 | Int(padded[optStart + 10])
            #expect(padded.count == optStart + 11 + rdLength)
            let firstCode = Int(padded[optStart + 11]) << 8 | Int(padded[optStart + 12])
            #expect(firstCode == (keepalive ? 11 : 12))
        }
    }

    /// RFC 7828 §3.1: the server's TIMEOUT (units of 100 ms) is read from the OPT record of a reply, past
    /// compressed answer names; a query's empty option, a malformed one or none at all give nil.
    @Test func readsTheServersKeepaliveTimeout() throws {
        let dnsName = try DNSName("www.lab.test.")
        let wire = try DNSQuery.make(name: dnsName, type: .a, class: .in, id: 7, dnssecOK: false, ednsBufferSize: 1232)
        let questionLength = dnsName.wire.count + 4
        let query = try #require(EDNSPadding.pad(wire, questionLength: questionLength, keepalive: true))
        #expect(EDNSOptionScan.find(11, in: query)?.value == [])
        #expect(EDNSPadding.keepaliveTimeout(in: query) == nil)
        // A reply: the question, one A record named by a compression pointer, then OPT with keepalive 300 (30 s).
        var reply = Array(wire.prefix(12 + questionLength))
        reply[2] |= 0x80
        reply[6] = 0; reply[7] = 1; reply[10] = 0; reply[11] = 1
        reply += [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]
        reply += [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 6, 0, 11, 0, 2, 0x01, 0x2C]
        #expect(EDNSPadding.keepaliveTimeout(in: reply) == 300)
        #expect(EDNSOptionScan.find(11, in: reply)?.payloadSize == 1232)
        #expect(EDNSOptionScan.find(12, in: reply) == nil)
        // Cut anywhere, or an option longer than its OPT: nil, never a trap.
        for length in 0..<reply.count { #expect(EDNSPadding.keepaliveTimeout(in: Array(reply.prefix(length))) == nil) }
        var bad = reply
        bad[bad.count - 3] = 9
        #expect(EDNSPadding.keepaliveTimeout(in: bad) == nil)
    }

    /// A try's query shares its template until it is sent: `wire` stamps the try's ID into a copy, the padded
    /// copy for DoT and DoH carries it too, and another ID (a collision on a DoT connection, DoH GET's 0) is
    /// stamped into either; the template itself never changes, and replies are matched as before.
    @Test func aTrysIDIsStampedIntoCopiesOfTheSharedTemplate() throws {
        let dnsName = try DNSName("www.lab.test.")
        let template = try DNSQuery.make(name: dnsName, type: .a, class: .in, id: 0, dnssecOK: false, ednsBufferSize: 1232)
        let question = DNSQuestion(name: dnsName.text, type: .a)
        let query = PendingQuery(template: template, id: 0xBEEF, question: question, nameLength: dnsName.wire.count)
        #expect(Array(query.wire.prefix(2)) == [0xBE, 0xEF])
        #expect(Array(query.wire.dropFirst(2)) == Array(template.dropFirst(2)))
        let padded = try #require(query.padded(keepalive: true))
        #expect(padded.id == 0xBEEF && Array(padded.wire.prefix(2)) == [0xBE, 0xEF])
        #expect(padded.wire == EDNSPadding.pad(query.wire, questionLength: query.questionLength, keepalive: true))
        let moved = padded.withID(0)
        #expect(moved.id == 0 && Array(moved.wire.prefix(2)) == [0, 0])
        #expect(Array(moved.wire.dropFirst(2)) == Array(padded.wire.dropFirst(2)))
        #expect(Array(query.withID(7).wire.prefix(2)) == [0, 7])
        #expect(Array(template.prefix(2)) == [0, 0])
        // The padded query still accepts its reply: the question echoed (in another case), with its ID.
        var reply = Array(padded.wire.prefix(12 + query.questionLength))
        reply[2] |= 0x80
        reply[10] = 0; reply[11] = 0
        reply[13] = UInt8(ascii: "W")
        guard case .accept(let message) = padded.classify(reply, overTCP: true) else {
            Issue.record("the reply to the padded query was not accepted")
            return
        }
        #expect(message.id == 0xBEEF)
        guard case .drop = moved.classify(reply, overTCP: true) else {
            Issue.record("a reply with the old ID was accepted after the ID changed")
            return
        }
    }

    @Test func refusesWhatItCannotPad() {
        #expect(EDNSPadding.pad([0, 1, 2], questionLength: 5, keepalive: true) == nil)
        let noOPT: [UInt8] = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0x61, 0, 0, 1, 0, 1]
        #expect(EDNSPadding.pad(noOPT, questionLength: 7, keepalive: false) == nil)
    }
}

/// RFC 9462 §4: which designations of `_dns.resolver.arpa` a plain upstream is upgraded to, and how each is trusted.
@Suite struct DDRDesignationTests {
    static func record(
        _ priority: UInt16, alpn: [String], port: UInt16? = nil, v4: [String] = [], v6: [String] = [],
        dohpath: String? = nil, target: String = "dns.example."
    ) throws -> SVCBRecord {
        var params = SVCBParams()
        params.alpnIDs = alpn.map { Array($0.utf8) }
        params.port = port
        params.ipv4hint = v4
        params.ipv6hint = v6
        params.dohpath = dohpath
        return SVCBRecord(priority: priority, target: try DNSName(target), params: params)
    }

    @Test func priorityOrderBothProtocolsAndOtherAddresses() throws {
        var skipped: [String] = []
        let records = [
            try Self.record(2, alpn: ["h2"], v4: ["192.0.2.53"], dohpath: "/q{?dns}"),
            try Self.record(1, alpn: ["dot"], port: 8853, v4: ["192.0.2.53"], v6: ["2001:db8::53"]),
            try Self.record(0, alpn: ["dot"], v4: ["192.0.2.53"]),  // AliasMode: not a designation
            try Self.record(3, alpn: ["dot"], v4: ["198.51.100.1"]),  // another address: its certificate must name ours
            try Self.record(4, alpn: ["h3"], v4: ["192.0.2.53"]),  // no protocol we speak
            try Self.record(5, alpn: ["h2"], v4: ["192.0.2.53"]),  // h2 without dohpath
        ]
        let found = DDRDiscovery.designations(records, for: "192.0.2.53", skipped: &skipped)
        #expect(
            found.map(\.server.description)
                == ["tls://192.0.2.53:8853", "https://192.0.2.53:443/q{?dns}", "tls://192.0.2.53:853"])
        #expect(found.map(\.address) == ["192.0.2.53", "192.0.2.53", "198.51.100.1"])
        #expect(found.map(\.identity) == [.configured, .configured, .address("192.0.2.53")])
        #expect(found.allSatisfy { $0.server.tlsName == nil && !$0.opportunistic })
        #expect(skipped.count == 2)
        var none: [String] = []
        let v6 = DDRDiscovery.designations(records, for: "2001:db8::53", skipped: &none)
        #expect(v6.first?.server.port == 8853 && v6.first?.address == "2001:db8::53")
        #expect(v6.dropFirst().allSatisfy { $0.identity == .address("2001:db8::53") })
    }

    @Test func targetNamesWithoutHintsUseTheirAddresses() throws {
        var skipped: [String] = []
        let records = [
            try Self.record(1, alpn: ["dot"], target: "resolver.arpa."),  // RFC 9462 §4: not a TargetName
            try Self.record(2, alpn: ["dot"], target: "dot.example."),
            try Self.record(3, alpn: ["dot"], target: "gone.example."),
        ]
        let found = DDRDiscovery.designations(
            records, addresses: ["dot.example.": ["2001:db8::7", "198.51.100.7"]], for: "192.0.2.53", skipped: &skipped)
        #expect(found.map(\.address) == ["198.51.100.7"])  // the upstream's family first
        #expect(found.map(\.target) == ["dot.example."])
        #expect(skipped.count == 2)
    }

    @Test func privateUpstreamsAreOpportunisticAtTheirOwnAddressOnly() throws {
        let records = [
            try Self.record(1, alpn: ["dot"], v4: ["10.0.0.1"]),
            try Self.record(2, alpn: ["dot"], port: 8853, v4: ["10.0.0.2"]),
        ]
        var skipped: [String] = []
        let opportunistic = DDRDiscovery.designations(records, for: "10.0.0.1", encryption: .opportunistic, skipped: &skipped)
        #expect(opportunistic.map(\.identity) == [.unauthenticated, .address("10.0.0.1")])
        #expect(opportunistic.map(\.opportunistic) == [true, false])
        let strict = DDRDiscovery.designations(records, for: "10.0.0.1", encryption: .strict, skipped: &skipped)
        #expect(strict.map(\.identity) == [.configured, .address("10.0.0.1")])
        #expect(strict.allSatisfy { !$0.opportunistic })
    }

    /// A designation a server got wrong is passed over with its reason, never used: a dohpath that is not a path
    /// template naming `dns` (RFC 9461 §5), port 0, an address that is no server's.
    @Test func unusableDesignationsArePassedOverWithTheirReason() throws {
        let records = [
            try Self.record(1, alpn: ["h2"], v4: ["192.0.2.53"], dohpath: "/dns-query"),
            try Self.record(2, alpn: ["h2"], v4: ["192.0.2.53"], dohpath: "dns-query{?dns}"),
            try Self.record(3, alpn: ["h2"], v4: ["192.0.2.53"], dohpath: "/q\r\nx-injected: 1{?dns}"),
            try Self.record(4, alpn: ["dot"], port: 0, v4: ["192.0.2.53"]),
            try Self.record(5, alpn: ["dot"], v4: ["0.0.0.0"], v6: ["::", "ff02::1"]),
            try Self.record(6, alpn: ["dot"], v4: ["255.255.255.255", "224.0.0.251"]),
            try Self.record(7, alpn: ["dot"], target: "zero.example."),
            try Self.record(8, alpn: ["h2"], v4: ["0.0.0.0", "192.0.2.53"], dohpath: "/q?v=2{&dns}"),
        ]
        var skipped: [String] = []
        let found = DDRDiscovery.designations(
            records, addresses: ["zero.example.": ["0.1.2.3"]], for: "192.0.2.53", skipped: &skipped)
        #expect(found.map(\.server.description) == ["https://192.0.2.53:443/q?v=2{&dns}"])
        #expect(found.map(\.address) == ["192.0.2.53"])
        #expect(skipped.count == 7, "\(skipped)")
        #expect(skipped[0].contains("without the dns variable"))
        #expect(skipped[1].contains("must start with '/'"))
        #expect(skipped[2].contains("visible ASCII") && !skipped[2].contains("\r"))
        #expect(skipped[3].contains("port 0"))
        #expect(skipped[4...6].allSatisfy { $0.contains("no unicast address") }, "\(skipped)")
    }

    /// Opportunistic mode sends a query in clear text while its designation fails; the change is logged once.
    @Test func aDesignationIsUnreachableFromAFailureUntilAnAnswer() {
        var reachability = DDRDiscovery.Reachability()
        var changed = reachability.record(.timedOut)
        #expect(!changed && reachability.reason == nil)
        changed = reachability.record(.failed("connect: Connection refused"))
        #expect(changed)
        changed = reachability.record(.failed("connect: Connection refused (retrying after a back-off)"))
        #expect(!changed && reachability.reason == "connect: Connection refused (retrying after a back-off)")
        changed = reachability.record(.timedOut) || reachability.record(.cancelled)
        #expect(!changed && reachability.reason != nil)
        let header = DNSHeader(
            id: 1, qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 3,
            questionCount: 1, answerCount: 0, authorityCount: 0, additionalCount: 0)
        let reply = DNSMessage(header: header, rcode: .nxDomain, questions: [DNSQuestion(name: "a.example.", type: .a)])
        changed = reachability.record(.response(reply))
        #expect(changed && reachability.reason == nil)
        changed = reachability.record(.response(reply))
        #expect(!changed)
    }

    @Test func unicastAddresses() {
        for unicast in ["192.0.2.53", "10.0.0.1", "223.255.255.254", "2001:db8::53", "::1", "fe80::1"] {
            #expect(DDRDiscovery.isUnicast(unicast), "\(unicast)")
        }
        let others = [
            "0.0.0.0", "0.1.2.3", "224.0.0.251", "239.1.1.1", "240.0.0.1", "255.255.255.255", "::", "ff02::fb", "nothing",
        ]
        for other in others {
            #expect(!DDRDiscovery.isUnicast(other), "\(other)")
        }
    }

    @Test func privateAndLocalAddresses() {
        for local in ["10.1.2.3", "172.16.0.1", "172.31.255.1", "192.168.1.1", "127.0.0.53", "169.254.1.1", "100.64.0.1",
            "::1", "fd00::1", "fc12::1", "fe80::1", "::ffff:192.168.0.1"]
        {
            #expect(DDRDiscovery.isPrivateOrLocal(local), "\(local)")
        }
        for global in ["192.0.2.53", "172.32.0.1", "8.8.8.8", "100.128.0.1", "2001:db8::53", "fec0::1", "not an address"] {
            #expect(!DDRDiscovery.isPrivateOrLocal(global), "\(global)")
        }
    }

    @Test func rediscoveryAtFourFifthsOfTheTTLWithinBounds() {
        #expect(DDRDiscovery.refresh(ttl: 300) == .seconds(240))
        #expect(DDRDiscovery.refresh(ttl: 0) == .seconds(4))
        #expect(DDRDiscovery.refresh(ttl: UInt32.max) == .milliseconds(86_400 * 800))
    }
}
