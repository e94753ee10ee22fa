import DiscoverAPI
import DiscoverClient
import Foundation
import LabSupport
import Testing

/// The lab's wide-area DNS-SD zones (Scripts/lab): `sd.lab.test` with static records, `dyn.lab.test` taking UPDATEs
/// signed with the lab's TSIG key.
enum WideAreaLab {
    static let browseZone = "sd.lab.test"
    static let updateZone = "dyn.lab.test"
    /// The lab key (Scripts/lab writes it into Knot's config and the lab env).
    static var key: String {
        ResolverLab.environment?["LAB_TSIG_KEY"]
            ?? "hmac-sha256:discoverd-lab-key:ZGlzY292ZXJkLWxhYi10c2lnLXNlY3JldC0zMmJ5dGU="
    }
    /// Whether Knot serves the wide-area zones (a lab started by an older Scripts/lab does not).
    static let zonesLoaded: Bool = {
        guard DiscoveryLab.isUp else { return false }
        return (try? ResolverLab.kdig(updateZone, "SOA"))?.isEmpty == false
            && (try? ResolverLab.kdig(browseZone, "SOA"))?.isEmpty == false
    }()
    static var shouldRun: Bool { zonesLoaded || ResolverLab.isCI }

    /// A daemon in dlab-a asking Knot directly, with a `[wide-area]` section.
    static func daemon(key: String? = WideAreaLab.key, extra: String = "", arguments: [String] = []) throws
        -> DaemonProcess
    {
        var config = "[wide-area]\nbrowse-domain = \(browseZone)\n\(extra)\n"
        // A key signs only for the domains it is configured for.
        if let key { config += "key = \(updateZone) \(key)\n" }
        return try DiscoveryLab.daemon(config: config, arguments: ["--upstream", ResolverLab.knot] + arguments)
    }

    /// `knsupdate -y KEY` inside dlab-a with `commands` (server and zone are added; `send` is appended).
    static func nsupdate(_ commands: [String]) async throws {
        let script = (["server \(ResolverLab.knot)", "zone \(updateZone)"] + commands + ["send"])
            .joined(separator: "\n")
        let result = try await DiscoveryLab.exec(
            "a", ["sh", "-c", "printf '%s\\n' \"$1\" | knsupdate -y \"$2\"", "nsupdate", script, key])
        guard result.status == 0 else { throw DaemonError("knsupdate failed: \(result.stdout) \(result.stderr)") }
    }

    /// Instance label in presentation form for kdig (spaces as \032).
    static func owner(_ instance: String, _ type: String) -> String {
        instance.replacingOccurrences(of: " ", with: "\\032") + ".\(type).\(updateZone)"
    }
}

@Suite(
    "Wide-area DNS-SD on the lab",
    .enabled(if: WideAreaLab.shouldRun, "lab not up or without sd.lab.test/dyn.lab.test (Scripts/lab up)"))
struct WideAreaLabTests {
    // MARK: - Browse

    @Test func browseResolveTypesAndDomainsInTheStaticZone() async throws {
        let daemon = try WideAreaLab.daemon()
        defer { daemon.stop() }
        let client = DiscoverClient(socketPath: daemon.socketPath)
        defer { Task { await client.close() } }

        // Resolved: the good instances (names as Knot serves them, lowercased); the bad SRV target and the PTR
        // without SRV are left out, and the 1.5 KB TXT (TCP only) is read whole.
        let services = try await client.services(ofType: "_http._tcp", domain: WideAreaLab.browseZone, resolve: true)
        #expect(services.map(\.name) == ["big txt", "web one", "web two"], "\(services)")
        let one = try #require(services.first { $0.name == "web one" })
        #expect(one.host == "web1.sd.lab.test")
        #expect(one.port == 8080)
        #expect(Set(one.addresses) == ["192.0.2.81", "2001:db8::81"])
        #expect(one.txt["path"] == "/one")
        #expect(one.domain == "sd.lab.test")
        #expect(services.first { $0.name == "big txt" }?.txt.count == 6)

        // Not resolved: every PTR of the type.
        let listed = try await client.services(ofType: "_http._tcp", domain: WideAreaLab.browseZone, resolve: false)
        #expect(Set(listed.map(\.name)) == ["big txt", "web one", "web two", "bad target", "ghost"])

        let resolved = try await client.resolveService(name: "web two", type: "_http._tcp", domain: "sd.lab.test")
        #expect(resolved.port == 8081)
        #expect(resolved.addresses == ["192.0.2.82"])
        let notFound = await discoverError { try await client.resolveService(name: "bad target", type: "_http._tcp", domain: "sd.lab.test") }
        #expect(notFound?.code == .notFound)

        #expect(try await client.serviceTypes(domain: "sd.lab.test") == ["_http._tcp", "_ipp._tcp"])
        let domains = try await client.browseDomains()
        #expect(Set(["local", "sd.lab.test", "dyn.lab.test"]).isSubset(of: Set(domains)), "\(domains)")

        // Subtype browse.
        let printers = try await client.call(
            Methods.browse, BrowseParameters(type: "_http._tcp", domain: "sd.lab.test", subtype: "_printer"))
        #expect(printers.services?.map(\.name) == ["web one"])
    }

