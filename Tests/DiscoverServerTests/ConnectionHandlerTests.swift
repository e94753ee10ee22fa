import DiscoverAPI
@testable import DiscoverServer
import NIOCore
import NIOEmbedded
import Testing

/// The connection handler on `NIOAsyncTestingChannel`: framing, order, the `more` barrier, back-pressure and limits.
@Suite struct ConnectionHandlerTests {
    static func call(_ method: String, gate: String, count: Int? = nil, size: Int? = nil, more: Bool = false) -> String {
        var parameters = #""gate":"\#(gate)""#
        if let count { parameters += #","count":\#(count)"# }
        if let size { parameters += #","size":\#(size)"# }
        return #"{"method":"\#(method)","parameters":{\#(parameters)}\#(more ? #","more":true"# : "")}"#
    }

    /// A call's bytes with the NUL.
    static func message(_ method: String, gate: String) -> [UInt8] {
        Array(call(method, gate: gate).utf8) + [0]
    }

    // MARK: - Framing

    @Test func aMessageSplitOverSeveralReadsIsOneCall() async throws {
        let gates = Gates()
        gates.open("a")
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        let bytes: [UInt8] = Array(Self.call("io.discoverd.Test.Wait", gate: "a").utf8) + [0]
        let chunks: [[UInt8]] = [Array(bytes[..<5]), Array(bytes[5..<20]), Array(bytes[20...])]
        for chunk in chunks {
            #expect(try await harness.pendingReplies().isEmpty, "no reply before the NUL arrived")
            try await harness.send(bytes: chunk)
        }
        let reply = try #require(try await harness.reply())
        #expect((reply["parameters"] as? [String: Any])?["gate"] as? String == "a")
        try await harness.finish()
    }

    @Test func severalMessagesInOneReadAreSeveralCalls() async throws {
        let gates = Gates()
        for gate in ["a", "b", "c"] { gates.open(gate) }
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        let bytes = ["a", "b", "c"].flatMap { Self.message("io.discoverd.Test.Wait", gate: $0) }
        try await harness.send(bytes: bytes)
        var gatesAnswered: [String] = []
        for _ in 0..<3 {
            let reply = try #require(try await harness.reply())
            gatesAnswered.append((reply["parameters"] as? [String: Any])?["gate"] as? String ?? "?")
        }
        #expect(gatesAnswered == ["a", "b", "c"])
        try await harness.finish()
    }

    @Test func anInvalidMessageIsAnsweredInOrderAndTheConnectionStays() async throws {
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        try await harness.send(Self.call("io.discoverd.Test.Wait", gate: "first"))
        try await harness.send("{not json")
        #expect(try await harness.eventually { $0.heldReplyCount == 1 }, "the error waits behind the first call")
        #expect(try await harness.pendingReplies().isEmpty)
        gates.open("first")
        #expect((try await harness.reply())?["parameters"] != nil)
        #expect((try await harness.reply())?["error"] as? String == "io.discoverd.Daemon.InvalidMessage")
        #expect(harness.channel.isActive)
        try await harness.finish()
    }

    // MARK: - Order

    @Test func pipelinedCallsFinishingOutOfOrderAreAnsweredInOrder() async throws {
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        for gate in ["slow", "fast1", "fast2"] { try await harness.send(Self.call("io.discoverd.Test.Wait", gate: gate)) }
        #expect(try await harness.eventually { _ in gates.started.count == 3 }, "one-shot calls run concurrently")
        gates.open("fast2")
        gates.open("fast1")
        #expect(try await harness.eventually { $0.heldReplyCount == 2 }, "both fast calls finished")
        #expect(try await harness.pendingReplies().isEmpty, "nothing is written before the first call answers")
        gates.open("slow")
        var order: [String] = []
        for _ in 0..<3 {
            let reply = try #require(try await harness.reply())
            order.append((reply["parameters"] as? [String: Any])?["gate"] as? String ?? "?")
        }
        #expect(order == ["slow", "fast1", "fast2"])
        try await harness.finish()
    }

    @Test func callsBehindAStreamWaitUntilItEnds() async throws {
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        try await harness.send(Self.call("io.discoverd.Test.Stream", gate: "stream", count: 2, more: true))
        try await harness.send(Self.call("io.discoverd.Test.Wait", gate: "after"))
        gates.open("after")
        for index in 0..<2 {
            let reply = try #require(try await harness.reply())
            #expect(reply["continues"] as? Bool == true)
            #expect((reply["parameters"] as? [String: Any])?["index"] as? Int == index)
        }
        #expect(gates.started == ["stream"], "the call behind the stream has not started")
        #expect(try await harness.withHandler { $0.heldReplyCount } == 0)
        gates.open("stream")
        let last = try #require(try await harness.reply())
        #expect(last["continues"] == nil)
        #expect((last["parameters"] as? [String: Any])?["gate"] as? String == "stream")
        let after = try #require(try await harness.reply())
        #expect((after["parameters"] as? [String: Any])?["gate"] as? String == "after")
        #expect(gates.started == ["stream", "after"])
        try await harness.finish()
    }

    // MARK: - Back-pressure and limits

    @Test func theQueueLimitStopsReadingAndLosesNothing() async throws {
        let gates = Gates()
        let limits = ConnectionLimits(maxMessageSize: 4096, maxQueuedCalls: 4, maxSendBuffer: 1 << 20)
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates), limits: limits)
        let names = (0..<10).map { "call\($0)" }
        try await harness.send(bytes: names.flatMap { Self.message("io.discoverd.Test.Wait", gate: $0) })
        #expect(try await harness.eventually { _ in gates.started.count == 4 })
        #expect(try await harness.withHandler { $0.isReadingPaused }, "reading stops at the queue limit")
        // The four run concurrently, so they may start in any order.
        #expect(Set(gates.started) == Set(names.prefix(4)), "only the first four calls started")
        for name in names { gates.open(name) }
        var answered: [String] = []
        for _ in names {
            let reply = try #require(try await harness.reply())
            answered.append((reply["parameters"] as? [String: Any])?["gate"] as? String ?? "?")
        }
        #expect(answered == names, "every call answered, in order")
        #expect(try await harness.withHandler { $0.isReadingPaused } == false, "reading resumes")
        try await harness.finish()
    }

