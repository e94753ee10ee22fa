import DiscoverAPI
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import DiscoverServer

/// Graceful shutdown of the varlink server: connections are quiesced (no new call is read, calls already read get
/// their reply, streams are ended), then closed; what does not finish within the drain time is closed anyway.
@Suite struct ShutdownDrainTests {
    static func call(_ method: String, gate: String, count: Int? = nil, more: Bool = false) -> String {
        ConnectionHandlerTests.call(method, gate: gate, count: count, more: more)
    }

    static func quiesce(_ harness: ConnectionHarness) {
        harness.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
    }

    /// Waits until the connection is closed; false after 10 s.
    static func closes(_ harness: ConnectionHarness) async -> Bool {
        for _ in 0..<1000 {
            if !harness.channel.isActive { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    @Test func aCallInFlightGetsItsReplyThenTheConnectionCloses() async throws {
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        try await harness.send(Self.call("io.discoverd.Test.Wait", gate: "busy"))
        #expect(try await harness.eventually { _ in gates.started == ["busy"] })
        Self.quiesce(harness)
        #expect(harness.channel.isActive, "the call is still running: the connection stays")
        gates.open("busy")
        let reply = try #require(try await harness.reply())
        #expect((reply["parameters"] as? [String: Any])?["gate"] as? String == "busy")
        #expect(await Self.closes(harness), "closed once nothing is left")
        try await harness.finish()
    }

    @Test func callsSentAfterTheShutdownBeganAreNotRead() async throws {
        let gates = Gates()
        gates.open("late")
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        try await harness.send(Self.call("io.discoverd.Test.Wait", gate: "busy"))
        #expect(try await harness.eventually { _ in gates.started == ["busy"] })
        Self.quiesce(harness)
        try await harness.send(Self.call("io.discoverd.Test.Wait", gate: "late"))
        gates.open("busy")
        _ = try #require(try await harness.reply())
        #expect(await Self.closes(harness))
        #expect(gates.started == ["busy"], "the late call never started")
        try await harness.finish()
    }

    @Test func aStreamIsEndedSoItsConnectionCloses() async throws {
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        // Flood: sends its replies, then runs until its task is cancelled, like a Browse.
        try await harness.send(Self.call("io.discoverd.Test.Flood", gate: "never", count: 1, more: true))
        #expect((try await harness.reply())?["continues"] as? Bool == true)
        Self.quiesce(harness)
        #expect(await Self.closes(harness), "the stream did not hold it open")
        try await harness.finish()
    }

    @Test func theServerClosesWhatIsStillBusyAfterTheDrainTime() async throws {
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        try await harness.send(Self.call("io.discoverd.Test.Wait", gate: "stuck"))
        #expect(try await harness.eventually { _ in gates.started == ["stuck"] })
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let server = VarlinkServer(
            settings: .init(
                socketPath: "/nonexistent/never-bound", maxConnections: 10, limits: ConnectionHarness.defaultLimits),
            router: MethodRouter(TestMethods.routes(gates), logger: logger), registry: harness.registry,
            group: harness.channel.testingEventLoop, logger: logger, drainTimeout: .milliseconds(200))
        let start = ContinuousClock.now
        await server.drain([harness.channel])
        #expect(!harness.channel.isActive, "closed after the drain time although its call never answered")
        #expect(ContinuousClock.now - start < .seconds(5))
        try await harness.finish()
    }
}
