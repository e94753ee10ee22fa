import DNSSDModel
import DiscoverAPI
@testable import DiscoverServer
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

/// A browse the test drives: the sink ``BrowseFanout`` gave it, how often it was started and whether it was
/// cancelled.
final class TestBrowseSource: Sendable {
    private struct State {
        var sinks: [BrowseSink] = []
        var terminated = 0
        var failure: DNSSDError?
    }

    private let state = NIOLockedValueBox(State())

    /// With `failure`, starting the browse throws it.
    init(failure: DNSSDError? = nil) {
        state.withLockedValue { $0.failure = failure }
    }

    var starts: Int { state.withLockedValue { $0.sinks.count } }
    var terminations: Int { state.withLockedValue { $0.terminated } }

    var source: BrowseFanout.Source {
        { [self] sink in
            let failure = state.withLockedValue { state -> DNSSDError? in
                state.sinks.append(sink)
                return state.failure
            }
            if let failure { throw failure }
            return BrowseSubscription { [self] in state.withLockedValue { $0.terminated += 1 } }
        }
    }

    /// Sends events on the latest browse, as Avahi's thread would.
    func yield(_ events: BrowseEvent...) {
        let sink = state.withLockedValue { $0.sinks.last }
        for event in events { sink?.event(event) }
    }

    func finish(throwing error: DNSSDError) {
        state.withLockedValue { $0.sinks.last }?.end(error)
    }
}

/// `Browse` streams through ``BrowseFanout`` on real connection handlers (`NIOAsyncTestingChannel`): one browse
/// for every call with the same parameters, each call's order, late joiners, the slow-reader rule, leaving.
@Suite struct BrowseFanoutTests {
    static let type = "_fan._tcp"
    static let key = BrowseFanout.Key(BrowseParameters(type: type))
    static let browse = #"{"method":"io.discoverd.Discovery.Browse","parameters":{"type":"\#(type)"},"more":true}"#

    static func routes(_ fanout: BrowseFanout, _ source: TestBrowseSource, gates: Gates = Gates()) -> RouteTable {
        var routes = TestMethods.routes(gates)
        routes.register(Methods.browse, whenReaderTooSlow: .subscriberTooSlow) { parameters, context in
            try await DiscoveryMethods.stream(parameters, context, fanout: fanout, source: source.source)
        }
        return routes
    }

    static func service(_ name: String, port: Int? = nil, padding: Int = 0) -> DNSSDService {
        DNSSDService(
            name: name, type: type, domain: "local", port: port,
            txt: padding > 0 ? ["pad": String(repeating: "p", count: padding)] : [:])
    }

    /// "event name" of a reply, "error NAME" for an error, "end" for a final reply without error.
    static func describe(_ reply: [String: Any]?) -> String {
        guard let reply else { return "none" }
        if let error = reply["error"] as? String { return "error \(error)" }
        let parameters = reply["parameters"] as? [String: Any] ?? [:]
        let event = parameters["event"] as? String ?? "?"
        let name = (parameters["service"] as? [String: Any])?["name"] as? String
        return [event, name].compactMap { $0 }.joined(separator: " ")
    }

    static func read(_ harness: ConnectionHarness, count: Int) async throws -> [String] {
        var replies: [String] = []
        for _ in 0..<count { replies.append(describe(try await harness.reply())) }
        return replies
    }

    static func browsing(_ count: Int, _ routes: RouteTable, loops: [NIOAsyncTestingEventLoop]) async throws
        -> [ConnectionHarness]
    {
        var harnesses: [ConnectionHarness] = []
        for index in 0..<count {
            let harness = try await ConnectionHarness(routes: routes, loop: loops[index % loops.count])
            try await harness.send(browse)
            harnesses.append(harness)
        }
        return harnesses
    }

