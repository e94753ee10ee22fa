import DNSCore
import DNSSDModel
import Logging
import Resolver
import Testing

@testable import WideAreaDiscovery

@Suite("Wide-area browse")
struct BrowseTests {
    static let domain = "sd.example"

    /// A zone with two good instances, a bad SRV target, a dangling PTR, a PTR into another domain and garbage.
    static func zone() -> TableSource {
        TableSource([
            ("_http._tcp.sd.example.", .ptr, [
                Wire.instance("Web One", "_http._tcp.sd.example"), Wire.instance("Web Two", "_http._tcp.sd.example"),
                Wire.instance("Bad Target", "_http._tcp.sd.example"), Wire.instance("Ghost", "_http._tcp.sd.example"),
                Wire.instance("Elsewhere", "_http._tcp.other.example"), [0xC0, 0x0C],
            ]),
            ("web\\032one._http._tcp.sd.example.", .srv, [Wire.srv(port: 8080, target: "web1.sd.example")]),
            ("web\\032one._http._tcp.sd.example.", .txt, [Wire.txt("path=/one", "flag")]),
            ("web\\032two._http._tcp.sd.example.", .srv, [[0, 1, 2], Wire.srv(port: 8081, target: "web2.sd.example")]),
            ("bad\\032target._http._tcp.sd.example.", .srv, [Wire.srv(port: 80, target: ".")]),
            ("web1.sd.example.", .a, [[192, 0, 2, 81]]),
            ("web1.sd.example.", .aaaa, [[0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [0x81]]),
            ("web2.sd.example.", .a, [[192, 0, 2, 82]]),
        ])
    }

    static func browser(_ source: TableSource, resolve: Bool) -> UnicastBrowser {
        UnicastBrowser(
            type: "_http._tcp", domain: domain, subtype: nil, resolve: resolve, source: source,
            schedule: PollSchedule(), logger: Logger(label: "test"))
    }

    @Test func withoutResolveEveryInstanceOfTheTypeAndDomainIsListed() async throws {
        let look = try await Self.browser(Self.zone(), resolve: false).snapshot(fresh: false)
        #expect(Set(look.services.values.map(\.name)) == ["Web One", "Web Two", "Bad Target", "Ghost"])
        #expect(look.services.values.allSatisfy { $0.domain == Self.domain && $0.type == "_http._tcp" })
    }

    @Test func resolveSkipsUnusableInstancesAndKeepsTheGoodOnes() async throws {
        let look = try await Self.browser(Self.zone(), resolve: true).snapshot(fresh: false)
        #expect(Set(look.services.values.map(\.name)) == ["Web One", "Web Two"])
        let one = try #require(look.services["web one"])
        #expect(one.host == "web1.sd.example")
        #expect(one.port == 8080)
        #expect(one.addresses == ["192.0.2.81", "2001:db8::81"])
        #expect(one.txt == ["path": "/one", "flag": ""] || one.txt["path"] == "/one")
        // The malformed SRV next to the good one is skipped, not fatal.
        #expect(look.services["web two"]?.port == 8081)
        #expect(look.ttl == 60)
    }

    @Test func resolveOfABadTargetIsNotFoundNamingTheReason() async throws {
        let instance = ServiceInstanceName(instance: "Bad Target", type: "_http._tcp", domain: Self.domain)
        await #expect {
            try await InstanceResolver.resolve(instance, source: Self.zone(), fresh: false)
        } throws: { error in
            (error as? WideAreaError)?.code == .notFound && "\(error)".contains("\".\"")
        }
    }

    @Test func changesAreReportedAsAddedRemovedChanged() {
        let a = DNSSDService(name: "A", type: "_http._tcp", domain: "d", port: 1)
        let b = DNSSDService(name: "B", type: "_http._tcp", domain: "d", port: 2)
        var b2 = b
        b2.port = 3
        let c = DNSSDService(name: "C", type: "_http._tcp", domain: "d")
        let events = ServiceChanges.events(from: ["a": a, "b": b], to: ["b": b2, "c": c])
        #expect(events == [.removed(a), .added(c), .changed(b2)])
        #expect(ServiceChanges.events(from: ["a": a], to: ["a": a]).isEmpty)
    }

