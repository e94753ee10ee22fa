import DNSCore
import Foundation
import Testing

@testable import Resolver

@Suite("Alt-Svc store")
struct AltSvcStoreTests {
    private func makeStore(maxOrigins: Int = 10_000) -> (AltSvcStore, ManualClock) {
        let clock = ManualClock()
        return (AltSvcStore(maxOrigins: maxOrigins, clock: clock), clock)
    }

    private let origin = try! AltSvcOrigin(parsing: "https://example.com")

    @Test("a report makes h3 known until ma runs out")
    func reportAndExpire() throws {
        let (store, clock) = makeStore()
        try store.report(origin: "https://EXAMPLE.com:443", header: "h3=\":443\"; ma=3600, h3=\"alt.example.com:443\"")
        #expect(store.h3(for: origin))
        clock.advance(600)
        #expect(
            store.alternatives(for: origin)
                == [
                    AltSvcAlternative(protocolID: "h3", port: 443, maxAge: 3_000),
                    AltSvcAlternative(protocolID: "h3", host: "alt.example.com", port: 443, maxAge: 85_800),
                ]
        )
        clock.advance(3_000)
        #expect(store.alternatives(for: origin).map(\.host) == ["alt.example.com"])
        clock.advance(86_400)
        #expect(!store.h3(for: origin))
        #expect(store.alternatives(for: origin).isEmpty)
        #expect(store.count == 0)
    }

    @Test("a new header replaces every earlier alternative of the origin")
    func replace() throws {
        let (store, _) = makeStore()
        try store.report(origin: "https://example.com", header: "h3=\":443\", h3=\":8443\"")
        try store.report(origin: "https://example.com", header: "h3=\"alt.example.com:8443\"")
        let expected = [AltSvcAlternative(protocolID: "h3", host: "alt.example.com", port: 8443)]
        #expect(store.alternatives(for: origin) == expected)
        // Only unusable alternatives: the earlier ones are replaced all the same (RFC 7838 §3).
        try store.report(origin: "https://example.com", header: "h2=\":443\"")
        #expect(!store.h3(for: origin))
    }

    @Test("clear removes the origin's alternatives and only those")
    func clear() throws {
        let (store, _) = makeStore()
        try store.report(origin: "https://example.com", header: "h3=\":443\"")
        try store.report(origin: "https://example.org", header: "h3=\":443\"")
        try store.report(origin: "https://example.com", header: "clear")
        #expect(!store.h3(for: origin))
        #expect(store.h3(for: try AltSvcOrigin(host: "example.org")))
        #expect(store.clear(try AltSvcOrigin(host: "example.org")))
        #expect(store.count == 0)
    }

    @Test("ports are part of the origin")
    func ports() throws {
        let (store, _) = makeStore()
        try store.report(origin: "https://example.com:8443", header: "h3=\":8443\"")
        #expect(!store.h3(for: origin))
        #expect(store.h3(for: try AltSvcOrigin(host: "example.com", port: 8443)))
    }

    @Test(
        "only the final h3 counts as HTTP/3",
        arguments: [
            ("h3=\":443\"", true), ("h3-29=\":443\"", false), ("h2=\":443\"", false), ("H3=\":443\"", false),
            ("h3=\":443\"; ma=0", false), ("h2=\":443\", h3=\"alt.example.net:443\"", true),
        ])
    func h3Detection(header: String, h3: Bool) throws {
        let (store, _) = makeStore()
        try store.report(origin: "https://example.com", header: header)
        #expect(store.h3(for: origin) == h3)
    }

    @Test("a network change keeps only persist=1 alternatives")
    func networkChange() throws {
        let (store, _) = makeStore()
        try store.report(origin: "https://example.com", header: "h3=\":443\"; persist=1, h3=\":8443\"")
        try store.report(origin: "https://example.org", header: "h3=\":443\"")
        #expect(store.networkChanged() == 2)
        #expect(store.alternatives(for: origin).map(\.port) == [443])
        #expect(!store.h3(for: try AltSvcOrigin(host: "example.org")))
        #expect(store.count == 1)
    }

    @Test(
        "invalid reports throw and change nothing",
        arguments: [
            ("http://example.com", "h3=\":443\"", AltSvcError.Code.invalidOrigin),
            ("https://example.com/x", "h3=\":443\"", .invalidOrigin),
            ("https://example.com", "h3=:443", .malformedHeader),
            ("https://example.com", "", .malformedHeader),
        ])
    func invalidReport(originText: String, header: String, code: AltSvcError.Code) throws {
        let (store, _) = makeStore()
        try store.report(origin: "https://example.com", header: "h3=\":443\"")
        #expect {
            try store.report(origin: originText, header: header)
        } throws: { error in
            (error as? AltSvcError)?.code == code
        }
        #expect(store.h3(for: origin))
    }

    @Test(
        "alternatives a plan cannot use are reported as ignored, with the reason, and not stored",
        arguments: [
            ("h3-29=\":443\"", "draft"), ("h2=\":443\"", "not HTTP/3"), ("h3=\":443\"; ma=0", "stale"),
            ("h3=\"192.0.2.7:443\"", "address literal"), ("h3=\"[2001:db8::7]:443\"", "address literal"),
        ])
    func ignoredAlternatives(header: String, reason: String) throws {
        let (store, _) = makeStore()
        let report = try store.report(origin: "https://example.com", header: header)
        #expect(report.recorded.isEmpty)
        #expect(report.ignored.count == 1)
        #expect(report.ignored.first?.reason.contains(reason) == true, "\(report)")
        #expect(store.count == 0)
    }

    @Test("a report says what it recorded, in header syntax")
    func recordedReport() throws {
        let (store, _) = makeStore()
        let report = try store.report(origin: "https://example.com", header: "h3=\":443\"; ma=60, h3-29=\":443\"")
        #expect(report.recorded.map(\.description) == ["h3=\":443\"; ma=60"])
        #expect(report.ignored.map(\.alternative.description) == ["h3-29=\":443\""])
        #expect(report.scope == .everyone)
        #expect(try store.report(origin: "https://example.com", header: "clear").cleared)
    }

    @Test("a user's report counts for that user only; root's counts for everyone")
    func scopes() throws {
        let (store, _) = makeStore()
        let userReport = try store.report(origin: "https://example.com", header: "h3=\":443\"", scope: AltSvcScope(uid: 1000))
        #expect(userReport.scope == .user(1000))
        #expect(store.h3(for: origin, caller: 1000))
        #expect(!store.h3(for: origin, caller: 1001))
        #expect(!store.h3(for: origin, caller: 0))
        #expect(!store.h3(for: origin))

        try store.report(origin: "https://example.org", header: "h3=\":443\"", scope: AltSvcScope(uid: 0))
        let org = try AltSvcOrigin(host: "example.org")
        #expect(store.h3(for: org, caller: 1000) && store.h3(for: org, caller: 1001) && store.h3(for: org))

        // A user's clear touches only that user's evidence.
        try store.report(origin: "https://example.org", header: "clear", scope: .user(1000))
        #expect(store.h3(for: org, caller: 1000))
        // Both kinds for one user: the user's own first, without duplicates.
        try store.report(origin: "https://example.org", header: "h3=\":8443\", h3=\":443\"", scope: .user(1000))
        #expect(store.alternatives(for: org, caller: 1000).map(\.port) == [8443, 443])
        // An administrative clear forgets every user's evidence.
        #expect(store.clear(org))
        #expect(!store.h3(for: org, caller: 1000))
    }

    @Test("one user cannot push everyone else's evidence out")
    func perUserBound() throws {
        let (store, clock) = makeStore(maxOrigins: 64)
        try store.report(origin: "https://root.example", header: "h3=\":443\"")
        for index in 0..<200 {
            try store.report(origin: "https://h\(index).example", header: "h3=\":443\"", scope: .user(1000))
            clock.advance(1)
        }
        #expect(store.h3(for: try AltSvcOrigin(host: "root.example"), caller: 1000))
        #expect(store.h3(for: try AltSvcOrigin(host: "h199.example"), caller: 1000))
        #expect(store.count <= 1 + 64 / 8)
    }

    @Test("scopes survive a save and load; files without them load as root's")
    func scopesPersist() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("altsvc.json")
        let (store, clock) = makeStore()
        try store.report(origin: "https://example.com", header: "h3=\":443\"", scope: .user(1000))
        try store.save(to: file)
        let restored = AltSvcStore(clock: clock)
        #expect(try restored.load(from: file).loaded == 1)
        #expect(restored.h3(for: origin, caller: 1000))
        #expect(!restored.h3(for: origin, caller: 1001))
    }

    @Test("the number of origins stays bounded")
    func bounded() throws {
        let (store, clock) = makeStore(maxOrigins: 32)
        for index in 0..<200 {
            try store.report(origin: "https://h\(index).example", header: "h3=\":443\"")
            clock.advance(1)
            #expect(store.count <= 32)
        }
        #expect(store.h3(for: try AltSvcOrigin(host: "h199.example")))
        #expect(!store.h3(for: try AltSvcOrigin(host: "h0.example")))
    }

    @Test("purgeExpired removes origins without live alternatives")
    func purge() throws {
        let (store, clock) = makeStore()
        try store.report(origin: "https://a.example", header: "h3=\":443\"; ma=10")
        try store.report(origin: "https://b.example", header: "h3=\":443\"; ma=100")
        clock.advance(50)
        #expect(store.purgeExpired() == 1)
        #expect(store.count == 1)
    }

    @Test("the store round-trips through a file, dropping what expired meanwhile")
    func persistence() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("altsvc.json")
        let (store, clock) = makeStore()
        try store.report(origin: "https://example.com", header: "h3=\":443\"; ma=3600; persist=1, h3=\"alt:8443\"")
        try store.report(origin: "https://[2001:db8::1]:8443", header: "h3=\":8443\"; ma=60")
        try store.save(to: file)
        #expect(try directory.contents() == ["altsvc.json"])
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        clock.advance(120)
        let restored = AltSvcStore(clock: clock)
        #expect(try restored.load(from: file) == CacheLoadResult(loaded: 1, skipped: 1, invalid: 0))
        #expect(
            restored.alternatives(for: origin)
                == [
                    AltSvcAlternative(protocolID: "h3", port: 443, maxAge: 3_480, persist: true),
                    AltSvcAlternative(protocolID: "h3", host: "alt", port: 8443, maxAge: 86_280),
                ]
        )
        #expect(!restored.h3(for: try AltSvcOrigin(parsing: "https://[2001:db8::1]:8443")))
    }

    @Test(
        "a corrupt, truncated or foreign file throws and leaves the store empty",
        arguments: [
            "not json", "{\"format\":\"discoverd.altsvc\",\"version\":1,\"savedAt\":0,\"payload\":[",
            "{\"format\":\"discoverd.cache\",\"version\":1,\"savedAt\":0,\"payload\":[]}",
        ])
    func corrupt(contents: String) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("altsvc.json")
        try directory.writePrivate(Data(contents.utf8), to: file)
        let (store, _) = makeStore()
        #expect {
            try store.load(from: file)
        } throws: { error in
            (error as? CachePersistenceError)?.code == .corrupt
        }
        #expect(store.count == 0)
    }

    @Test("an origin with an invalid name in the file is counted invalid")
    func invalidOriginInFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("altsvc.json")
        let (store, clock) = makeStore()
        let expires = clock.now() + 100
        let entry = """
            {"alternatives":[{"alternative":{"protocolID":"h3","port":443,"maxAge":100,"persist":false},\
            "expires":\(expires)}],"updated":0}
            """
        let json = """
            {"format":"discoverd.altsvc","version":1,"savedAt":0,"payload":[
              {"origin":"http://bad.example","entry":\(entry)},
              {"origin":"https://good.example:443","entry":\(entry)}
            ]}
            """
        try directory.writePrivate(Data(json.utf8), to: file)
        #expect(try store.load(from: file) == CacheLoadResult(loaded: 1, skipped: 0, invalid: 1))
        #expect(store.h3(for: try AltSvcOrigin(host: "good.example")))
    }
}