    @Test func callsWithTheSameParametersShareOneBrowseAndGetEveryEventInOrder() async throws {
        let fanout = BrowseFanout()
        let source = TestBrowseSource()
        let loops = [NIOAsyncTestingEventLoop(), NIOAsyncTestingEventLoop()]
        let harnesses = try await Self.browsing(5, Self.routes(fanout, source), loops: loops)
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 5 && source.starts > 0 })
        #expect(source.starts == 1, "one browse for five calls")
        #expect(fanout.loopCount(Self.key) == 2, "five connections on two event loops: two jobs per event")

        source.yield(
            .added(Self.service("b")), .added(Self.service("a")), .allForNow, .changed(Self.service("a", port: 9)),
            .removed(Self.service("b")))
        for harness in harnesses {
            #expect(
                try await Self.read(harness, count: 5) == ["added b", "added a", "allForNow", "changed a", "removed b"])
        }
        for harness in harnesses { try await harness.finish() }
    }

    @Test func aCallJoiningLateGetsTheCurrentViewThenLiveEventsWithoutGapOrRepeat() async throws {
        let fanout = BrowseFanout()
        let source = TestBrowseSource()
        let routes = Self.routes(fanout, source)
        let early = try await ConnectionHarness(routes: routes)
        try await early.send(Self.browse)
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 1 && source.starts == 1 })
        source.yield(
            .added(Self.service("c")), .added(Self.service("b")), .allForNow, .removed(Self.service("c")),
            .added(Self.service("a")), .changed(Self.service("b", port: 7)))
        #expect(try await Self.read(early, count: 6).count == 6)

        let late = try await ConnectionHarness(routes: routes)
        try await late.send(Self.browse)
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 2 })
        source.yield(.added(Self.service("d")))
        let all = try await Self.read(late, count: 4)
        #expect(all == ["added a", "added b", "allForNow", "added d"], "present instances in name order, then live")
        #expect(try await late.pendingReplies().isEmpty, "nothing twice")
        #expect(Self.describe(try await early.reply()) == "added d")
        #expect(source.starts == 1, "the late call joined the running browse")
        try await early.finish()
        try await late.finish()
    }

    @Test func eventsOfAStreamBehindAnUnansweredCallAreHeldAndComeAfterItsReplyInOrder() async throws {
        let fanout = BrowseFanout()
        let source = TestBrowseSource()
        let gates = Gates()
        let harness = try await ConnectionHarness(routes: Self.routes(fanout, source, gates: gates))
        try await harness.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "first"))
        try await harness.send(Self.browse)
        #expect(
            try await eventuallyTrue { fanout.callCount(Self.key) == 1 && source.starts == 1 },
            "the stream runs beside the call")
        source.yield(.added(Self.service("a")), .added(Self.service("b")))
        let both = try ["a", "b"].map {
            try VarlinkReply.encode(BrowseEvent.added(Self.service($0)).wire, continues: true).count
        }.reduce(0, +)
        #expect(try await harness.eventually { $0.heldReplyBytes == both }, "both events are held")
        #expect(try await harness.pendingReplies().isEmpty, "held behind the first call")
        gates.open("first")
        #expect(((try await harness.reply())?["parameters"] as? [String: Any])?["gate"] as? String == "first")
        source.yield(.allForNow)
        #expect(try await Self.read(harness, count: 3) == ["added a", "added b", "allForNow"])
        try await harness.finish()
    }

    @Test func aChangedInstanceIsReplayedAsAddedWithItsCurrentState() async throws {
        var snapshot = BrowseSnapshot()
        for event: BrowseEvent in [.added(Self.service("x")), .changed(Self.service("x", port: 80)), .allForNow] {
            snapshot.apply(try EncodedBrowseEvent(event))
        }
        let expected = [
            try VarlinkReply.encode(BrowseEvent.added(Self.service("x", port: 80)).wire, continues: true),
            try VarlinkReply.encode(BrowseEvent.allForNow.wire, continues: true),
        ]
        #expect(snapshot.replay == expected)
        snapshot.apply(try EncodedBrowseEvent(.removed(Self.service("x"))))
        #expect(snapshot.replay == [expected[1]])
        #expect(BrowseSnapshot().replay.isEmpty, "nothing before the first event, not even allForNow")
    }

    @Test func aSlowReaderGetsSubscriberTooSlowAloneAndTheOthersGetEverything() async throws {
        let fanout = BrowseFanout()
        let source = TestBrowseSource()
        let gates = Gates()
        gates.open("after")
        let routes = Self.routes(fanout, source, gates: gates)
        let small = ConnectionLimits(maxMessageSize: 4096, maxQueuedCalls: 8, maxSendBuffer: 8192)
        let slow = try await ConnectionHarness(routes: routes, limits: small)
        let fast = try await ConnectionHarness(routes: routes, limits: small)
        slow.stall.stop()
        try await slow.send(Self.browse)
        try await slow.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "after"))
        try await fast.send(Self.browse)
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 2 && source.starts == 1 })

        let count = 60
        for index in 0..<count { source.yield(.added(Self.service("s\(index)", padding: 400))) }
        var fastReplies: [String] = []
        for _ in 0..<count { fastReplies.append(Self.describe(try await fast.reply())) }
        #expect(fastReplies == (0..<count).map { "added s\($0)" }, "the reading call got every event, in order")
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 1 }, "the slow call left the browse")
        #expect(try await eventuallyTrue { gates.started == ["after"] }, "the call behind the ended stream ran")

        slow.resumeReading()
        var events: [String] = []
        var final = "none"
        while let reply = try await slow.reply(timeout: .seconds(2)) {
            if reply["continues"] as? Bool == true {
                events.append(Self.describe(reply))
            } else {
                final = Self.describe(reply)
                break
            }
        }
        #expect(!events.isEmpty && events.count < count, "what fit, then the end: \(events.count)")
        #expect(events == (0..<events.count).map { "added s\($0)" }, "a prefix, without a gap")
        #expect(final == "error io.discoverd.Discovery.SubscriberTooSlow")
        #expect(((try await slow.reply())?["parameters"] as? [String: Any])?["gate"] as? String == "after")
        #expect(slow.channel.isActive)

        source.yield(.allForNow)
        #expect(Self.describe(try await fast.reply()) == "allForNow", "the browse goes on for the others")
        #expect(source.starts == 1 && source.terminations == 0)
        try await slow.finish()
        try await fast.finish()
    }

    @Test func callsLeavingUnsubscribeAndTheLastOneStopsTheBrowse() async throws {
        let fanout = BrowseFanout()
        let source = TestBrowseSource()
        let routes = Self.routes(fanout, source)
        let harnesses = try await Self.browsing(2, routes, loops: [NIOAsyncTestingEventLoop()])
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 2 && source.starts == 1 })
        try await harnesses[0].finish()
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 1 })
        #expect(source.terminations == 0, "one call is still browsing")
        source.yield(.added(Self.service("a")))
        #expect(Self.describe(try await harnesses[1].reply()) == "added a")
        try await harnesses[1].finish()
        #expect(try await eventuallyTrue { fanout.browseCount == 0 && source.terminations == 1 })

        // A new call starts a new browse.
        let again = try await Self.browsing(1, routes, loops: [NIOAsyncTestingEventLoop()])
        #expect(try await eventuallyTrue { source.starts == 2 && fanout.callCount(Self.key) == 1 })
        source.yield(.added(Self.service("b")))
        #expect(Self.describe(try await again[0].reply()) == "added b", "no replay of the stopped browse")
        try await again[0].finish()
    }

    @Test func theBrowseEndingEndsEveryCallAfterItsEventsAndReleasesTheBarrier() async throws {
        let fanout = BrowseFanout()
        let source = TestBrowseSource()
        let gates = Gates()
        gates.open("after")
        let routes = Self.routes(fanout, source, gates: gates)
        let harnesses = try await Self.browsing(3, routes, loops: [NIOAsyncTestingEventLoop()])
        for harness in harnesses { try await harness.send(ConnectionHandlerTests.call("io.discoverd.Test.Wait", gate: "after")) }
        #expect(try await eventuallyTrue { fanout.callCount(Self.key) == 3 && source.starts == 1 })
        source.yield(.added(Self.service("a")))
        source.finish(throwing: DNSSDError(.avahiUnavailable, "gone"))
        for harness in harnesses {
            let replies = try await Self.read(harness, count: 2)
            #expect(replies == ["added a", "error io.discoverd.Discovery.AvahiUnavailable"])
            #expect(((try await harness.reply())?["parameters"] as? [String: Any])?["gate"] as? String == "after")
        }
        #expect(fanout.browseCount == 0)
        for harness in harnesses { try await harness.finish() }
    }

    @Test func aBrowseThatCannotStartAnswersEveryCallWithItsError() async throws {
        let fanout = BrowseFanout()
        let source = TestBrowseSource(failure: DNSSDError(.invalidServiceType, "bad type"))
        let harness = try await ConnectionHarness(routes: Self.routes(fanout, source))
        let reply = try await harness.call(Self.browse)
        #expect(reply["error"] as? String == "io.discoverd.Discovery.InvalidServiceType")
        #expect(fanout.browseCount == 0)
        try await harness.finish()
    }

    @Test func differentParametersAreDifferentBrowses() {
        let plain = BrowseFanout.Key(BrowseParameters(type: "_a._tcp"))
        #expect(plain == BrowseFanout.Key(BrowseParameters(type: "_a._tcp", resolve: false, timeoutMs: 5)))
        #expect(plain != BrowseFanout.Key(BrowseParameters(type: "_a._tcp", resolve: true)))
        #expect(plain != BrowseFanout.Key(BrowseParameters(type: "_a._tcp", domain: "example.com")))
        #expect(plain != BrowseFanout.Key(BrowseParameters(type: "_a._tcp", subtype: "_x")))
        #expect(plain != BrowseFanout.Key(BrowseParameters(type: "_a._tcp", interface: "eth0")))
    }
}
