import DiscoverAPI
@testable import DiscoverServer
import NIOCore
import NIOEmbedded
import Testing

/// Per-uid fairness on the API: one user's connections and calls cannot take everyone else's share, root and the
/// admin group have a reserve, idle connections are closed, and a connection's unanswered input is bounded.
@Suite struct PerUIDFairnessTests {
    static let alice = PeerCredentials(uid: 1000, gid: 1000, pid: 1)
    static let bob = PeerCredentials(uid: 1001, gid: 1001, pid: 2)

    @Test func theRegistryCapsEachUIDAndKeepsAReserveForThePrivileged() async throws {
        let registry = ConnectionRegistry()
        let limits = PerUIDLimits(maxConnections: 2, maxCalls: 10, reserve: 1)
        let loop = EmbeddedEventLoop()
        func admit(_ uid: UInt32, privileged: Bool = false) -> ConnectionRegistry.Refusal? {
            switch registry.admit(EmbeddedChannel(loop: loop), uid: uid, limits: limits, total: 4, privileged: privileged) {
            case .success: nil
            case .failure(let error): error.refusal
            }
        }
        #expect(admit(1000) == nil)
        #expect(admit(1000) == nil)
        #expect(admit(1000) == .perUID(limit: 2), "alice holds her share")
        #expect(admit(1001) == nil, "bob is untouched")
        #expect(admit(1002) == nil)
        #expect(admit(1003) == .total(limit: 4), "every ordinary connection is taken")
        #expect(admit(0, privileged: true) == nil, "root takes the reserve")
        #expect(admit(0, privileged: true) == .total(limit: 5))
        #expect(registry.usageByUID[1000] == ConnectionRegistry.Usage(connections: 2, calls: 0))
        #expect(registry.nearestToCaps(limits, count: 1).first?.uid == 1000)
    }

    @Test func aUIDAtItsCallCapGetsTooManyCallsAndOthersAreServed() async throws {
        let gates = Gates()
        let registry = ConnectionRegistry()
        let loop = NIOAsyncTestingEventLoop()
        let first = try await ConnectionHarness(
            routes: TestMethods.routes(gates), peer: Self.alice, loop: loop, registry: registry, callsPerUID: 3)
        let second = try await ConnectionHarness(
            routes: TestMethods.routes(gates), peer: Self.alice, loop: loop, registry: registry, callsPerUID: 3)
        let other = try await ConnectionHarness(
            routes: TestMethods.routes(gates), peer: Self.bob, loop: loop, registry: registry, callsPerUID: 3)
        for gate in ["a1", "a2"] { try await first.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: gate)) }
        try await second.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "a3"))
        #expect(try await first.eventually { _ in gates.started.count == 3 })
        #expect(registry.usageByUID[1000]?.calls == 3)
        // Alice's fourth call, on either connection, is refused at once (answered in order, behind a3); her
        // connections stay open.
        try await second.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "a4"))
        gates.open("b1")
        let served = try await other.call(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "b1"))
        #expect((served["parameters"] as? [String: Any])?["gate"] as? String == "b1", "bob is served")
        for gate in ["a1", "a2", "a3"] { gates.open(gate) }
        #expect((try await second.reply())?["parameters"] != nil, "a3")
        #expect((try await second.reply())?["error"] as? String == "io.discoverd.Daemon.TooManyCalls", "a4")
        #expect(gates.started.count == 4, "a4 never ran")
        #expect(try await first.eventually { _ in registry.usageByUID[1000] == nil }, "slots given back")
        try await first.finish()
        try await second.finish()
        try await other.finish()
    }

    @Test func theCallOverTheCapIsNamed() async throws {
        let gates = Gates()
        let registry = ConnectionRegistry()
        let harness = try await ConnectionHarness(
            routes: TestMethods.routes(gates), peer: Self.alice, registry: registry, callsPerUID: 1)
        let second = try await ConnectionHarness(
            routes: TestMethods.routes(gates), peer: Self.alice, registry: registry, callsPerUID: 1)
        try await harness.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "held"))
        #expect(try await harness.eventually { _ in gates.started.count == 1 })
        let reply = try await second.call(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "x"))
        #expect(reply["error"] as? String == "io.discoverd.Daemon.TooManyCalls")
        #expect((reply["parameters"] as? [String: Any])?["limit"] as? Int == 1)
        #expect(second.channel.isActive, "the connection stays usable")
        gates.open("held")
        #expect(try await harness.reply() != nil)
        #expect(try await harness.eventually { _ in registry.usageByUID[1000] == nil })
        try await harness.finish()
        try await second.finish()
    }

    @Test func closingAConnectionGivesBackItsCalls() async throws {
        let gates = Gates()
        let registry = ConnectionRegistry()
        let harness = try await ConnectionHarness(
            routes: TestMethods.routes(gates), peer: Self.alice, registry: registry, callsPerUID: 10)
        for gate in ["c1", "c2"] { try await harness.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: gate)) }
        #expect(try await harness.eventually { _ in registry.usageByUID[1000]?.calls == 2 })
        try await harness.finish()
        #expect(registry.usageByUID[1000] == nil)
    }

    @Test func theInputBudgetStopsReadingBeforeTheQueueLimit() async throws {
        let gates = Gates()
        let limits = ConnectionLimits(maxMessageSize: 1024, maxQueuedCalls: 256, maxSendBuffer: 1 << 20, maxInputBuffer: 4096)
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates), limits: limits)
        // A stream is a barrier: everything behind it waits, decoded or not.
        try await harness.send(ConnectionHandlerTests.call("io.discoverd.Test.Stream", gate: "s", more: true))
        let padding = String(repeating: "x", count: 400)
        var calls: [UInt8] = []
        for index in 0..<40 {
            calls += Array(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "g\(index)\(padding)").utf8) + [0]
        }
        try await harness.send(bytes: calls)
        #expect(try await harness.withHandler { $0.isReadingPaused }, "about 18 KB of input is over the 4 KB budget")
        gates.open("s")
        for index in 0..<40 { gates.open("g\(index)\(padding)") }
        var answered = 0
        while try await harness.reply() != nil {
            answered += 1
            if answered == 41 { break }
        }
        #expect(answered >= 41, "nothing is lost: every call is answered once the budget frees up")
        try await harness.finish()
    }

    @Test func anIdleConnectionIsClosedAndABusyOneIsNot() async throws {
        let gates = Gates()
        let loop = NIOAsyncTestingEventLoop()
        let limits = ConnectionLimits(
            maxMessageSize: 1024, maxQueuedCalls: 8, maxSendBuffer: 1 << 20, idleTimeout: .seconds(60))
        let idle = try await ConnectionHarness(routes: TestMethods.routes(gates), limits: limits, loop: loop)
        let busy = try await ConnectionHarness(routes: TestMethods.routes(gates), limits: limits, loop: loop)
        try await busy.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "long"))
        #expect(try await busy.eventually { _ in gates.started.count == 1 })
        await loop.advanceTime(by: .seconds(59))
        #expect(idle.channel.isActive)
        await loop.advanceTime(by: .seconds(70))
        #expect(!idle.channel.isActive, "no call and no stream for 60 s")
        #expect(busy.channel.isActive, "a call in flight keeps it open")
        try await idle.finish()
        try await busy.finish()
    }
}