    @Test(arguments: [(UInt32?.none, 10), (1, 10), (9, 10), (30, 31), (100_000, 3600)] as [(UInt32?, Int64)])
    func pollsWhenTTLsRunOutButNeverFasterThanTenSeconds(ttl: UInt32?, seconds: Int64) {
        #expect(PollSchedule().delay(afterTTL: ttl) == .seconds(seconds))
    }

    @Test func ptrNamesAreCaseKeptAndCheckedAgainstTypeAndDomain() throws {
        let good = ServiceInstanceName.fromPTR(
            Wire.instance("My.Printer", "_IPP._tcp.SD.example"), type: "_ipp._tcp", domain: "sd.example")
        #expect(good?.instance == "My.Printer")
        #expect(try good?.queryName() == "my\\.printer._ipp._tcp.sd.example.")
        #expect(ServiceInstanceName.fromPTR(Wire.name("_ipp._tcp.sd.example"), type: "_ipp._tcp", domain: "sd.example") == nil)
        #expect(ServiceInstanceName.fromPTR([3, 0x61], type: "_ipp._tcp", domain: "sd.example") == nil)
    }

    @Test func typesComeFromServicesEnumeration() async throws {
        let source = TableSource([
            ("_services._dns-sd._udp.sd.example.", .ptr, [
                Wire.name("_http._tcp.sd.example"), Wire.name("_ipp._tcp.sd.example"), Wire.name("_x._tcp.other"),
                Wire.name("junk.sd.example"),
            ])
        ])
        let wideArea = UnicastDNSSD(source: source, settings: WideAreaSettings())
        #expect(try await wideArea.browseTypes(domain: "SD.example.") == ["_http._tcp", "_ipp._tcp"])
    }

    @Test func domainsAreEnumeratedUnderSearchAndBrowseDomains() async {
        let source = TableSource([
            ("b._dns-sd._udp.corp.example.", .ptr, [Wire.name("sd.example"), Wire.name("dyn.example")]),
            ("lb._dns-sd._udp.corp.example.", .ptr, [Wire.name("sd.example")]),
            ("r._dns-sd._udp.extra.example.", .ptr, [Wire.name("dyn.example")]),
        ])
        let wideArea = UnicastDNSSD(
            source: source, settings: WideAreaSettings(browseDomains: ["extra.example"], searchDomains: ["corp.example", "local"]))
        let found = await wideArea.enumerateDomains()
        #expect(found.browse == ["sd.example", "dyn.example"])
        #expect(found.registration == ["dyn.example"])
        #expect(await wideArea.browseDomains() == ["dyn.example", "extra.example", "sd.example"])
        #expect(await wideArea.defaultBrowseDomains() == ["extra.example", "sd.example"])
        // `local` is mDNS: never asked over unicast DNS.
        #expect(!source.lookups.withLock { $0 }.contains { $0.contains("local.") })
    }

    @Test func resolvConfSearchDomains() {
        #expect(ResolvConf.searchDomains("nameserver 1.2.3.4\nsearch Corp.Example. lab.test # c\n") == ["corp.example", "lab.test"])
        #expect(ResolvConf.searchDomains("search a.example\ndomain b.example\n") == ["b.example"])
        #expect(ResolvConf.searchDomains("nameserver ::1\n").isEmpty)
    }

    @Test func unicastDomainsAreEverythingButLocal() {
        #expect(WideAreaDomain.isUnicast("sd.lab.test"))
        #expect(!WideAreaDomain.isUnicast("local"))
        #expect(!WideAreaDomain.isUnicast("Local."))
        #expect(!WideAreaDomain.isUnicast("x.local"))
        #expect(!WideAreaDomain.isUnicast(nil))
        #expect(!WideAreaDomain.isUnicast("254.169.in-addr.arpa"))
    }
}