    @Test func browseWithoutADomainCoversLocalAndTheBrowseDomains() async throws {
        let daemon = try WideAreaLab.daemon()
        defer { daemon.stop() }
        let client = DiscoverClient(socketPath: daemon.socketPath)
        defer { Task { await client.close() } }
        // RFC 6763 §11: no domain means local and the browse domains; the one-shot answer comes once both the
        // link (Avahi) and sd.lab.test (unicast) have said all-for-now.
        let reply = try await client.call(Methods.browse, BrowseParameters(type: "_http._tcp"))
        let unicast = (reply.services ?? []).filter { $0.domain == WideAreaLab.browseZone }
        #expect(Set(unicast.map(\.name)) == ["big txt", "web one", "web two", "bad target", "ghost"], "\(reply)")
        #expect((reply.services ?? []).allSatisfy { $0.domain == "local" || $0.domain == WideAreaLab.browseZone })
    }

    // MARK: - Registration

    @Test func advertiseWritesExactlyItsRecordsAndWithdrawDeletesThem() async throws {
        let daemon = try WideAreaLab.daemon()
        defer { daemon.stop() }
        let client = DiscoverClient(socketPath: daemon.socketPath)
        defer { Task { await client.close() } }
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("wa reg")
        let ad = try await client.advertise(
            name: name, type: type, port: 4242, txt: ["path": "/x"], subtypes: ["_printer"],
            domain: WideAreaLab.updateZone, host: "target.\(WideAreaLab.updateZone)")
        #expect(ad.name == name)
        let owner = WideAreaLab.owner(name, type)
        #expect(try ResolverLab.kdig("\(type).dyn.lab.test", "PTR") == [owner.lowercased() + "."])
        #expect(try ResolverLab.kdig("_printer._sub.\(type).dyn.lab.test", "PTR") == [owner.lowercased() + "."])
        #expect(try ResolverLab.kdig(owner, "SRV") == ["0 0 4242 target.dyn.lab.test."])
        #expect(try ResolverLab.kdig(owner, "TXT") == ["\"path=/x\""])

        try await client.withdraw(id: ad.id)
        #expect(await eventually(timeout: .seconds(10)) { (try? ResolverLab.kdig(owner, "SRV"))?.isEmpty == true })
        #expect(try ResolverLab.kdig("\(type).dyn.lab.test", "PTR").isEmpty)
        #expect(try ResolverLab.kdig(owner, "TXT").isEmpty)
    }

    @Test func ownHostIsPublishedWithAddressesAndClosingTheConnectionDeletesAll() async throws {
        let daemon = try WideAreaLab.daemon()
        defer { daemon.stop() }
        let client = DiscoverClient(socketPath: daemon.socketPath)
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("wa host")
        let ad = try await client.advertise(name: name, type: type, port: 80, domain: WideAreaLab.updateZone)
        let owner = WideAreaLab.owner(name, type)
        let srv = try ResolverLab.kdig(owner, "SRV")
        let target = try #require(srv.first?.split(separator: " ").last.map(String.init), "SRV: \(srv)")
        #expect(target.hasSuffix(".dyn.lab.test."))
        #expect(try ResolverLab.kdig(target, "A").contains(DiscoveryLab.environment?["LAB_A_IP4"] ?? "192.0.2.1"))
        #expect(try ResolverLab.kdig(target, "AAAA").allSatisfy { !$0.lowercased().hasPrefix("fe80") })
        // The TXT of an instance without attributes is one empty string (RFC 6763 §6.1).
        #expect(try ResolverLab.kdig(owner, "TXT") == ["\"\""])
        ad.withdraw()
        await client.close()
        #expect(await eventually(timeout: .seconds(10)) { (try? ResolverLab.kdig(owner, "SRV"))?.isEmpty == true })
        #expect(try ResolverLab.kdig(target, "A").isEmpty)
    }

