import DNSSDModel
@testable import Discovery
import Foundation
import LabSupport
import Synchronization
import Testing

/// Raw record look-ups (`lookupRecords`, `recordUpdates`) against the lab's avahi-daemons. In the serialized lab suite
/// because they share host a's daemon and client with it (and it restarts that daemon).
extension LabDiscoveryTests {
    /// The lab names are ASCII, so the wire form is length-prefixed labels and a zero byte.
    static func wire(_ name: String) -> [UInt8] {
        name.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }

    static func txtWire(_ strings: [String]) -> [UInt8] {
        strings.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
    }

    @Test("A and AAAA of lab-b.local, any case in, canonical name and host TTL out")
    func hostAddressRecords() async throws {
        let discovery = try await AvahiLab.running()
        let a = try await discovery.lookupRecords(name: "LAB-B.local", type: 1)
        #expect(
            a == [
                MDNSRecord(
                    name: "lab-b.local.", type: 1, ttl: 120, rdata: [192, 0, 2, 2],
                    interfaceIndex: a.first?.interfaceIndex ?? 0)
            ]
        )
        #expect((a.first?.interfaceIndex ?? 0) > 0)
        let aaaa = try await discovery.lookupRecords(name: "lab-b.local.", type: 28)
        let expected: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [2]
        #expect(aaaa.map(\.rdata).contains(expected))
        #expect(aaaa.allSatisfy { $0.name == "lab-b.local." && $0.type == 28 && $0.rdata.count == 16 })
        #expect(Set(aaaa.map(\.rdata)).count == aaaa.count, "one record per address however often seen")
    }

    @Test("reverse PTR of lab-b's IPv4 and IPv6 addresses, asked on the link")
    func reversePointers() async throws {
        let discovery = try await AvahiLab.running()
        let v4 = try await discovery.lookupRecords(name: "2.2.0.192.in-addr.arpa", type: 12)
        #expect(v4.map(\.rdata) == [Self.wire("lab-b.local")])
        #expect(v4.first?.name == "2.2.0.192.in-addr.arpa.")
        #expect(v4.first?.ttl == 120)
        let nibbles = "2." + String(repeating: "0.", count: 23) + "8.b.d.0.1.0.0.2.ip6.arpa"
        let v6 = try await discovery.lookupRecords(name: nibbles, type: 12)
        #expect(v6.map(\.rdata) == [Self.wire("lab-b.local")])
    }

    @Test("PTR, SRV and TXT of an avahi-publish service on b; the type in _services._dns-sd._udp")
    func serviceRecordsOfAvahiPublish() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = "Rec \(UInt16.random(in: 0...UInt16.max))"
        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 4711, txt: ["a=1", "flag", "path=/x"])
        defer { publisher.kill() }
        let instance = "\(name).\(type).local".replacingOccurrences(of: " ", with: "\\032")

        var pointers: [MDNSRecord] = []
        try await waitUntil("PTR of \(type)") {
            pointers = try await discovery.lookupRecords(name: "\(type).local", type: 12)
            return !pointers.isEmpty
        }
        // "Rec NNNN" as wire bytes: the space is a plain byte in the label.
        let instanceWire = [UInt8(name.utf8.count)] + Array(name.utf8) + Self.wire("\(type).local")
        #expect(pointers.map(\.rdata) == [instanceWire])
        #expect(pointers.first?.ttl == 4500)

        let srv = try await discovery.lookupRecords(name: instance, type: 33)
        #expect(srv.map(\.rdata) == [[0, 0, 0, 0, 0x12, 0x67] + Self.wire("lab-b.local")])
        #expect(srv.first?.name == instance.lowercased() + ".")
        let txt = try await discovery.lookupRecords(name: instance, type: 16)
        #expect(txt.map(\.rdata) == [Self.txtWire(["a=1", "flag", "path=/x"])], "TXT in wire order")

        let types = try await discovery.lookupRecords(name: "_services._dns-sd._udp.local", type: 12)
        #expect(types.contains { $0.rdata == Self.wire("\(type).local") })
        await publisher.stop()
    }

    @Test(
        "SRV and TXT of a python-zeroconf peer (which compresses names) come uncompressed",
        .enabled(if: LabEnvironment.hasZeroconfPeer || LabEnvironment.isCI)
    )
    func serviceRecordsOfZeroconfPeer() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = "zc\(UInt16.random(in: 0...UInt16.max))"
        let peer = try AvahiLab.zeroconfPublishOnB(name: name, type: type, port: 8080, txt: ["path=/z", "on"])
        defer { peer.kill() }
        var srv: [MDNSRecord] = []
        try await waitUntil("SRV of the peer") {
            srv = try await discovery.lookupRecords(name: "\(name).\(type).local", type: 33)
            return !srv.isEmpty
        }
        #expect(srv.map(\.rdata) == [[0, 0, 0, 0, 0x1f, 0x90] + Self.wire("zcpeer.local")])
        let txt = try await discovery.lookupRecords(name: "\(name).\(type).local", type: 16)
        #expect(txt.map(\.rdata) == [Self.txtWire(["path=/z", "on"])])
        await peer.stop()
    }

    @Test("an unknown name gives [] within the timeout; invalid input is refused")
    func unknownAndInvalid() async throws {
        let discovery = try await AvahiLab.running()
        let start = ContinuousClock.now
        let none = try await discovery.lookupRecords(name: "nobody-\(UInt32.random(in: 0...UInt32.max)).local", type: 1)
        #expect(none.isEmpty)
        #expect(ContinuousClock.now - start < .seconds(3))
        #expect(discovery.objectCounts.otherBrowsers == 0)

        await #expect(throws: DNSSDError(.invalidName, "invalid name \"a..local\": empty label")) {
            try await discovery.lookupRecords(name: "a..local", type: 1)
        }
        do {
            _ = try await discovery.lookupRecords(name: "lab-b.local", type: 255)
            Issue.record("type ANY was accepted")
        } catch {
            #expect(error.code == .invalidParameter)
        }
    }

    @Test("cancelling the calling task ends the lookup at once and frees the browser")
    func cancelledLookup() async throws {
        let discovery = try await AvahiLab.running()
        let lookup = Task {
            try await discovery.lookupRecords(name: "nobody-cancel.local", type: 1, timeout: .seconds(60))
        }
        try await waitUntil("the browser exists") { discovery.objectCounts.otherBrowsers == 1 }
        let start = ContinuousClock.now
        lookup.cancel()
        let records = try await lookup.value
        #expect(records.isEmpty)
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(discovery.objectCounts.otherBrowsers == 0)
    }

    @Test("recordUpdates: added when a service appears, removed when its publisher says goodbye")
    func recordStream() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = "Upd\(UInt16.random(in: 0...UInt16.max))"
        let events = RecordEventLog(try discovery.recordUpdates(name: "\(type).local", type: 12))
        try await waitUntil("allForNow") { events.all.contains(.allForNow) }
        #expect(events.all == [.allForNow])

        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 9, txt: [])
        defer { publisher.kill() }
        let instanceWire = [UInt8(name.utf8.count)] + Array(name.utf8) + Self.wire("\(type).local")
        try await waitUntil("added") { events.added.map(\.rdata) == [instanceWire] }
        await publisher.stop()
        try await waitUntil("removed") { events.removed.map(\.rdata) == [instanceWire] }
        #expect(events.added.count == 1, "one added however many interfaces/protocols")
        events.cancel()
        try await waitUntil("browser freed") { discovery.objectCounts.otherBrowsers == 0 }
    }

    @Test("ending a record stream from its consumer's cancellation never waits for Avahi's lock")
    func recordStreamCancelDoesNotWaitForTheLock() async throws {
        // The stream's termination runs inside the consumer's cancellation, holding that task's status lock; the
        // poll thread yields events holding the poll lock and then needs the task's lock. Waiting for the poll lock
        // in the termination deadlocked both (the daemon's event loops hung under fuzzed .local stub queries).
        // Here another thread holds the poll lock, as the poll thread does, while the consumer is cancelled.
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let events = RecordEventLog(try discovery.recordUpdates(name: "\(type).local", type: 12))
        try await waitUntil("allForNow") { events.all.contains(.allForNow) }
        let poll = discovery.client.poll
        let state = Mutex((held: false, release: false, gaveUp: false))
        Thread.detachNewThread {
            poll.withLocked {
                state.withLock { $0.held = true }
                let deadline = ContinuousClock.now + .seconds(10)
                while !state.withLock({ $0.release }) {
                    guard ContinuousClock.now < deadline else {
                        state.withLock { $0.gaveUp = true }
                        return
                    }
                    usleep(1000)
                }
            }
        }
        try await waitUntil("the other thread holds the poll lock") { state.withLock { $0.held } }
        events.cancel()  // runs the stream's termination here, now
        let gaveUp = state.withLock { state in
            state.release = true
            return state.gaveUp
        }
        #expect(!gaveUp, "the termination waited for the poll lock until its holder gave up")
        try await waitUntil("browser freed once the lock is free") { discovery.objectCounts.otherBrowsers == 0 }
        try await waitUntil("the consumer ended") { events.isFinished }
    }
}

