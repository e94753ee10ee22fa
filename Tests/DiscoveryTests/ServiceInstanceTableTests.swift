import DNSSDModel
import Testing

@testable import Discovery

@Suite("Per-instance merge")
struct ServiceInstanceTableTests {
    let key = InstanceKey(name: "Printer", type: "_ipp._tcp", domain: "local")
    let eth0v4 = Sighting(interface: 2, proto: 0)
    let eth0v6 = Sighting(interface: 2, proto: 1)
    let wlan0v4 = Sighting(interface: 3, proto: 0)

    func resolution(_ address: String?, txt: [String] = ["rp=ipp"], host: String = "printer.local") -> Resolution {
        Resolution(host: host, port: 631, address: address, txt: TXTRecord(strings: txt.map { Array($0.utf8) }))
    }

    @Test("first sighting adds, further sightings change interfaces only when a new interface appears")
    func sightings() throws {
        var table = ServiceInstanceTable()
        let firstResult = table.add(key, on: eth0v4, interfaceName: "eth0")
        let first = try #require(firstResult)
        #expect(
            first.event(includeResolved: false)
                == .added(
                    DNSSDService(
                        name: "Printer", type: "_ipp._tcp",
                        domain: "local", interfaces: ["eth0"])))
        // Same interface, other protocol: no visible change.
        let secondResult = table.add(key, on: eth0v6, interfaceName: "eth0")
        let second = try #require(secondResult)
        #expect(second.event(includeResolved: false) == nil)
        // Repeated report: ignored.
        let repeated = table.add(key, on: eth0v6, interfaceName: "eth0")
        #expect(repeated == nil)
        let thirdResult = table.add(key, on: wlan0v4, interfaceName: "wlan0")
        let third = try #require(thirdResult)
        guard case .changed(let service) = third.event(includeResolved: false) else {
            Issue.record("expected changed")
            return
        }
        #expect(service.interfaces == ["eth0", "wlan0"])
        #expect(table.count == 1)
    }

    @Test("removed only when the last sighting goes")
    func removal() throws {
        var table = ServiceInstanceTable()
        _ = table.add(key, on: eth0v4, interfaceName: "eth0")
        _ = table.add(key, on: wlan0v4, interfaceName: "wlan0")
        let partialResult = table.remove(key, on: eth0v4)
        let partial = try #require(partialResult)
        guard case .changed(let service) = partial.event(includeResolved: false) else {
            Issue.record("expected changed")
            return
        }
        #expect(service.interfaces == ["wlan0"])
        let lastResult = table.remove(key, on: wlan0v4)
        let last = try #require(lastResult)
        guard case .removed(let gone) = last.event(includeResolved: false) else {
            Issue.record("expected removed")
            return
        }
        #expect(gone.name == "Printer")
        #expect(table.count == 0)
        let repeated = table.remove(key, on: wlan0v4)
        #expect(repeated == nil)
    }

    @Test("addresses are the union over sightings, IPv4 first; link-local IPv6 keeps its zone")
    func addressUnion() throws {
        var table = ServiceInstanceTable()
        _ = table.add(key, on: eth0v6, interfaceName: "eth0")
        _ = table.add(key, on: eth0v4, interfaceName: "eth0")
        _ = table.resolved(key, on: eth0v6, resolution("fe80::1%eth0"))
        let changeResult = table.resolved(key, on: eth0v4, resolution("192.0.2.7"))
        let change = try #require(changeResult)
        guard case .changed(let service) = change.event(includeResolved: true) else {
            Issue.record("expected changed")
            return
        }
        #expect(service.addresses == ["192.0.2.7", "fe80::1%eth0"])
        #expect(service.host == "printer.local")
        #expect(service.port == 631)
        #expect(service.txt == ["rp": "ipp"])
        #expect(service.txtRaw == nil)
        // A subscriber that did not ask to resolve sees nothing change.
        #expect(change.event(includeResolved: false) == nil)
    }

    @Test("a TXT update becomes changed once; the same data again is silent")
    func txtChange() throws {
        var table = ServiceInstanceTable()
        _ = table.add(key, on: eth0v4, interfaceName: "eth0")
        _ = table.add(key, on: eth0v6, interfaceName: "eth0")
        _ = table.resolved(key, on: eth0v4, resolution("192.0.2.7"))
        _ = table.resolved(key, on: eth0v6, resolution("2001:db8::7"))
        let updateResult = table.resolved(key, on: eth0v4, resolution("192.0.2.7", txt: ["rp=new"]))
        let update = try #require(updateResult)
        guard case .changed(let service) = update.event(includeResolved: true) else {
            Issue.record("expected changed")
            return
        }
        #expect(service.txt == ["rp": "new"])
        // The second resolver catches up with the same TXT: the merged view does not change.
        let catchUpResult = table.resolved(key, on: eth0v6, resolution("2001:db8::7", txt: ["rp=new"]))
        let catchUp = try #require(catchUpResult)
        #expect(catchUp.event(includeResolved: true) == nil)
    }

    @Test("non-UTF-8 TXT is exposed raw")
    func rawTXT() throws {
        var table = ServiceInstanceTable()
        _ = table.add(key, on: eth0v4, interfaceName: nil)
        let raw = Resolution(host: "h.local", port: 1, address: nil, txt: TXTRecord(strings: [[0x6B, 0x3D, 0xFF]]))
        let changeResult = table.resolved(key, on: eth0v4, raw)
        let change = try #require(changeResult)
        guard case .changed(let service) = change.event(includeResolved: true) else {
            Issue.record("expected changed")
            return
        }
        #expect(service.txt.isEmpty)
        #expect(service.txtRaw == [[0x6B, 0x3D, 0xFF]])
        #expect(service.interfaces == ["if2"])
    }

    @Test("resolution of an unknown sighting is ignored")
    func unknownSighting() {
        var table = ServiceInstanceTable()
        let repeated = table.resolved(key, on: eth0v4, resolution("192.0.2.7"))
        #expect(repeated == nil)
    }

    @Test("removeAll reports every instance removed (Avahi went away)")
    func removeAll() {
        var table = ServiceInstanceTable()
        let other = InstanceKey(name: "Another", type: "_ipp._tcp", domain: "example.com")
        _ = table.add(key, on: eth0v4, interfaceName: "eth0")
        _ = table.add(other, on: eth0v4, interfaceName: "eth0")
        let wide = table.removeAll(where: { $0.domain == "example.com" })
        #expect(wide.count == 1)
        #expect(table.count == 1)
        let rest = table.removeAll()
        #expect(rest.compactMap { $0.event(includeResolved: false) }.count == 1)
        #expect(table.count == 0)
    }

    @Test("clearing resolutions keeps the sightings")
    func clearResolutions() throws {
        var table = ServiceInstanceTable()
        _ = table.add(key, on: eth0v4, interfaceName: "eth0")
        _ = table.resolved(key, on: eth0v4, resolution("192.0.2.7"))
        table.clearResolutions()
        let service = try #require(table.instances[key]).service(includeResolved: true)
        #expect(service.addresses.isEmpty)
        #expect(service.host == nil)
        #expect(table.allSightings.count == 1)
    }
}

extension InstanceChange: Equatable {
    public static func == (lhs: InstanceChange, rhs: InstanceChange) -> Bool {
        lhs.before == rhs.before && lhs.after == rhs.after
    }
}