    @Test func aClientThatDoesNotReadIsNotReadEither() async throws {
        let gates = Gates()
        gates.open("a")
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        harness.channel.isWritable = false
        harness.channel.pipeline.fireChannelWritabilityChanged()
        #expect(try await harness.eventually { $0.isReadingPaused })
        harness.channel.isWritable = true
        harness.channel.pipeline.fireChannelWritabilityChanged()
        #expect(try await harness.eventually { !$0.isReadingPaused })
        #expect((try await harness.call(Self.call("io.discoverd.Test.Wait", gate: "a")))["parameters"] != nil)
        try await harness.finish()
    }

    @Test func aMessageOverTheSizeLimitIsRefusedAndTheConnectionClosed() async throws {
        let limits = ConnectionLimits(maxMessageSize: 1024, maxQueuedCalls: 8, maxSendBuffer: 1 << 20)
        let harness = try await ConnectionHarness(routes: TestMethods.routes(Gates()), limits: limits)
        // Without a NUL: the limit holds for a message still arriving, too.
        try await harness.send(bytes: [UInt8](repeating: UInt8(ascii: "x"), count: 1500))
        let reply = try #require(try await harness.reply())
        #expect(reply["error"] as? String == "io.discoverd.Daemon.MessageTooLarge")
        #expect((reply["parameters"] as? [String: Any])?["limit"] as? Int == 1024)
        try await harness.channel.closeFuture.get()
        #expect(!harness.channel.isActive)
    }