/// The events of a record stream.
typealias RecordEventLog = StreamLog<MDNSRecordEvent>

extension StreamLog where Event == MDNSRecordEvent {
    var added: [MDNSRecord] { self.all.compactMap { if case .added(let record) = $0 { record } else { nil } } }
    var removed: [MDNSRecord] { self.all.compactMap { if case .removed(let record) = $0 { record } else { nil } } }
}

extension LabDiscoveryTests {
    @Test("browse and resolve a 19-character service type published by avahi-publish on b")
    func longServiceType() async throws {
        let discovery = try await AvahiLab.running()
        // Over RFC 6335's 15 characters, like _androidtvremote2._tcp; unique per run.
        let type = "_dtlongtype" + String(UInt32.random(in: 0...UInt32.max), radix: 16) + "._tcp"
        let name = "Long\(UInt16.random(in: 0...UInt16.max))"
        let publisher = try AvahiLab.publishOnB(name: name, type: type, port: 4812, txt: ["flag", "k=v"])
        defer { publisher.kill() }
        let log = EventLog(try discovery.browse(type: type, resolve: true))
        try await waitUntil("found and resolved") { log.current[name]?.port == 4812 }
        #expect(log.current[name]?.txt == ["flag": nil, "k": "v"])
        let service = try await discovery.resolve(name: name, type: type)
        #expect(service.type == type)
        #expect(throws: DNSSDError.self, "advertising such a type stays refused") {
            try discovery.advertise(name: name, type: type, port: 1)
        }
        log.cancel()
        await publisher.stop()
    }

    @Test("a boolean TXT attribute is published as `flag`, not `flag=`: avahi-browse on b sees it so")
    func booleanAttributeOnTheWire() async throws {
        let discovery = try await AvahiLab.running()
        let type = AvahiLab.uniqueType()
        let name = "Bool\(UInt16.random(in: 0...UInt16.max))"
        let ad = try discovery.advertise(name: name, type: type, port: 4813, txt: ["flag": nil, "k": "v", "e": ""])
        defer { ad.withdraw() }
        var entries: [[String]] = []
        try await waitUntil("b resolves it") {
            entries = try await AvahiLab.browseOnB(type: type).filter { $0.count > 9 && $0[3] == name }
            return !entries.isEmpty
        }
        // avahi-browse -p prints the TXT strings quoted, space-separated.
        let txt = entries[0][9]
        #expect(txt.contains("\"flag\""), "\(txt)")
        #expect(!txt.contains("\"flag=\""), "\(txt)")
        #expect(txt.contains("\"e=\"") && txt.contains("\"k=v\""), "\(txt)")
        let records = try await discovery.lookupRecords(name: "\(name).\(type).local", type: 16)
        #expect(records.map(\.rdata) == [Self.txtWire(["e=", "flag", "k=v"])])
    }
}
