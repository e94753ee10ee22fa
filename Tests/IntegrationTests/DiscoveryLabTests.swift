import DNSSDModel
import DiscoverClient
import Foundation
import LabSupport
import Testing

/// DNS-SD end to end: the real discoverd inside lab host a (on a's avahi-daemon), driven through `DiscoverClient`
/// and the `discover` CLI, against real peers on lab host b (avahi-publish, avahi-browse, python-zeroconf).
///
/// Every test uses service types and names of its own, so the tests run in parallel; the ones that stop a's
/// avahi-daemon hold ``AvahiGate`` exclusively (and are `.serialized`). Under CI=true a missing lab fails.
@Suite(
    "Discovery on the lab",
    .enabled(if: DiscoveryLab.shouldRun, "network lab not up (Scripts/lab up); CI=true requires it"))
struct DiscoveryLabTests {
    /// A daemon in dlab-a with a client, avahi running.
    struct Fixture {
        let daemon: DaemonProcess
        let client: DiscoverClient

        init(config: String? = nil) async throws {
            daemon = try DiscoveryLab.daemon(config: config)
            client = DiscoverClient(socketPath: daemon.socketPath)
            try await DiscoveryLab.waitForAvahi(client)
        }

        /// Stops the daemon; it must exit cleanly.
        func stop(sourceLocation: SourceLocation = #_sourceLocation) async {
            await client.close()
            let status = daemon.stop()
            #expect(status == 0, "discoverd exit status; log:\n\(daemon.log)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Browse

    @Test func browseSeesAPeerWithTXTPortHostAndAddresses() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        let env = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Peer B")
        let recorder = BrowseRecorder(fixture.client.browse(type, resolve: true))
        defer { recorder.cancel() }
        #expect(await recorder.waitFor { $0 == .allForNow } != nil, "allForNow before any peer exists")

        let peer = try await LabPeer.avahiPublish(name, type, port: 4711, txt: ["path=/x", "v=1", "flag"])
        // The instance counts as found once resolved: host, port and both address families.
        let resolved = await recorder.waitFor { change in
            guard let service = change.service, service.name == name, !change.isRemoved else { return false }
            return service.port != nil && service.addresses.contains(env["LAB_B_IP4"] ?? "192.0.2.2")
                && service.addresses.contains { $0.contains(":") }
        }
        let service = try #require(resolved.map { recorder.all[$0].service! }, "browse events: \(recorder.all)")
        #expect(recorder.all.first { $0.service?.name == name }?.isAdded == true, "first event is added")
        // Seen over IPv4 and IPv6: still one instance, added once.
        #expect(recorder.all.filter { $0.is("added", name) }.count == 1, "added once: \(recorder.all)")
        #expect(service.type == type)
        #expect(service.domain == "local")
        #expect(service.port == 4711)
        #expect(service.host == "lab-b.local")
        #expect(service.interfaces == ["eth0"])
        #expect(service.txt == ["path": "/x", "v": "1", "flag": nil], "a boolean attribute is null, not \"\"")
        #expect(service.txtRaw == nil, "all-UTF-8 TXT has no txtRaw")
        // Avahi on b publishes 192.0.2.2, 2001:db8::2 and its fe80:: address; a link-local one carries its zone.
        for address in service.addresses where address.lowercased().hasPrefix("fe80:") {
            #expect(address.hasSuffix("%eth0"), "link-local \(address) carries %eth0")
        }
        #expect(
            service.addresses.contains { $0 == (env["LAB_B_IP6"] ?? "2001:db8::2") || $0.hasPrefix("fe80:") },
            "an IPv6 address of b in \(service.addresses)")

        // A second subscriber of the same type (sharing the Avahi browser) gets what is already known at once.
        let late = BrowseRecorder(fixture.client.browse(type, resolve: true))
        defer { late.cancel() }
        let lateAdded = await late.waitFor(timeout: .seconds(5)) { $0.is("added", name) }
        #expect(lateAdded != nil, "a late subscriber sees the known instance as added: \(late.all)")
        #expect(await late.waitFor(timeout: .seconds(5)) { $0 == .allForNow } != nil, "and allForNow: \(late.all)")
        #expect(try await fixture.client.status().subscriptions == 2)