    @Test func knsupdateRecordsAreBrowsedAndANameTheyHoldIsRenamed() async throws {
        let daemon = try WideAreaLab.daemon()
        defer { daemon.stop() }
        let client = DiscoverClient(socketPath: daemon.socketPath)
        defer { Task { await client.close() } }
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("taken")
        let owner = WideAreaLab.owner(name, type)
        let recorder = BrowseRecorder(client.browse(type, domain: WideAreaLab.updateZone, resolve: true))
        defer { recorder.cancel() }
        #expect(await recorder.waitFor { $0 == .allForNow } != nil)
        try await WideAreaLab.nsupdate([
            "update add \(type).dyn.lab.test. 5 PTR \(owner).",
            "update add \(owner). 5 SRV 0 0 9 peer.dyn.lab.test.",
            "update add \(owner). 5 TXT \"by=knsupdate\"",
            "update add peer.dyn.lab.test. 5 A 192.0.2.77",
        ])
        defer { Task { try? await WideAreaLab.nsupdate(["update delete \(owner).", "update delete \(type).dyn.lab.test."]) } }
        // Found by the browse when the TTL of the empty answer runs out (polls are at least 10 s apart).
        let found = await recorder.waitFor(timeout: .seconds(40)) { $0.service?.name.lowercased() == name.lowercased() }
        let service = try #require(found.map { recorder.all[$0].service! }, "events: \(recorder.all)")
        #expect(service.port == 9)
        #expect(service.addresses == ["192.0.2.77"])
        #expect(service.txt["by"] == "knsupdate")

        // Our registration of the same name finds it taken (RFC 2136 prerequisite) and takes the next name.
        let ad = try await client.advertise(name: name, type: type, port: 1, domain: WideAreaLab.updateZone, host: "x.dyn.lab.test")
        #expect(ad.name == name + " (2)")
        #expect(try ResolverLab.kdig(owner, "SRV") == ["0 0 9 peer.dyn.lab.test."], "the other owner's record is kept")
        try await client.withdraw(id: ad.id)
        #expect(await eventually(timeout: .seconds(10)) {
            (try? ResolverLab.kdig(WideAreaLab.owner(name + " (2)", type), "SRV"))?.isEmpty == true
        })
        #expect(try ResolverLab.kdig(owner, "SRV") == ["0 0 9 peer.dyn.lab.test."], "withdraw leaves others alone")
    }

    // MARK: - Failures

    @Test func aWrongKeyIsAnErrorNamingTheRcodeAndRegistersNothing() async throws {
        let daemon = try WideAreaLab.daemon(key: "hmac-sha256:discoverd-lab-key:d3Jvbmctc2VjcmV0")
        defer { daemon.stop() }
        let client = DiscoverClient(socketPath: daemon.socketPath)
        defer { Task { await client.close() } }
        let type = DiscoveryLab.uniqueType()
        let error = await discoverError {
            try await client.advertise(name: "bad key", type: type, port: 1, domain: WideAreaLab.updateZone)
        }
        let message = error?.message ?? ""
        #expect(message.contains("BADSIG") || message.contains("NOTAUTH"), "\(String(describing: error))")
        #expect(try ResolverLab.kdig("\(type).dyn.lab.test", "PTR").isEmpty)

        let noKey = try WideAreaLab.daemon(key: nil)
        defer { noKey.stop() }
        let other = DiscoverClient(socketPath: noKey.socketPath)
        defer { Task { await other.close() } }
        let missing = await discoverError {
            try await other.advertise(name: "no key", type: type, port: 1, domain: WideAreaLab.updateZone)
        }
        #expect(missing?.code == .invalidParameter, "\(String(describing: missing))")
    }

    @Test func anUnsignedReplyIsRejectedAndADroppingServerIsRetriedThenAClearError() async throws {
        let faults = try ResolverLab.faults
        let daemon = try WideAreaLab.daemon(extra: "update-server = \(ResolverLab.fault)")
        defer { daemon.stop() }
        let client = DiscoverClient(socketPath: daemon.socketPath)
        defer { Task { await client.close() } }
        let type = DiscoveryLab.uniqueType()
        defer { faults.clear(WideAreaLab.updateZone, qtype: "SOA") }

        // A NOERROR reply without TSIG is not believed (RFC 8945 §5.3).
        _ = try faults.request(["cmd": "set", "name": WideAreaLab.updateZone, "mode": "rcode", "rcode": 0, "qtype": "SOA"])
        let unsigned = await discoverError {
            try await client.advertise(name: "unsigned", type: type, port: 1, domain: WideAreaLab.updateZone, host: "x.dyn.lab.test")
        }
        #expect(unsigned?.message.contains("not signed") == true, "\(String(describing: unsigned))")

        try faults.set(WideAreaLab.updateZone, "drop", qtype: "SOA")
        let before = try faults.count(WideAreaLab.updateZone, qtype: "SOA", transport: "tcp")
        let dropped = await discoverError {
            try await client.advertise(name: "dropped", type: type, port: 1, domain: WideAreaLab.updateZone, host: "x.dyn.lab.test")
        }
        #expect(dropped?.message.contains("did not answer") == true, "\(String(describing: dropped))")
        #expect(try faults.count(WideAreaLab.updateZone, qtype: "SOA", transport: "tcp") - before >= 2, "retried")
        #expect(try ResolverLab.kdig("\(type).dyn.lab.test", "PTR").isEmpty)
    }

    @Test func registrationsLeftByACrashAreDeletedAtTheNextStart() async throws {
        let state = TemporaryDirectory("wa-state")
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("crash")
        let owner = WideAreaLab.owner(name, type)
        do {
            let daemon = try WideAreaLab.daemon(arguments: ["--state-dir", state.path])
            let client = DiscoverClient(socketPath: daemon.socketPath)
            // Kept alive: releasing the advertisement would withdraw it.
            let ad = try await client.advertise(
                name: name, type: type, port: 7, domain: WideAreaLab.updateZone, host: "x.dyn.lab.test")
            let srv = try ResolverLab.kdig(owner, "SRV")
            #expect(srv == ["0 0 7 x.dyn.lab.test."], "\(srv) \(owner)\n\(daemon.log)")
            kill(daemon.pid, SIGKILL)
            _ = daemon.waitForExit(timeout: 10)
            withExtendedLifetime(ad) {}
            await client.close()
        }
        #expect(try ResolverLab.kdig(owner, "SRV") == ["0 0 7 x.dyn.lab.test."], "SIGKILL leaves the records")
        let next = try WideAreaLab.daemon(arguments: ["--state-dir", state.path])
        defer { next.stop() }
        #expect(await eventually(timeout: .seconds(10)) { (try? ResolverLab.kdig(owner, "SRV"))?.isEmpty == true })
        #expect(try ResolverLab.kdig("\(type).dyn.lab.test", "PTR").isEmpty)
    }

    // MARK: - CLI

    @Test func cliBrowsesDomainsAndAdvertisesInUnicastDomains() async throws {
        let daemon = try WideAreaLab.daemon()
        defer { daemon.stop() }
        let env = ["DISCOVERD_SOCKET": daemon.socketPath]
        let browse = try runCommand(
            [BuiltProducts.discover, "browse", "_http._tcp", "--domain", "sd.lab.test", "--once", "--resolve"],
            environment: env)
        #expect(browse.status == 0)
        #expect(browse.stdout.contains("web one") && browse.stdout.contains("web1.sd.lab.test:8080"), "\(browse.stdout)")
        let domains = try runCommand([BuiltProducts.discover, "domains"], environment: env)
        #expect(domains.stdout.split(separator: "\n").contains("dyn.lab.test"), "\(domains.stdout)")

        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("cli")
        let advertise = try BackgroundCommand([
            "/usr/bin/env", "DISCOVERD_SOCKET=\(daemon.socketPath)", BuiltProducts.discover, "advertise", name, type,
            "8088", "k=v", "--domain", "dyn.lab.test", "--host", "cli.dyn.lab.test",
        ])
        #expect(await advertise.line { $0.hasPrefix("registered") } != nil, "\(advertise.stderr)")
        let owner = WideAreaLab.owner(name, type)
        #expect(try ResolverLab.kdig(owner, "SRV") == ["0 0 8088 cli.dyn.lab.test."])
        await advertise.stop()
        #expect(await eventually(timeout: .seconds(10)) { (try? ResolverLab.kdig(owner, "SRV"))?.isEmpty == true })
    }
}
