import DNSCore
import DNSSDModel
import Testing

@testable import WideAreaDiscovery

@Suite("Wide-area registration")
struct RegistrationTests {
    static let key = try! TSIGKey(parsing: "hmac-sha256:lab-key:ZGlzY292ZXJkLWxhYi10c2lnLXNlY3JldC0zMmJ5dGU=")

    static let plan = RegistrationPlan(
        instance: "My Web", type: "_http._tcp", domain: "dyn.example", zone: "dyn.example", port: 8080,
        txt: [Array("path=/".utf8)], subtypes: ["_printer"], host: "host.dyn.example",
        addresses: ["192.0.2.1", "2001:db8::1"], ttl: 120)

    @Test func keysParseLikeNsupdateDashY() throws {
        let key = try TSIGKey(parsing: "hmac-sha512:Name.Example:c2VjcmV0")
        #expect(key.algorithm == "hmac-sha512.")
        #expect(key.name == "name.example.")
        #expect(try TSIGKey(parsing: "k:c2VjcmV0").algorithm == "hmac-sha256.")
        #expect(throws: WideAreaError.self) { try TSIGKey(parsing: "hmac-foo:k:c2VjcmV0") }
        #expect(throws: WideAreaError.self) { try TSIGKey(parsing: "k:not base64!") }
        #expect(throws: WideAreaError.self) { try TSIGKey(parsing: "justone") }
        // The secret never shows in descriptions.
        #expect(!"\(key)".contains("c2VjcmV0"))
    }

    @Test func theMostSpecificDomainKeyWins() throws {
        var table = TSIGKeyTable()
        try table.add(parsing: "all:YWxs")
        try table.add(parsing: "dyn.example  hmac-sha1:dyn:ZHlu")
        #expect(table.key(for: "a.b.dyn.example")?.name == "dyn.")
        #expect(table.key(for: "Dyn.Example.")?.name == "dyn.")
        #expect(table.key(for: "other.example")?.name == "all.")
        #expect(TSIGKeyTable().key(for: "x") == nil)
    }

    @Test func thePlanHoldsPointersSRVTXTAndHostAddresses() {
        let plan = Self.plan
        #expect(plan.pointers.count == 2)
        #expect(plan.pointers.allSatisfy { $0.rdata == plan.name.wire && $0.type == 12 })
        #expect(plan.srv.rdata.prefix(6) == [0, 0, 0, 0, 0x1F, 0x90])
        #expect(plan.txtRecord.rdata == [6] + Array("path=/".utf8))
        #expect(plan.hostRecords.map(\.type) == [1, 28])
        var empty = plan
        empty.txt = []
        #expect(empty.txtRecord.rdata == [0], "an empty TXT is one empty string (RFC 6763 §6.1)")
    }

    @Test func registrationRequiresAFreeNameAndRemovalOnlyTouchesOurRecords() {
        let plan = Self.plan
        let first = plan.registration
        #expect(first.prerequisites == [.nameNotInUse(plan.name.labels)])
        #expect(first.prerequisites[0].rrClass == UpdateRecord.classNONE)
        let removal = plan.removal(includingHost: false)
        #expect(removal.prerequisites == [plan.srv.mustExist])
        #expect(removal.updates.allSatisfy { $0.rrClass == UpdateRecord.classNONE && $0.ttl == 0 })
        #expect(!removal.updates.contains { $0.type == 1 || $0.type == 28 })
        #expect(plan.removal(includingHost: true).updates.filter { $0.type == 1 || $0.type == 28 }.count == 2)
    }

    @Test func conflictsRenameLikeMDNS() {
        #expect(RegistrationPlan.alternative(to: "Printer", attempt: 1) == "Printer (2)")
        let long = String(repeating: "x", count: 63)
        #expect(RegistrationPlan.alternative(to: long, attempt: 2).utf8.count == 63)
        #expect(RegistrationPlan.alternative(to: long, attempt: 2).hasSuffix(" (3)"))
    }

    @Test func theUpdateIsSignedAndAnUnsignedSuccessIsRejected() throws {
        let plan = Self.plan
        let message = try UpdateMessage(
            zone: plan.zoneLabels, prerequisites: plan.registration.prerequisites, updates: plan.registration.updates,
            lease: 1200, key: Self.key)
        let wire = message.wire
        // Opcode UPDATE, RD clear; zone count 1, prerequisite 1, updates = records; additional: OPT and TSIG.
        #expect((wire[2] >> 3) & 0x0F == 5)
        #expect(wire[2] & 0x01 == 0)
        #expect(wire[4...5] == [0, 1])
        #expect(wire[6...7] == [0, 1])
        #expect(Int(wire[8]) << 8 | Int(wire[9]) == plan.records.count)
        #expect(wire[10...11] == [0, 2])
        #expect(wire.count > 100)

        let zone = DNSName.wire(plan.zoneLabels)
        func reply(rcode: UInt8) -> [UInt8] {
            [wire[0], wire[1], 0x80 | 5 << 3, rcode, 0, 1, 0, 0, 0, 0, 0, 0] + zone + [0, 6, 0, 1]
        }
        #expect {
            try message.check(reply: reply(rcode: 0))
        } throws: { ($0 as? WideAreaError)?.code == .badReplySignature }
        // Error replies to a bad key come unsigned (RFC 8945 §5.3.2): the rcode is what matters.
        #expect(try message.check(reply: reply(rcode: 9)).rcode == "NOTAUTH")
        #expect(try message.check(reply: reply(rcode: 5)).rcode == "REFUSED")
        var otherID = reply(rcode: 0)
        otherID[0] ^= 0xFF
        #expect(throws: WideAreaError.self) { try message.check(reply: otherID) }
    }

    @Test func updateServersParse() throws {
        #expect(try UpdateServerAddress(parsing: "192.0.2.53").description == "192.0.2.53:53")
        #expect(try UpdateServerAddress(parsing: "192.0.2.54:5353").port == 5353)
        #expect(try UpdateServerAddress(parsing: "[2001:db8::53]:54").host == "2001:db8::53")
        #expect(try UpdateServerAddress(parsing: "2001:db8::53").port == 53)
        #expect(throws: WideAreaError.self) { try UpdateServerAddress(parsing: "1.2.3.4:99999") }
    }
}