    @Test func aMessageJustUnderTheSizeLimitIsServed() async throws {
        let gates = Gates()
        let limits = ConnectionLimits(maxMessageSize: 1024, maxQueuedCalls: 8, maxSendBuffer: 1 << 20)
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates), limits: limits)
        let base = Self.call("io.discoverd.Test.Wait", gate: "")
        let gate = String(repeating: "g", count: 1024 - base.utf8.count)
        gates.open(gate)
        let reply = try await harness.call(Self.call("io.discoverd.Test.Wait", gate: gate))
        #expect((reply["parameters"] as? [String: Any])?["gate"] as? String == gate)
        try await harness.finish()
    }

    @Test func aSlowStreamReaderGetsItsTooSlowErrorAndKeepsTheConnection() async throws {
        let gates = Gates()
        gates.open("next")
        let limits = ConnectionLimits(maxMessageSize: 4096, maxQueuedCalls: 8, maxSendBuffer: 8192)
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates), limits: limits)
        harness.stall.stop()
        try await harness.send(Self.call("io.discoverd.Test.Flood", gate: "flood", count: 100, size: 500, more: true))
        try await harness.send(Self.call("io.discoverd.Test.Wait", gate: "next"))
        // The stream ends on its own once 8 KiB are unsent; the call behind it then runs.
        #expect(try await harness.eventually { _ in gates.started == ["flood", "next"] })
        #expect(try await harness.eventually { _ in harness.registry.streamCount == 0 }, "the stream's task ended")
        // The client reads again: everything up to the limit, then the error as the stream's last reply.
        harness.resumeReading()
        var events = 0
        var last: [String: Any]?
        while let reply = try await harness.reply(timeout: .seconds(2)) {
            if reply["continues"] as? Bool == true {
                events += 1
                continue
            }
            last = reply
            break
        }
        #expect(events > 0 && events < 100, "the reader got what fit, not everything: \(events)")
        #expect(last?["error"] as? String == "io.discoverd.Discovery.SubscriberTooSlow")
        let next = try #require(try await harness.reply())
        #expect((next["parameters"] as? [String: Any])?["gate"] as? String == "next")
        #expect(harness.channel.isActive, "the connection goes on")
        try await harness.finish()
    }

    @Test func aSlowReaderOfAStreamWithoutTooSlowErrorLosesTheConnection() async throws {
        let limits = ConnectionLimits(maxMessageSize: 4096, maxQueuedCalls: 8, maxSendBuffer: 8192)
        let harness = try await ConnectionHarness(routes: TestMethods.routes(Gates()), limits: limits)
        harness.stall.stop()
        try await harness.send(
            Self.call("io.discoverd.Test.FloodWithoutError", gate: "flood", count: 100, size: 500, more: true))
        try await harness.channel.closeFuture.get()
        #expect(!harness.channel.isActive)
        #expect(try await eventuallyTrue { harness.registry.streamCount == 0 }, "the stream's task was cancelled")
    }

    @Test func aConnectionOverTheLimitIsRefusedWithOneError() async throws {
        let server = VarlinkServer(
            settings: .init(socketPath: "/unused", maxConnections: 1, limits: ConnectionHarness.defaultLimits),
            router: MethodRouter(RouteTable(), logger: .init(label: "test")), registry: ConnectionRegistry(),
            group: NIOAsyncTestingEventLoop(), logger: .init(label: "test"))
        var channels: [NIOAsyncTestingChannel] = []
        for _ in 0..<2 {
            let channel = NIOAsyncTestingChannel()
            try await channel.testingEventLoop.executeInContext { try server.initialize(channel) }
            try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/harness")).get()
            channels.append(channel)
        }
        #expect(channels[0].isActive)
        let refusal = try #require(try await channels[1].readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: refusal).contains("io.discoverd.Daemon.TooManyConnections"))
        #expect(String(buffer: refusal).contains(#""limit":1"#))
        try await channels[1].closeFuture.get()
        // A reload raises the limit: the next connection is served.
        server.updateLimits(maxConnections: 2, connection: ConnectionHarness.defaultLimits)
        let third = NIOAsyncTestingChannel()
        try await third.testingEventLoop.executeInContext { try server.initialize(third) }
        #expect(try await third.testingEventLoop.executeInContext {
            (try? third.pipeline.syncOperations.handler(type: VarlinkConnectionHandler.self)) != nil
        })
        for channel in channels + [third] { _ = try? await channel.finish(acceptAlreadyClosed: true) }
    }
}

