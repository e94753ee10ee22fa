import DNSCore
import Testing

/// The one definition of the names mDNS owns, as the stub, the proxy and wide-area DNS-SD all use it.
@Suite struct LocalZonesTests {
    @Test(arguments: [
        ("printer.local.", true), ("local.", true), ("LOCAL.", true), ("a.b.local", true),
        ("1.2.254.169.in-addr.arpa.", true), ("8.e.f.ip6.arpa.", true), ("1.0.0.0.b.e.f.ip6.arpa.", true),
        ("a.e.f.ip6.arpa.", true), ("9.e.f.ip6.arpa.", true),
        ("example.com.", false), ("notlocal.", false), ("local.example.", false), ("1.2.0.192.in-addr.arpa.", false),
        ("c.e.f.ip6.arpa.", false), ("8.d.f.ip6.arpa.", false),
    ])
    func mdnsOwnsLocalAndTheLinkLocalReverseZones(name: String, local: Bool) {
        #expect(LocalZones.isLocal(name) == local)
    }

    @Test func reverseNamesGiveTheirAddress() throws {
        #expect(LocalZones.reverseAddress(try DNSName("4.3.254.169.in-addr.arpa")) == [169, 254, 3, 4])
        #expect(LocalZones.reverseAddress(try DNSName("04.3.254.169.in-addr.arpa")) == nil)
        #expect(LocalZones.reverseAddress(try DNSName("example.com")) == nil)
    }

    @Test(arguments: [
        ("printer.local.", true), ("local.", true), ("4.3.2.1.in-addr.arpa.", true), ("b.e.f.ip6.arpa.", true),
        ("example.com.", false), ("localhost.", false), ("arpa.", false), ("notlocal", false), ("", false),
        ("x.locall.", false), ("xarpa.", false),
    ])
    func mayBeLocalIsASuffixCheck(name: String, expected: Bool) {
        #expect(LocalZones.mayBeLocal(name) == expected)
        #expect(LocalZones.isReverseZone(name) == name.hasSuffix(".arpa."))
    }
}
