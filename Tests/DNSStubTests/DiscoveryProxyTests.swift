import DNSCore
import Testing

@testable import DNSStub
@testable import Resolver

@Suite struct DiscoveryProxyTests {
    let zone = try! DNSName("home.example")

    @Test func zoneIsTheMostSpecificDomain() throws {
        let domains = [try DNSName("example"), zone]
        #expect(DiscoveryProxy.zone(of: try DNSName("x._http._tcp.home.example"), in: domains) == zone)
        #expect(DiscoveryProxy.zone(of: try DNSName("www.example"), in: domains) == (try DNSName("example")))
        #expect(DiscoveryProxy.zone(of: try DNSName("example.org"), in: domains) == nil)
        #expect(DiscoveryProxy.zone(of: try DNSName("nothome.example"), in: [zone]) == nil)
    }

    @Test func namesMapBothWays() throws {
        let name = try DNSName("printer._ipp._tcp.home.example")
        let local = try #require(DiscoveryProxy.toLocal(name, zone: zone))
        #expect(local.text == "printer._ipp._tcp.local.")
        #expect(DiscoveryProxy.fromLocal(local, zone: zone) == name)
        #expect(DiscoveryProxy.fromLocal(try DNSName("www.example.org"), zone: zone).text == "www.example.org.")
    }

    @Test func instanceNamesKeepTheirCase() throws {
        let wire = Wire.name(["Living Room TV", "_airplay", "_tcp", "LOCAL"])
        let rewritten = try #require(DiscoveryProxy.rewriteWireName(wire[...], zone: zone))
        #expect(rewritten == Wire.name(["Living Room TV", "_airplay", "_tcp", "home", "example"]))
        // Not under .local: unchanged.
        let other = Wire.name(["www", "example", "org"])
        #expect(DiscoveryProxy.rewriteWireName(other[...], zone: zone) == other)
        // Malformed: no root label, label past the end.
        #expect(DiscoveryProxy.rewriteWireName([3, 97, 98][...], zone: zone) == nil)
        #expect(DiscoveryProxy.rewriteWireName([9, 97, 0][...], zone: zone) == nil)
    }

    @Test func recordsAreRewrittenAndLinkOnlyAddressesDropped() throws {
        let srv = ResourceRecord(
            name: "Game._tictactoe._tcp.local.", type: .srv, ttl: 120,
            rdata: [0, 0, 0, 0, 0x10, 0x92] + Wire.name(["lab-b", "local"]))
        let rewritten = try #require(DiscoveryProxy.rewrite(srv, zone: zone))
        #expect(rewritten.name == "game._tictactoe._tcp.home.example.")
        #expect(rewritten.ttl == 10)
        #expect(Array(rewritten.rdata.dropFirst(6)) == Wire.name(["lab-b", "home", "example"]))
        let linkLocal4 = ResourceRecord(name: "h.local.", type: .a, ttl: 120, rdata: [169, 254, 1, 2])
        let loopback4 = ResourceRecord(name: "h.local.", type: .a, ttl: 120, rdata: [127, 0, 0, 1])
        let linkLocal6 = ResourceRecord(name: "h.local.", type: .aaaa, ttl: 120, rdata: [0xFE, 0x80] + Array(repeating: 1, count: 14))
        let global6 = ResourceRecord(name: "h.local.", type: .aaaa, ttl: 120, rdata: [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 12))
        #expect(DiscoveryProxy.rewrite(linkLocal4, zone: zone) == nil)
        #expect(DiscoveryProxy.rewrite(loopback4, zone: zone) == nil)
        #expect(DiscoveryProxy.rewrite(linkLocal6, zone: zone) == nil)
        #expect(DiscoveryProxy.rewrite(global6, zone: zone)?.name == "h.home.example.")
    }

    @Test func synthesizedRecordsParse() throws {
        let soa = try DiscoveryProxy.soa(zone).soa()
        #expect(soa.minimum == 10)
        #expect(DiscoveryProxy.isBrowseDomainQuery(["lb", "_dns-sd", "_udp"].map { Array($0.utf8) }))
        #expect(!DiscoveryProxy.isBrowseDomainQuery(["r", "_dns-sd", "_udp"].map { Array($0.utf8) }))
    }

    @Test func reverseNamesGiveTheirAddressOnlyWhenCompleteAndCanonical() throws {
        #expect(LocalZones.reverseAddress(try DNSName("2.2.0.192.in-addr.arpa")) == [192, 0, 2, 2])
        #expect(LocalZones.reverseAddress(try DNSName("02.2.0.192.in-addr.arpa")) == nil)
        #expect(LocalZones.reverseAddress(try DNSName("2.0.192.in-addr.arpa")) == nil)
        let six = "2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa"
        #expect(LocalZones.reverseAddress(try DNSName(six)) == [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [2])
    }
}
