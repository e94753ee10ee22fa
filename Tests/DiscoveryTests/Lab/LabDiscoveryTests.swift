import DNSSDModel
import Discovery
import Foundation
import LabSupport
import Testing

/// Browse, resolve and advertise against the real avahi-daemons of the lab: our client talks to host a's daemon,
/// peers publish and browse with the Avahi tools on host b. Serialized: they share host a's daemon and one client,
/// and one of them restarts that daemon.
@Suite(
    "Lab: DNS-SD over Avahi",
    .serialized,
    .enabled(if: AvahiLab.shouldRun, "network lab not up (Scripts/lab up)"),
    .timeLimit(.minutes(2))
)
struct LabDiscoveryTests {
    private func uniqueName(_ prefix: String) -> String {
        "\(prefix)-\(UInt16.random(in: 0...UInt16.max))"
    }

    @Test("browse on a sees avahi-publish on b, resolved with TXT and addresses; removed when it stops")
    func browseResolvesPublisherOnB() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Pub")
        // avahi-publish puts its TXT arguments on the wire in order; "a=2" is a duplicate that must lose.
        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 4242, txt: ["a=1", "flag", "path=/x", "a=2"])
        defer { publisher.kill() }

        let log = EventLog(try discovery.browse(type: type, resolve: true))
        try await waitUntil("resolved \(name) with TXT and addresses") {
            guard let service = log.current[name] else { return false }
            return service.port == 4242 && service.txt["a"] == "1" && service.addresses.contains("192.0.2.2")
        }
        let service = try #require(log.current[name])
        #expect(service.type == type)
        #expect(service.domain == "local")
        #expect(service.host == "lab-b.local")
        #expect(service.txt == ["a": "1", "flag": nil, "path": "/x"], "boolean flag is nil; the first a wins")
        #expect(service.txtRaw == ["a=1", "flag", "path=/x", "a=2"].map { Array($0.utf8) }, "txtRaw keeps all")
        #expect(!service.interfaces.isEmpty)
        #expect(log.count(where: \.isAdded) == 1, "one instance over all interfaces/protocols is one added")
        try await waitUntil("allForNow") { log.all.contains(where: \.isAllForNow) }
        try await waitUntil("an IPv6 address too") {
            log.current[name]?.addresses.contains { $0.contains(":") } ?? false
        }

        await publisher.stop()
        try await waitUntil("removed after the publisher stopped") {
            log.all.contains { $0.isRemoved && $0.service?.name == name }
        }
        #expect(log.current[name] == nil)
        #expect(log.count(where: \.isRemoved) == 1, "removed only once, when the last sighting went")
        log.cancel()
        try await waitUntil("Avahi browser, resolvers and the domain browser freed") {
            discovery.objectCounts.serviceBrowsers == 0 && discovery.objectCounts.serviceResolvers == 0
                && discovery.objectCounts.otherBrowsers == 0
        }
    }

    @Test("a TXT update of an advertisement becomes a changed event for a resolving browser")
    func txtUpdateIsChanged() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Txt")
        let ad = try discovery.advertise(name: name, type: type, port: 7000, txt: ["v": "1"])
        defer { ad.withdraw() }
        let log = EventLog(try discovery.browse(type: type, domain: "local", resolve: true))
        try await waitUntil("resolved v=1") { log.current[name]?.txt["v"] == "1" }
        let changedBefore = log.count(where: \.isChanged)

        try ad.updateTXT(["v": "2", "new": "yes"])
        try await waitUntil("changed with v=2") {
            log.all.contains { $0.isChanged && $0.service?.txt == ["v": "2", "new": "yes"] }
        }
        #expect(log.count(where: \.isChanged) > changedBefore)
        #expect(log.count(where: \.isRemoved) == 0, "a TXT update is a change, not remove+add")
        let onB = try await AvahiLab.browseOnB(type: type)
        #expect(onB.contains { $0.count > 9 && $0[3] == name && $0[9].contains("\"v=2\"") })
        log.cancel()
    }

    @Test("a TXT update by an independent peer on b (python-zeroconf) becomes changed, not removed+added")
    func peerTXTUpdateIsChanged() async throws {
        let discovery = try await AvahiLab.running()
        try #require(LabEnvironment.hasZeroconfPeer, "lab/zcpeer.py needs .venv (Scripts/bootstrap)")
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Zc")
        let log = EventLog(try discovery.browse(type: type, resolve: true))
        let peer = try AvahiLab.zeroconfPublishOnB(name: name, type: type, port: 8080, txt: ["v=1"], updateAfter: 4)
        defer { peer.kill() }

        try await waitUntil("resolved v=1") { log.current[name]?.txt == ["v": "1"] }
        #expect(log.current[name]?.port == 8080)
        #expect(log.current[name]?.addresses.contains("192.0.2.2") == true)
        try await waitUntil("changed with updated=1") {
            log.all.contains { $0.isChanged && $0.service?.txt == ["v": "1", "updated": "1"] }
        }
        #expect(log.count(where: \.isRemoved) == 0)
        #expect(log.count(where: \.isAdded) == 1)
        await peer.stop()
        try await waitUntil("removed after the peer's goodbye") { log.current[name] == nil }
        log.cancel()
    }

    @Test("an advertisement on a is seen by avahi-browse on b, and withdrawn")
    func advertiseSeenOnB() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Adv")
        let ad = try discovery.advertise(
            name: name,
            type: type,
            port: 5151,
            txt: ["k": "v", "x": "y"],
            subtypes: ["_sub1"]
        )
        var iterator = ad.events.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first == .registered(name: name))
        #expect(ad.name == name)
        #expect(discovery.objectCounts.entryGroups == 1)

        let lines = try await AvahiLab.browseOnB(type: type)
        let line = try #require(lines.first { $0.count > 9 && $0[3] == name }, "b sees \(name): \(lines)")
        #expect(line[5] == "local")
        #expect(line[6] == "lab-a.local")
        #expect(line[8] == "5151")
        #expect(line[9].contains("\"k=v\"") && line[9].contains("\"x=y\""))
        // The TXT strings are on the wire in the order we gave (sorted keys), asked directly with kdig from b.
        let wire = try await AvahiLab.run([
            "exec", "b", "kdig", "-p", "5353", "@192.0.2.1", "\(name).\(type).local", "TXT", "+short", "+notcp",
        ])
        #expect(wire.trimmingCharacters(in: .whitespacesAndNewlines) == "\"k=v\" \"x=y\"")
        let subtypeLines = try await AvahiLab.browseOnB(type: "_sub1._sub." + type)
        #expect(subtypeLines.contains { $0.count > 3 && $0[3] == name }, "the subtype is browsable")

        ad.withdraw()
        #expect(await iterator.next() == nil, "events end on withdraw")
        #expect(discovery.objectCounts.entryGroups == 0)
        try await waitUntil("b no longer sees \(name)") {
            try await AvahiLab.browseOnB(type: type).allSatisfy { $0.count <= 3 || $0[3] != name }
        }
    }

    @Test("two advertisements of one name: the second is renamed")
    func localCollisionRenames() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Dup")
        let first = try discovery.advertise(name: name, type: type, port: 1000)
        let second = try discovery.advertise(name: name, type: type, port: 1001)
        defer {
            first.withdraw()
            second.withdraw()
        }
        var firstEvents = first.events.makeAsyncIterator()
        var secondEvents = second.events.makeAsyncIterator()
        #expect(await firstEvents.next() == .registered(name: name))
        #expect(await secondEvents.next() == .registered(name: "\(name) #2"))
    }

    @Test("without a name, the advertisement takes the host name")
    func defaultNameIsHostName() async throws {
        let discovery = try await AvahiLab.running()
        let ad = try discovery.advertise(type: AvahiLab.uniqueType(), port: 1234)
        defer { ad.withdraw() }
        var events = ad.events.makeAsyncIterator()
        #expect(await events.next() == .registered(name: LabEnvironment.environment?["LAB_A_HOSTNAME"] ?? "lab-a"))
    }

    @Test("an advertisement is withdrawn when its event consumer is cancelled, and when it is released")
    func advertisementLifetime() async throws {
        let discovery = try await AvahiLab.running()
        let before = discovery.objectCounts.entryGroups
        let ad = try discovery.advertise(name: uniqueName("Life"), type: AvahiLab.uniqueType(), port: 1)
        let consumer = Task { for await _ in ad.events {} }
        try await waitUntil("registered") { ad.name != nil }
        #expect(discovery.objectCounts.entryGroups == before + 1)
        consumer.cancel()
        try await waitUntil("withdrawn on cancel") { discovery.objectCounts.entryGroups == before }
        #expect(discovery.statistics.advertisements == 0)

        var released: Advertisement? = try discovery.advertise(
            name: uniqueName("Gone"), type: AvahiLab.uniqueType(), port: 1)
        #expect(discovery.objectCounts.entryGroups == before + 1)
        #expect(released != nil)
        released = nil
        #expect(discovery.objectCounts.entryGroups == before, "withdrawn in deinit")
    }

    @Test("a name taken on b makes the advertisement on a pick an alternative")
    func remoteCollisionRenames() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Rem")
        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 2000, txt: [])
        defer { publisher.kill() }
        let log = EventLog(try discovery.browse(type: type))
        try await waitUntil("b's service is visible on a") { log.current[name] != nil }
        // Let b's announcements finish: Avahi suppresses probe answers for records it multicast in the last 500 ms,
        // and then a only learns of the conflict after it established (a later `renamed`).
        try await Task.sleep(for: .seconds(2))

        let ad = try discovery.advertise(name: name, type: type, port: 2001)
        defer { ad.withdraw() }
        var events = ad.events.makeAsyncIterator()
        let event = await events.next()
        #expect(event == .registered(name: "\(name) #2"))
        #expect(ad.name == "\(name) #2")
        log.cancel()
        await publisher.stop()
    }

    @Test("50 subscribers share one Avahi browser; a late one gets the current set; the last one frees it")
    func subscribersShareOneBrowser() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Share")
        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 3000, txt: ["s=1"])
        defer { publisher.kill() }
        let before = discovery.objectCounts

        var logs: [EventLog] = []
        for index in 0..<50 {
            logs.append(EventLog(try discovery.browse(type: type, domain: "local", resolve: index % 2 == 0)))
        }
        #expect(discovery.objectCounts.serviceBrowsers == before.serviceBrowsers + 1)
        #expect(discovery.statistics.subscribers == 50)
        try await waitUntil("every subscriber sees \(name)") { logs.allSatisfy { $0.current[name] != nil } }
        try await waitUntil("resolving subscribers get the port") {
            logs.enumerated().allSatisfy { index, log in index % 2 == 1 || log.current[name]?.port == 3000 }
        }
        #expect(logs[1].current[name]?.port == nil, "non-resolving subscribers see no resolved data")
        try await waitUntil("allForNow") { logs[0].all.contains(where: \.isAllForNow) }

        let late = EventLog(try discovery.browse(type: type, domain: "local"))
        try await waitUntil("the late subscriber gets added + allForNow at once", timeout: .seconds(2)) {
            late.all.count >= 2
        }
        #expect(late.all.first?.isAdded == true)
        #expect(late.all.dropFirst().first?.isAllForNow == true)
        #expect(discovery.objectCounts.serviceBrowsers == before.serviceBrowsers + 1)

        for log in logs { log.cancel() }
        late.cancel()
        try await waitUntil("the Avahi browser is freed with the last subscriber") {
            discovery.objectCounts.serviceBrowsers == before.serviceBrowsers
                && discovery.objectCounts.serviceResolvers == before.serviceResolvers
        }
        #expect(discovery.statistics.subscribers == 0)
        await publisher.stop()
    }

    @Test("a subscriber that does not keep up is ended with subscriberTooSlow, not silently thinned out")
    func slowSubscriberIsDropped() async throws {
        _ = try await AvahiLab.running()
        // A second client with a tiny buffer (same bus address, so libdbus's cached address is right).
        let small = try DiscoveryService(dbusSystemBusAddress: AvahiLab.busA, subscriberBufferLimit: 2)
        try small.start()
        defer { small.shutdown() }
        try await waitUntil("second client running") { small.avahiState == .running }
        let type = AvahiLab.uniqueType()
        let first = try AvahiLab.publishOnB(name: uniqueName("SlowA"), type: type, port: 1, txt: [])
        let second = try AvahiLab.publishOnB(name: uniqueName("SlowB"), type: type, port: 2, txt: [])
        defer {
            first.kill()
            second.kill()
        }
        let fast = EventLog(try small.browse(type: type, domain: "local"))
        try await waitUntil("both seen by a fast subscriber, and allForNow") {
            fast.current.count == 2 && fast.all.contains(where: \.isAllForNow)
        }
        // The replay (added, added, allForNow) is queued inside `browse`, before anyone reads: 3 do not fit in 2.
        let slow = try small.browse(type: type, domain: "local")
        var received: [BrowseEvent] = []
        do {
            for try await event in slow { received.append(event) }
            Issue.record("the stream ended without an error")
        } catch let error as DNSSDError {
            #expect(error.code == .subscriberTooSlow)
        }
        #expect(received.count == 2, "the buffered events are delivered before the error")
        #expect(fast.current.count == 2 && !fast.isFinished, "other subscribers are unaffected")
        #expect(small.statistics.subscribers == 1)
        fast.cancel()
        try await waitUntil("browser freed") { small.objectCounts.total == 0 }
        await first.stop()
        await second.stop()
    }

    @Test("one-shot resolve, browseTypes and browseDomains")
    func oneShotLookups() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Res")
        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 4343, txt: ["r=1"])
        defer { publisher.kill() }
        // Give b time to announce.
        let log = EventLog(try discovery.browse(type: type))
        try await waitUntil("published") { log.current[name] != nil }
        log.cancel()

        let service = try await discovery.resolve(name: name, type: type)
        #expect(service.port == 4343)
        #expect(service.host == "lab-b.local")
        #expect(service.txt == ["r": "1"])
        #expect(service.addresses.contains("192.0.2.2"))

        let types = try await discovery.browseTypes()
        #expect(types.contains(type))
        let domains = try await discovery.browseDomains()
        #expect(domains.contains("local"))

        let start = ContinuousClock.now
        do {
            _ = try await discovery.resolve(name: "Nobody-\(name)", type: type, timeout: .seconds(2))
            Issue.record("resolving a missing instance succeeded")
        } catch let error as DNSSDError {
            #expect(error.code == .timeout || error.code == .notFound)
        }
        #expect(ContinuousClock.now - start < .seconds(4))
        #expect(discovery.objectCounts.serviceResolvers == 0)
        await publisher.stop()
    }

    @Test("invalid input is refused before Avahi is involved")
    func validationThroughTheService() async throws {
        let discovery = try await AvahiLab.running()
        #expect(throws: DNSSDError.self) { try discovery.browse(type: "_bad type._tcp") }
        #expect(throws: DNSSDError.self) { try discovery.browse(type: "_http._tcp", interface: "nope0") }
        #expect(throws: DNSSDError.self) { try discovery.advertise(name: "", type: "_http._tcp", port: 80) }
        #expect(throws: DNSSDError.self) { try discovery.advertise(type: "_http._tcp", port: 70000) }
        #expect(throws: DNSSDError.self) {
            try discovery.advertise(type: "_http._tcp", port: 80, txt: ["bad=key": "v"])
        }
        do {
            _ = try discovery.browse(type: "http")
        } catch {
            #expect(error.code == .invalidServiceType)
        }
        #expect(discovery.objectCounts.total == 0)
    }

    /// Stops host a's avahi-daemon for about a second, which other lab users see too: set
    /// DISCOVERY_SKIP_AVAHI_RESTART=1 when running alongside other suites that use host a.
    @Test(
        "avahi-daemon restart: browsers and advertisements come back by themselves",
        .enabled(if: ProcessInfo.processInfo.environment["DISCOVERY_SKIP_AVAHI_RESTART"] != "1")
    )
    func survivesAvahiRestart() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = uniqueName("Live")
        let adName = uniqueName("Back")
        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 6000, txt: ["r=1"])
        defer { publisher.kill() }
        let ad = try discovery.advertise(name: adName, type: type, port: 6001)
        defer { ad.withdraw() }
        let log = EventLog(try discovery.browse(type: type, resolve: true))
        var states: [AvahiState] = []
        let stateTask = Task {
            var seen: [AvahiState] = []
            for await state in discovery.avahiStates {
                seen.append(state)
                if seen.count > 1 && state == .running { break }
            }
            return seen
        }
        try await waitUntil("both services seen") { log.current[name]?.port == 6000 && log.current[adName] != nil }
        try await waitUntil("the advertisement is registered") { ad.name == adName }
        // A pending one-shot record lookup and a record stream must end with avahiUnavailable, their browsers freed
        // before the client frees them.
        let pendingLookup = Task {
            try await discovery.lookupRecords(name: "nobody-restart.local", type: 1, timeout: .seconds(60))
        }
        let records = RecordEventLog(try discovery.recordUpdates(name: "\(type).local", type: 12))
        try await waitUntil("record browsers running") {
            !records.added.isEmpty && discovery.objectCounts.otherBrowsers >= 3
        }

        do {
            try await AvahiLab.run(["avahi", "stop", "a"])
            try await waitUntil("removed for every service when the daemon went away") {
                log.current.isEmpty && log.count(where: \.isRemoved) >= 2
            }
            #expect(discovery.avahiState != .running)
            do {
                _ = try discovery.browse(type: AvahiLab.uniqueType())
                Issue.record("browse succeeded without avahi-daemon")
            } catch {
                #expect(error.code == .avahiUnavailable)
            }
            do {
                _ = try discovery.advertise(name: "x", type: type, port: 1)
                Issue.record("advertise succeeded without avahi-daemon")
            } catch {
                #expect(error.code == .avahiUnavailable)
            }
            do {
                _ = try await pendingLookup.value
                Issue.record("a record lookup pending while the daemon went away succeeded")
            } catch let error as DNSSDError {
                #expect(error.code == .avahiUnavailable)
            }
            try await waitUntil("the record stream failed") { records.failure != nil }
            #expect((records.failure as? DNSSDError)?.code == .avahiUnavailable)
            do {
                _ = try await discovery.lookupRecords(name: "lab-b.local", type: 1)
                Issue.record("lookupRecords succeeded without avahi-daemon")
            } catch {
                #expect(error.code == .avahiUnavailable)
            }
            #expect(discovery.objectCounts.total == 0, "no Avahi object outlives its client")
        } catch {
            _ = try? await AvahiLab.run(["avahi", "start", "a"])
            throw error
        }
        try await AvahiLab.run(["avahi", "start", "a"])

        try await waitUntil("running again", timeout: .seconds(30)) { discovery.avahiState == .running }
        try await waitUntil("the browse finds both services again", timeout: .seconds(20)) {
            log.current[name]?.port == 6000 && log.current[adName] != nil
        }
        try await waitUntil("b sees the advertisement again", timeout: .seconds(20)) {
            try await AvahiLab.browseOnB(type: type).contains { $0.count > 3 && $0[3] == adName }
        }
        #expect(ad.name == adName)
        #expect(!log.isFinished, "the browse stream survived the restart")
        states = await stateTask.value
        #expect(states.first == .running)
        #expect(states.contains(.connecting) || states.contains(.unavailable))
        #expect(states.last == .running)
        log.cancel()
        await publisher.stop()
    }
}