        let mark = recorder.all.count - 1
        let lateMark = late.all.count - 1
        await peer.stop()
        #expect(
            await recorder.waitFor(after: mark) { $0.is("removed", name) } != nil,
            "removed after the publisher was killed; events: \(recorder.all)")
        #expect(await late.waitFor(after: lateMark) { $0.is("removed", name) } != nil, "late subscriber: \(late.all)")
        #expect(recorder.failure == nil)
        recorder.cancel()
        late.cancel()
        #expect(
            try await eventually { try await fixture.client.status().subscriptions == 0 },
            "cancelled browses end in the daemon")
        await fixture.stop()
    }

    @Test func txtChangeIsReportedAsChanged() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("ZC Update")
        let recorder = BrowseRecorder(fixture.client.browse(type, resolve: true))
        defer { recorder.cancel() }
        let peer = try LabPeer(
            host: "b",
            [
                DiscoveryLab.python, DiscoveryLab.zcpeer, "publish", "--name", name, "--type", type, "--port", "8080",
                "--txt", "v=1", "--host", "zc" + LabEnvironment.randomHex(), "--update-after", "3",
            ])
        let before = await recorder.waitFor { change in
            change.service?.name == name && change.service?.txt["v"] == "1" && !change.isRemoved
        }
        #expect(before != nil, "the peer is seen with v=1; events: \(recorder.all); peer output:\n\(peer.output)")
        #expect(before.map { recorder.all[$0].service?.txt["updated"] } == .some(nil))
        let changed = await recorder.waitFor(after: before ?? -1) { change in
            change.isChanged && change.service?.name == name && change.service?.txt["updated"] == "1"
        }
        #expect(changed != nil, "changed with updated=1; events: \(recorder.all); peer output:\n\(peer.output)")
        #expect(
            !recorder.all.contains { $0.is("removed", name) }, "a TXT update is a change, not removed+added")
        await peer.stop()
        await fixture.stop()
    }

    // MARK: - python-zeroconf interop

    @Test func nonUTF8TXTFromZeroconfComesAsTxtRaw() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        let env = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("ZC Binary")
        // zcpeer takes TXT values as text; this wrapper lets `hex:` values through as raw bytes.
        let wrapper = """
            import sys; sys.path.insert(0, \(pythonString(DiscoveryLab.repository + "/lab")))
            import zcpeer
            def parse_txt(items):
                props = {}
                for item in items or []:
                    k, sep, v = item.partition("=")
                    props[k] = bytes.fromhex(v[4:]) if v.startswith("hex:") else (v if sep else None)
                return props
            zcpeer.parse_txt = parse_txt
            sys.exit(zcpeer.main(sys.argv[1:]))
            """
        let host = "zc" + LabEnvironment.randomHex()
        // The peer publishes b's IPv4 and IPv6 link-local addresses: a link-local one must come with its zone.
        let linkLocal = try await DiscoveryLab.linkLocalAddressOfB()
        let peer = try LabPeer(
            host: "b",
            [
                DiscoveryLab.python, "-c", wrapper, "publish", "--name", name, "--type", type, "--port", "9099",
                "--txt", "bin=hex:fffe00c3", "--txt", "path=/zc", "--host", host,
                "--address", env["LAB_B_IP4"] ?? "192.0.2.2", "--address", linkLocal,
            ])
        #expect(await peer.waitForOutput(containing: "ready"), "zeroconf peer output:\n\(peer.output)")

        let found = try await eventuallyValue(timeout: .seconds(15)) {
            try await fixture.client.services(ofType: type, resolve: true, timeoutMs: 3000)
                .first { $0.name == name && $0.port != nil && !$0.addresses.isEmpty }
        }
        let service = try #require(found, "zeroconf peer found by a one-shot browse")
        #expect(service.port == 9099)
        #expect(service.host == host + ".local")
        #expect(
            Set(service.addresses) == [env["LAB_B_IP4"] ?? "192.0.2.2", linkLocal + "%eth0"],
            "IPv4 and the link-local address with %eth0: \(service.addresses)")
        #expect(service.txt["path"] == "/zc")
        #expect(service.txt["bin"] == nil, "a non-UTF-8 value is not in txt (docs/API.md: UTF-8 values only)")
        let raw = try #require(service.txtRaw, "txtRaw present when a value is not UTF-8")
        let expected = [Array("bin=".utf8) + [0xFF, 0xFE, 0x00, 0xC3], Array("path=/zc".utf8)]
        #expect(Set(raw) == Set(expected), "txtRaw \(raw)")

        // Resolve gives the same TXT.
        let resolved = try await fixture.client.resolveService(name: name, type: type, timeoutMs: 5000)
        #expect(resolved.txtRaw.map(Set.init) == Set(expected))
        #expect(resolved.port == 9099)
        await peer.stop()
        await fixture.stop()
    }

    @Test func zeroconfFindsOurAdvertisement() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        let env = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Ours A")
        let ad = try await fixture.client.advertise(
            name: name, type: type, port: 5151, txt: ["role": "test", "note": "grüße", "flag": nil],
            subtypes: ["_printer"])
        #expect(ad.name == name)
        let full = "\(name).\(type).local."
        let entry = try await eventuallyValue(timeout: .seconds(20)) {
            try await DiscoveryLab.zeroconfBrowseFromB(type, seconds: 2).first { $0["name"] as? String == full }
        }
        let seen = try #require(entry, "python-zeroconf on b finds \(full)")
        #expect(seen["port"] as? Int == 5151)
        #expect(seen["server"] as? String == "lab-a.local.")
        #expect((seen["addresses"] as? [String])?.contains(env["LAB_A_IP4"] ?? "192.0.2.1") == true, "\(seen)")
        let txt = seen["txt"] as? [String: Any]
        #expect(txt?["role"] as? String == "test", "\(seen)")
        #expect(txt?["note"] as? String == "grüße", "UTF-8 value: \(seen)")
        #expect(txt?["flag"] is NSNull, "a boolean attribute is `flag`, not `flag=` (RFC 6763 §6.4): \(seen)")
        await DiscoveryLab.expectOnB("_printer._sub." + type, "avahi-browse on b finds it by subtype") {
            $0.contains { $0.name == name && $0.port == 5151 }
        }
        // Without a name, the advertisement takes the host name.
        let unnamed = try await fixture.client.advertise(type: type, port: 5152)
        #expect(unnamed.name == (env["LAB_A_HOSTNAME"] ?? "lab-a"), "default name: \(unnamed.name)")
        unnamed.withdraw()
        ad.withdraw()
        await fixture.stop()
    }

    // MARK: - One-shot calls

    @Test func oneShotBrowseResolveTypesAndDomains() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let names = [DiscoveryLab.uniqueName("One"), DiscoveryLab.uniqueName("Two")]
        let peers = [
            try await LabPeer.avahiPublish(names[0], type, port: 1001, txt: ["n=1"]),
            try await LabPeer.avahiPublish(names[1], type, port: 1002, txt: ["n=2"]),
        ]

        // Without `more`: one reply with the set (retried: a cold cache may answer all-for-now early).
        let set = try await eventuallyValue(timeout: .seconds(15)) { () -> [DNSSDService]? in
            let services = try await fixture.client.services(ofType: type, resolve: true, timeoutMs: 5000)
            return Set(services.map(\.name)) == Set(names) && services.allSatisfy { $0.port != nil } ? services : nil
        }
        let services = try #require(set, "one-shot browse returns both peers, resolved")
        #expect(services.map(\.port).sorted { ($0 ?? 0) < ($1 ?? 0) } == [1001, 1002])
        #expect(services.first { $0.name == names[1] }?.txt == ["n": "2"])

        // Browse restricted to an interface: eth0 (the lab link of a) finds them; an unknown one is refused.
        let onEth0 = try await eventuallyValue(timeout: .seconds(10)) { () -> [BrowseReply]? in
            let reply = try await fixture.client.call(
                Methods.browse, BrowseParameters(type: type, interface: "eth0", resolve: false, timeoutMs: 3000))
            return Set((reply.services ?? []).map(\.name)) == Set(names) ? [reply] : nil
        }
        #expect(onEth0 != nil, "Browse with interface eth0 finds both")
        let noSuchInterface = await discoverError {
            try await fixture.client.call(
                Methods.browse, BrowseParameters(type: type, interface: "nosuch0", timeoutMs: 500))
        }
        #expect(noSuchInterface?.code == .invalidParameter, "unknown interface: \(String(describing: noSuchInterface))")
        #expect(noSuchInterface?.parameters["parameter"]?.stringValue == "interface")

        let one = try await fixture.client.resolveService(name: names[0], type: type, timeoutMs: 5000)
        #expect(one.name == names[0])
        #expect(one.port == 1001)
        #expect(one.host == "lab-b.local")
        #expect(one.txt == ["n": "1"])
        #expect(!one.addresses.isEmpty)

        let missing = await discoverError {
            try await fixture.client.resolveService(
                name: DiscoveryLab.uniqueName("Absent"), type: type, timeoutMs: 1500)
        }
        #expect(
            missing?.code == .notFound || missing?.code == .discoveryTimeout,
            "resolving an absent instance: \(String(describing: missing))")

        let types = try await eventuallyValue(timeout: .seconds(15)) {
            let types = try await fixture.client.serviceTypes()
            return types.contains(type) ? types : nil
        }
        #expect(types != nil, "BrowseTypes lists \(type)")

        let domains = try await fixture.client.browseDomains()
        #expect(domains.contains("local"), "BrowseDomains: \(domains)")

        // The CLI says the same.
        let cliTypes = try await SpawnedProcess.run([
            BuiltProducts.discover, "types", "--socket", fixture.daemon.socketPath,
        ])
        #expect(cliTypes.status == 0, "discover types: \(cliTypes.stderr)")
        #expect(cliTypes.stdout.split(separator: "\n").contains { $0 == type }, "discover types: \(cliTypes.stdout)")
        let cliDomains = try await SpawnedProcess.run([
            BuiltProducts.discover, "domains", "--socket", fixture.daemon.socketPath,
        ])
        #expect(cliDomains.stdout.split(separator: "\n").contains("local"), "discover domains: \(cliDomains.stdout)")
        for peer in peers { await peer.stop() }
        await fixture.stop()
    }

    // MARK: - Advertising

    @Test func localCollisionRenamesTheLaterAdvertisement() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Same")
        let first = try await fixture.client.advertise(name: name, type: type, port: 2001)
        let second = try await fixture.client.advertise(name: name, type: type, port: 2002)
        #expect(first.name == name)
        #expect(second.name == name + " #2", "the later advertisement is renamed and says so")
        #expect(first.id != second.id)

        // The CLI prints the final name; `flag` is a boolean TXT attribute, published without '='.
        let cli = try BackgroundCommand([
            BuiltProducts.discover, "advertise", "--socket", fixture.daemon.socketPath, name, type, "2003",
            "flag", "k=v",
        ])
        let line = await cli.line { $0.hasPrefix("registered") }
        #expect(line == "registered \"\(name) #3\" \(type) port 2003", "CLI output: \(cli.stdout) \(cli.stderr)")

        await DiscoveryLab.expectOnB(type, "b sees all three") { entries in
            Set(entries.map(\.name)) == [name, name + " #2", name + " #3"]
                && entries.contains { $0.name == name + " #3" && Set($0.txt) == ["flag", "k=v"] }
        }
        await cli.stop()
        await DiscoveryLab.expectOnB(type, "the CLI's advertisement is withdrawn when it exits") { entries in
            Set(entries.map(\.name)) == [name, name + " #2"]
        }
        first.withdraw()
        second.withdraw()
        await fixture.stop()
    }

    @Test func collisionWithAPeerRenamesOurs() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Taken")
        let peer = try await LabPeer.avahiPublish(name, type, port: 3001)
        let ad = try await fixture.client.advertise(name: name, type: type, port: 3002)
        // Avahi on a finds b's record while probing: the first reported name is already the renamed one, or
        // `registered` under the name is followed by `renamed`.
        if ad.name == name {
            let next = try await withTimeout(.seconds(15)) { () -> AdvertiseReply? in
                var iterator = ad.events.makeAsyncIterator()
                return try await iterator.next()
            }
            #expect(next??.event == .renamed, "a renamed event follows")
        }
        #expect(ad.name == name + " #2", "our advertisement gives way to b's: \(ad.name)")
        await DiscoveryLab.expectOnB(type, "b sees its own and our renamed instance") { entries in
            Set(entries.map(\.name)) == [name, name + " #2"] && entries.contains { $0.port == 3002 }
        }
        ad.withdraw()
        await peer.stop()
        await fixture.stop()
    }

    @Test func closingTheConnectionWithdraws() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let kept = DiscoveryLab.uniqueName("Kept")
        let withdrawn = DiscoveryLab.uniqueName("Withdrawn")
        let dropped = DiscoveryLab.uniqueName("Dropped")
        let keptAd = try await fixture.client.advertise(name: kept, type: type, port: 4001, txt: ["k": "1"])
        let withdrawnAd = try await fixture.client.advertise(name: withdrawn, type: type, port: 4002)
        var droppedAd: ServiceAdvertisement? = try await fixture.client.advertise(name: dropped, type: type, port: 4003)
        #expect(droppedAd?.name == dropped)
        await DiscoveryLab.expectOnB(type, "b sees the three advertisements") {
            Set($0.map(\.name)) == [kept, withdrawn, dropped]
        }
        #expect(try await fixture.client.status().registrations == 3)

        withdrawnAd.withdraw()
        droppedAd = nil
        await DiscoveryLab.expectOnB(type, "withdrawn and released advertisements vanish from b") {
            Set($0.map(\.name)) == [kept]
        }
        #expect(try await eventually { try await fixture.client.status().registrations == 1 })
        let entry = try await DiscoveryLab.browseFromB(type).first { $0.name == kept }
        #expect(entry?.port == 4001)
        #expect(entry?.txt == ["k=1"])
        #expect(entry?.host == "lab-a.local")
        keptAd.withdraw()
        await fixture.stop()
    }

    @Test func updateAndWithdrawByIdFromAnotherConnection() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("ById")
        let ad = try await fixture.client.advertise(name: name, type: type, port: 4101, txt: ["v": "1"])
        await DiscoveryLab.expectOnB(type, "b sees it") { $0.contains { $0.name == name && $0.txt == ["v=1"] } }

        // UpdateAdvertisement from another connection of the owner: b sees the new TXT.
        let other = DiscoverClient(socketPath: fixture.daemon.socketPath)
        try await other.updateAdvertisement(id: ad.id, txt: ["v": "2", "extra": ""])
        await DiscoveryLab.expectOnB(type, "b sees the updated TXT") { entries in
            entries.contains { $0.name == name && Set($0.txt) == ["v=2", "extra="] }
        }
        let badUpdate = await discoverError { try await other.updateAdvertisement(id: ad.id, txt: ["a=b": "1"]) }
        #expect(
            badUpdate?.code == .invalidParameter, "UpdateAdvertisement with a bad key: \(String(describing: badUpdate))"
        )
        let unknown = await discoverError { try await other.updateAdvertisement(id: "999999", txt: ["v": "3"]) }
        #expect(unknown?.code == .notFound, "UpdateAdvertisement of an unknown id: \(String(describing: unknown))")

        try await other.withdraw(id: ad.id)
        let events = try await withTimeout(.seconds(10)) { () -> [AdvertiseReply] in
            var events: [AdvertiseReply] = []
            for try await event in ad.events { events.append(event) }
            return events
        }
        #expect(
            events?.last?.event == .withdrawn, "the Advertise call ends with withdrawn: \(String(describing: events))")
        #expect(events?.last?.id == ad.id)
        await DiscoveryLab.expectOnB(type, "gone from b") { !$0.contains { $0.name == name } }
        let again = await discoverError { try await other.withdraw(id: ad.id) }
        #expect(again?.code == .notFound, "withdrawing twice: \(String(describing: again))")
        await other.close()
        await fixture.stop()
    }

    @Test func onlyTheOwnerOrRootMayWithdraw() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let socket = fixture.daemon.socketPath
        let type = DiscoveryLab.uniqueType()
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BuiltProducts.discover]

        // Root's advertisement: nobody may not withdraw it.
        let rootName = DiscoveryLab.uniqueName("Root's")
        let rootAd = try await fixture.client.advertise(name: rootName, type: type, port: 4201)
        let denied = try await SpawnedProcess.run(
            asNobody + ["call", "--socket", socket, "io.discoverd.Discovery.Withdraw", #"{"id":"\#(rootAd.id)"}"#])
        #expect(
            denied.status == 2, "nobody withdrawing root's: status \(denied.status) \(denied.stdout) \(denied.stderr)")
        #expect(denied.stderr.lowercased().contains("permission"), "stderr: \(denied.stderr)")
        let deniedUpdate = try await SpawnedProcess.run(
            asNobody + [
                "call", "--socket", socket, "io.discoverd.Discovery.UpdateAdvertisement",
                #"{"id":"\#(rootAd.id)","txt":{"a":"b"}}"#,
            ])
        #expect(deniedUpdate.status == 2, "nobody updating root's: \(deniedUpdate.stderr)")
        #expect(try await fixture.client.status().registrations == 1, "root's advertisement is still there")

        // nobody's advertisements: withdrawn by nobody, and by root.
        func nobodyAdvertises(_ name: String, port: Int) async throws -> (BackgroundCommand, String) {
            let parameters = #"{"name":"\#(name)","type":"\#(type)","port":\#(port)}"#
            let command = try BackgroundCommand(
                asNobody + ["call", "--socket", socket, "--more", "io.discoverd.Discovery.Advertise", parameters])
            let line = await command.line { $0.contains("registered") }
            guard let line, let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let id = object["id"] as? String
            else { throw DaemonError("nobody's Advertise: \(command.stdout) \(command.stderr)") }
            return (command, id)
        }
        let (first, firstID) = try await nobodyAdvertises(DiscoveryLab.uniqueName("Nobody's"), port: 4202)
        let byNobody = try await SpawnedProcess.run(
            asNobody + ["call", "--socket", socket, "io.discoverd.Discovery.Withdraw", #"{"id":"\#(firstID)"}"#])
        #expect(byNobody.status == 0, "nobody withdraws its own: \(byNobody.stderr)")
        #expect(await first.waitForExit() == 0, "nobody's Advertise call ends: \(first.stdout) \(first.stderr)")
        #expect(first.lines.last?.contains("withdrawn") == true, "last reply: \(first.stdout)")

        let (second, secondID) = try await nobodyAdvertises(DiscoveryLab.uniqueName("Nobody's"), port: 4203)
        try await fixture.client.withdraw(id: secondID)
        #expect(await second.waitForExit() == 0, "root withdrew nobody's: \(second.stdout) \(second.stderr)")
        #expect(second.lines.last?.contains("withdrawn") == true, "last reply: \(second.stdout)")
        #expect(try await fixture.client.status().registrations == 1)
        rootAd.withdraw()
        await fixture.stop()
    }

    @Test func invalidInputsGetTheirAPIErrorsAndTheDaemonLives() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let fixture = try await Fixture()
        let client = fixture.client
        let type = DiscoveryLab.uniqueType()
        let bigTXT = Dictionary(uniqueKeysWithValues: (0..<40).map { ("k\($0)", String(repeating: "v", count: 240)) })
        let cases: [(String, AdvertiseParameters, DiscoverError.Code, String?)] = [
            ("type _bad", .init(name: "x", type: "_bad", port: 1), .invalidServiceType, nil),
            ("type tcp", .init(name: "x", type: "tcp", port: 1), .invalidServiceType, nil),
            ("type _x._sctp", .init(name: "x", type: "_x._sctp", port: 1), .invalidServiceType, nil),
            ("16-char type", .init(name: "x", type: "_abcdefghijklmnop._tcp", port: 1), .invalidServiceType, nil),
            (
                "64-byte name", .init(name: String(repeating: "n", count: 64), type: type, port: 1),
                .invalidServiceName, nil
            ),
            (
                "64 bytes of é", .init(name: String(repeating: "é", count: 32), type: type, port: 1),
                .invalidServiceName, nil
            ),
            ("TXT key with =", .init(name: "x", type: type, port: 1, txt: ["a=b": "1"]), .invalidParameter, "txt"),
            ("non-ASCII TXT key", .init(name: "x", type: type, port: 1, txt: ["ü": "1"]), .invalidParameter, "txt"),
            ("empty TXT key", .init(name: "x", type: type, port: 1, txt: ["": "1"]), .invalidParameter, "txt"),
            (
                "TXT string of 258 bytes",
                .init(name: "x", type: type, port: 1, txt: ["k": String(repeating: "v", count: 256)]),
                .invalidParameter, "txt"
            ),
            ("TXT of 9800 bytes", .init(name: "x", type: type, port: 1, txt: bigTXT), .invalidParameter, "txt"),
            ("port 70000", .init(name: "x", type: type, port: 70000), .invalidParameter, "port"),
            ("port -1", .init(name: "x", type: type, port: -1), .invalidParameter, "port"),
        ]
        for (label, parameters, code, parameter) in cases {
            let error = await discoverError {
                try await client.advertise(
                    name: parameters.name, type: parameters.type, port: parameters.port, txt: parameters.txt ?? [:])
            }
            #expect(error?.code == code, "\(label): \(String(describing: error))")
            if let parameter {
                #expect(
                    error?.parameters["parameter"]?.stringValue == parameter,
                    "\(label): \(String(describing: error?.parameters))")
            }
            if code == .invalidServiceType {
                #expect(error?.parameters["type"]?.stringValue == parameters.type, "\(label): names the type")
            }
        }
        // Browse is liberal (any name Avahi can report, up to 62 bytes) but still refuses what is no service type.
        for bad in ["_bad", "tcp", "_x._sctp", "_" + String(repeating: "a", count: 63) + "._tcp", "_a b._tcp"] {
            let browse = await discoverError { try await client.services(ofType: bad, timeoutMs: 500) }
            #expect(browse?.code == .invalidServiceType, "Browse \(bad): \(String(describing: browse))")
        }
        let resolve = await discoverError {
            try await client.resolveService(name: String(repeating: "n", count: 64), type: type, timeoutMs: 500)
        }
        #expect(resolve?.code == .invalidServiceName, "Resolve with a 64-byte name: \(String(describing: resolve))")

        // The limits themselves are accepted: 15-character type, 63-byte name, 255-byte TXT string.
        let limitType = "_dt" + String(LabEnvironment.randomHex().prefix(8)) + "abcd._udp"
        let limitName = String(repeating: "m", count: 55) + LabEnvironment.randomHex()
        let limit = try await client.advertise(
            name: limitName, type: limitType, port: 65535, txt: ["k": String(repeating: "v", count: 253)])
        #expect(limit.name == limitName)
        limit.withdraw()

        // Advertise needs `more`; the typed call without it is refused.
        let once = await discoverError {
            try await client.call(Methods.advertise, AdvertiseParameters(name: "x", type: type, port: 1))
        }
        #expect(once?.code == .expectedMore, "Advertise without more: \(String(describing: once))")

        #expect(fixture.daemon.isRunning, "the daemon is alive")
        #expect(try await client.status().registrations <= 1)
        await fixture.stop()
    }

    // MARK: - Static services

    @Test func staticServicesFollowTheirFiles() async throws {
        let hold = await AvahiGate.shared.enterShared()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let directory = TemporaryDirectory("dlt-services")
        let fixture = try await Fixture(config: "[daemon]\nservices-dir = \(directory.path)\n")
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Static")
        let file = directory.path + "/lab.service"
        func write(port: Int, version: Int) throws {
            let text = "[service]\nname = \(name)\ntype = \(type)\nport = \(port)\n"
            try (text + "txt = version=\(version)\nsubtype = _classic\n").write(
                toFile: file, atomically: true, encoding: .utf8)
        }
        try write(port: 5001, version: 1)
        _ = try await fixture.client.call(Methods.reload, VarlinkEmpty())
        await DiscoveryLab.expectOnB(type, "b sees the static service; log:\n\(fixture.daemon.log)") {
            $0.contains { $0.name == name && $0.port == 5001 && $0.txt == ["version=1"] }
        }
        await DiscoveryLab.expectOnB("_classic._sub." + type, "b finds it by its subtype") {
            $0.contains { $0.name == name }
        }

        try write(port: 5002, version: 2)
        kill(fixture.daemon.pid, SIGHUP)
        await DiscoveryLab.expectOnB(type, "b sees the edited service after SIGHUP") { entries in
            entries.contains { $0.name == name && $0.port == 5002 && $0.txt == ["version=2"] }
                && !entries.contains { $0.port == 5001 }
        }

        // An Avahi XML file (as in /etc/avahi/services) is read unchanged: two services, a boolean TXT key.
        let xmlName = DiscoveryLab.uniqueName("AvahiXML")
        let xml = """
            <?xml version="1.0" standalone='no'?>
            <!DOCTYPE service-group SYSTEM "avahi-service.dtd">
            <service-group>
              <name>\(xmlName)</name>
              <service><type>\(type)</type><port>5003</port><txt-record>flag</txt-record></service>
              <service protocol="ipv4"><type>\(DiscoveryLab.uniqueType())</type><port>5004</port></service>
            </service-group>
            """
        try xml.write(toFile: directory.path + "/avahi.service", atomically: true, encoding: .utf8)
        _ = try await fixture.client.call(Methods.reload, VarlinkEmpty())
        await DiscoveryLab.expectOnB(type, "b sees the XML file's service; log:\n\(fixture.daemon.log)") {
            $0.contains { $0.name == xmlName && $0.port == 5003 && $0.txt == ["flag"] }
        }
        try FileManager.default.removeItem(atPath: directory.path + "/avahi.service")

        try FileManager.default.removeItem(atPath: file)
        _ = try await fixture.client.call(Methods.reload, VarlinkEmpty())
        await DiscoveryLab.expectOnB(type, "the removed service is gone from b after Reload") {
            !$0.contains { $0.name == name }
        }
        #expect(try await fixture.client.status().registrations == 0)
        await fixture.stop()
    }

    // MARK: - avahi-daemon going away (host a's avahi is stopped: one test at a time)

    @Suite(.serialized)
    struct AvahiRestarts {
        @Test func avahiRestartIsFollowedByBrowsersAndAdvertisements() async throws {
            let hold = await AvahiGate.shared.enterExclusive()
            defer { hold.release() }
            _ = try DiscoveryLab.require()
            let type = DiscoveryLab.uniqueType()
            let peerName = DiscoveryLab.uniqueName("Survivor")
            let ourName = DiscoveryLab.uniqueName("Ours")
            let staticName = DiscoveryLab.uniqueName("Static")
            let services = TemporaryDirectory("dlt-services")
            try "[service]\nname = \(staticName)\ntype = \(type)\nport = 6003\n"
                .write(toFile: services.path + "/restart.service", atomically: true, encoding: .utf8)
            let fixture = try await Fixture(config: "[daemon]\nservices-dir = \(services.path)\n")
            let client = fixture.client
            let peer = try await LabPeer.avahiPublish(peerName, type, port: 6001)
            let recorder = BrowseRecorder(client.browse(type, resolve: true))
            defer { recorder.cancel() }
            let added = await recorder.waitFor { $0.is("added", peerName) }
            #expect(added != nil, "peer seen before the restart: \(recorder.all)")
            let ad = try await client.advertise(name: ourName, type: type, port: 6002, txt: ["gen": "1"])
            try await client.updateAdvertisement(id: ad.id, txt: ["gen": "2"])
            // Four advertisements of one name: "Dup", "Dup #2" ... "Dup #4". Each keeps its name across the restart.
            let dupName = DiscoveryLab.uniqueName("Dup")
            var dups: [ServiceAdvertisement] = []
            for port in 6011...6014 { dups.append(try await client.advertise(name: dupName, type: type, port: port)) }
            let dupNames = [dupName, dupName + " #2", dupName + " #3", dupName + " #4"]
            #expect(dups.map(\.name) == dupNames)
            await DiscoveryLab.expectOnB(type, "b sees ours (updated) and the static service") { entries in
                entries.contains { $0.name == ourName && $0.txt == ["gen=2"] }
                    && entries.contains { $0.name == staticName }
            }

            try await DiscoveryLab.avahi("stop", "a")
            defer { DiscoveryLab.restoreAvahi("a") }
            let down = try await eventuallyValue(timeout: .seconds(15)) { () -> AvahiState? in
                let state = try await client.status().avahi
                return state == .running ? nil : state
            }
            #expect(down == .connecting || down == .unavailable, "Status.avahi while avahi-daemon is down")
            // Every browse and advertisement stops until it is back: a warning, which `journalctl -p warning` shows.
            #expect(
                fixture.daemon.log.split(separator: "\n").contains { $0.contains(" warning ") && $0.contains("avahi") },
                "avahi-daemon going away is logged at warning; log:\n\(fixture.daemon.log)")
            let removed = await recorder.waitFor(after: added ?? -1) { $0.is("removed", peerName) }
            #expect(removed != nil, "browsers see removed when avahi-daemon goes away: \(recorder.all)")

            try await DiscoveryLab.avahi("start", "a")
            #expect(
                try await eventually(timeout: .seconds(20)) { try await client.status().avahi == .running },
                "Status.avahi running again")
            let again = await recorder.waitFor(after: removed ?? -1, timeout: .seconds(20)) { $0.is("added", peerName) }
            #expect(again != nil, "browsers see the peer added again: \(recorder.all)")
            await DiscoveryLab.expectOnB(
                type, timeout: .seconds(20), "our advertisement is back on b without any client action"
            ) { $0.contains { $0.name == ourName && $0.port == 6002 && $0.txt == ["gen=2"] } }
            await DiscoveryLab.expectOnB(type, "the static service is back on b") {
                $0.contains { $0.name == staticName }
            }
            await DiscoveryLab.expectOnB(type, "the same-name advertisements are back on b, each with its port") {
                entries in
                zip(dupNames, 6011...6014).allSatisfy { name, port in
                    entries.contains { $0.name == name && $0.port == port }
                }
            }
            #expect(ad.name == ourName)
            #expect(
                dups.map(\.name) == dupNames,
                "same-name advertisements keep their names across the restart (no swap, no renamed events)")
            #expect(try await client.status().registrations == 6, "ours, the four duplicates and the static one")
            #expect(recorder.failure == nil, "the browse stream survives: \(String(describing: recorder.failure))")
            ad.withdraw()
            dups.forEach { $0.withdraw() }
            await peer.stop()
            await fixture.stop()
        }

        @Test func daemonStartedWithoutAvahiPicksItUpLater() async throws {
            let hold = await AvahiGate.shared.enterExclusive()
            defer { hold.release() }
            _ = try DiscoveryLab.require()
            let type = DiscoveryLab.uniqueType()
            let peerName = DiscoveryLab.uniqueName("Later")
            let peer = try await LabPeer.avahiPublish(peerName, type, port: 6101)
            let staticName = DiscoveryLab.uniqueName("Static")
            let services = TemporaryDirectory("dlt-services")
            try "[service]\nname = \(staticName)\ntype = \(type)\nport = 6102\n"
                .write(toFile: services.path + "/later.service", atomically: true, encoding: .utf8)

            try await DiscoveryLab.avahi("stop", "a")
            defer { DiscoveryLab.restoreAvahi("a") }
            let daemon = try DiscoveryLab.daemon(config: "[daemon]\nservices-dir = \(services.path)\n")
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let state = try await client.status().avahi
            #expect(state == .connecting || state == .unavailable, "Status.avahi without avahi-daemon: \(state)")
            let browse = await discoverError { try await client.services(ofType: type, timeoutMs: 1000) }
            #expect(browse?.code == .avahiUnavailable, "Browse without avahi-daemon: \(String(describing: browse))")
            let advertise = await discoverError { try await client.advertise(name: "x", type: type, port: 1) }
            #expect(
                advertise?.code == .avahiUnavailable, "Advertise without avahi-daemon: \(String(describing: advertise))"
            )

            try await DiscoveryLab.avahi("start", "a")
            #expect(
                try await eventually(timeout: .seconds(20)) { try await client.status().avahi == .running },
                "Status.avahi running after avahi-daemon started; log:\n\(daemon.log)")
            let found = try await eventuallyValue(timeout: .seconds(15)) {
                try await client.services(ofType: type, resolve: true, timeoutMs: 3000).first { $0.name == peerName }
            }
            #expect(found?.port == 6101, "browse works once avahi-daemon is up")
            // The static service, whose file was there at start-up, is advertised once avahi-daemon is up.
            await DiscoveryLab.expectOnB(
                type, timeout: .seconds(20), "static service advertised after avahi-daemon came up; log:\n\(daemon.log)"
            ) { $0.contains { $0.name == staticName && $0.port == 6102 } }
            await client.close()
            await peer.stop()
            #expect(daemon.stop() == 0)
        }
    }
}

/// Polls `body` every 250 ms until it returns a value or `timeout` passes; errors count as "not yet" until the end.
func eventuallyValue<T>(timeout: Duration = .seconds(10), _ body: () async throws -> T?) async throws -> T? {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let value = try? await body() { return value }
        try await Task.sleep(for: .milliseconds(250))
    }
    return try await body()
}

/// `body`'s result, or nil when it did not finish within `timeout` (it is then cancelled).
func withTimeout<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T?
{
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// A Python string literal for `text`.
private func pythonString(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
}