/// Polls `condition` until it holds (false after `timeout`, a bound against hangs).
func eventuallyTrue(timeout: Duration = .seconds(10), _ condition: @Sendable () -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}

/// The hot path of the handler: synchronous answers keep their slot, a read batch is flushed once.
@Suite struct ConnectionHandlerHotPathTests {
    static func instant(_ gate: String) -> String {
        #"{"method":"io.discoverd.Test.Instant","parameters":{"gate":"\#(gate)"}}"#
    }

    @Test func aSynchronousAnswerBehindASlowCallWaitsForItsTurn() async throws {
        let gates = Gates()
        gates.open("hit")
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        try await harness.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "slow"))
        try await harness.send(Self.instant("hit"))
        #expect(try await harness.eventually { $0.heldReplyCount == 1 }, "the hit is answered and held")
        #expect(gates.started.contains("immediate hit"), "answered synchronously, not by its task handler")
        #expect(!gates.started.contains("hit"))
        #expect(try await harness.pendingReplies().isEmpty, "nothing is written before the slow call answers")
        gates.open("slow")
        let first = try #require(try await harness.reply())
        let second = try #require(try await harness.reply())
        #expect((first["parameters"] as? [String: Any])?["gate"] as? String == "slow")
        #expect((second["parameters"] as? [String: Any])?["gate"] as? String == "hit")
        try await harness.finish()
    }

    @Test func aMissTakesTheTaskHandler() async throws {
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        try await harness.send(Self.instant("later"))
        #expect(try await harness.eventually { _ in gates.started == ["later"] })
        gates.open("later")
        #expect(((try await harness.reply())?["parameters"] as? [String: Any])?["gate"] as? String == "later")
        try await harness.finish()
    }

    @Test func aReadBatchOfHitsIsFlushedOnceAndWorkAfterTheWriteRunsAfterTheFlush() async throws {
        let gates = Gates()
        let names = (0..<8).map { "hit\($0)" }
        for name in names { gates.open(name) }
        let harness = try await ConnectionHarness(routes: TestMethods.routes(gates))
        let flushesBefore = harness.stall.flushCount
        let bytes: [UInt8] = names.flatMap { name -> [UInt8] in Array(Self.instant(name).utf8) + [0] }
        try await harness.send(bytes: bytes)
        #expect(harness.stall.flushCount - flushesBefore == 1, "eight replies, one flush")
        var answered: [String] = []
        for _ in names {
            let reply = try #require(try await harness.reply())
            answered.append((reply["parameters"] as? [String: Any])?["gate"] as? String ?? "?")
        }
        #expect(answered == names)
        // Every afterWrite ran once, after all the replies were answered synchronously.
        let started = gates.started
        #expect(started == names.map { "immediate " + $0 } + names.map { "after " + $0 })
        try await harness.finish()
    }

    @Test func theHotMethodsParametersAreReadByTheScanner() async throws {
        let gates = Gates()
        let router = MethodRouter(TestMethods.routes(gates), logger: .init(label: "test"))
        let call = try router.decode(ArraySlice(Array(Self.instant("x").utf8)))
        #expect(call.decodedParameters == nil, "GateParameters is not scannable: Codable reads it")
        var routes = RouteTable()
        routes.register(Methods.resolveHTTPS) { _, _ in throw VarlinkError.resolverTimeout }
        let hot = try MethodRouter(routes, logger: .init(label: "test")).decode(
            ArraySlice(Array(#"{"method":"io.discoverd.Resolver.ResolveHTTPS","parameters":{"name":"a.test"}}"#.utf8)))
        #expect(hot.decodedParameters as? ResolveHTTPSParameters == ResolveHTTPSParameters(name: "a.test"))
    }
}
