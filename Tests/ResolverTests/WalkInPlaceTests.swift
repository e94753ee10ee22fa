import DNSCore
import Foundation
import Synchronization
import Testing

@testable import Resolver

/// An upstream that also asks without a task (``DNSTransport/startQuery(_:dnssecOK:completion:)``), as
/// ``UpstreamClient`` does for one DoT or DoH upstream: scripted replies, the questions counted by the way they were
/// asked, and replies to started queries held back until ``release()`` when asked to.
final class StartingTransport: DNSTransport {
    private let replies: Mutex<[String: DNSMessage]>
    private let counts = Mutex<(started: Int, awaited: Int)>((0, 0))
    private let held = Mutex<(holding: Bool, waiting: [@Sendable () -> Void])>((false, []))

    init(_ replies: [String: DNSMessage] = [:]) { self.replies = Mutex(replies) }

    var started: Int { counts.withLock { $0.started } }
    var awaited: Int { counts.withLock { $0.awaited } }

    func set(_ name: String, _ type: RRType, _ message: DNSMessage) {
        replies.withLock { $0[ReplyTransport.key(name, type)] = message }
    }

    func remove(_ name: String, _ type: RRType) {
        _ = replies.withLock { $0.removeValue(forKey: ReplyTransport.key(name, type)) }
    }

    /// Started queries wait for ``release()``.
    func hold() { held.withLock { $0.holding = true } }

    func release() {
        let waiting = held.withLock { state in
            state.holding = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for answer in waiting { answer() }
    }

    private func exchange(_ question: DNSQuestion) -> Result<DNSExchange, DNSTransportError> {
        let attempt = QueryAttempt(
            name: question.name, type: question.type, server: "test", transport: .tls, milliseconds: 1, rcode: "NOERROR")
        guard var message = replies.withLock({ $0[ReplyTransport.key(question.name, question.type)] }) else {
            return .failure(DNSTransportError(code: .timeout, message: "no answer", attempts: [attempt]))
        }
        message.questions = [question]
        return .success(DNSExchange(message: message, attempts: [attempt]))
    }

    func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
        try await query(question, dnssecOK: false)
    }

    func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange {
        counts.withLock { $0.awaited += 1 }
        return try exchange(question).get()
    }

    func startQuery(
        _ question: DNSQuestion, dnssecOK: Bool,
        completion: @escaping @Sendable (Result<DNSExchange, DNSTransportError>) -> Void
    ) -> Bool {
        counts.withLock { $0.started += 1 }
        let answer: @Sendable () -> Void = { completion(self.exchange(question)) }
        let holding = held.withLock { state -> Bool in
            if state.holding { state.waiting.append(answer) }
            return state.holding
        }
        if !holding { answer() }
        return true
    }
}

/// The DNS stub's miss without a task (``DNSResolver/walkInPlace(_:type:class:options:after:completion:)``): the
/// same answers, steps, counters and coalescing as the walk in a task, whichever way it ends.
@Suite("The walk in place")
struct WalkInPlaceTests {
    static let options = WalkOptions(nameIsNormalized: true)

    /// cachedWalk, then walkInPlace, as the stub calls them; the trace or the error.
    static func miss(
        _ resolver: DNSResolver, _ name: String, _ type: RRType = .a
    ) async -> Result<WalkTrace, ResolverError> {
        var trace = WalkTrace(keepingSteps: true, keepingDependencies: false)
        if resolver.cachedWalk(name, type: type, options: options, trace: &trace) != nil {
            return .success(trace)
        }
        return await withCheckedContinuation { continuation in
            resolver.walkInPlace(name, type: type, options: options, after: trace) { continuation.resume(returning: $0) }
        }
    }

    @Test func aMissEndsInTheCallbackOfItsQuery() async throws {
        let transport = StartingTransport(["www.example. A": reply([aRecord("www.example.", [192, 0, 2, 1])])])
        let resolver = DNSResolver(transport: transport)
        let trace = try await Self.miss(resolver, "www.example.").get()
        #expect(Array(trace.steps).map(\.source) == [.network])
        #expect(trace.steps.last?.answer.payload?.records == [aRecord("www.example.", [192, 0, 2, 1])])
        #expect(transport.started == 1 && transport.awaited == 0)
        // Stored, and the miss counted once.
        #expect(resolver.cache.statistics.misses == 1)
        let again = try await Self.miss(resolver, "www.example.").get()
        #expect(Array(again.steps).map(\.source) == [.cache])
        #expect(transport.started == 1)
    }

    @Test func aChainPastTheReplyIsFollowedByTheWalk() async throws {
        let transport = StartingTransport([
            "alias.example. A": reply([cnameRecord("alias.example.", "target.other.")]),
            "target.other. A": reply([aRecord("target.other.", [192, 0, 2, 7])]),
        ])
        let resolver = DNSResolver(transport: transport)
        let trace = try await Self.miss(resolver, "alias.example.").get()
        #expect(Array(trace.steps).map(\.source) == [.network, .network])
        #expect(trace.steps.last?.answer.payload?.records == [aRecord("target.other.", [192, 0, 2, 7])])
        // The first hop without a task, the second from the walk's task; nothing asked twice.
        #expect(transport.started == 1 && transport.awaited == 1)
    }

    @Test func aFailedQueryServesTheExpiredNegativeAnswer() async throws {
        let clock = ManualClock()
        let transport = StartingTransport([
            "gone.example. A": reply([], authority: [ReplyScrubberTests.soa("example.", ttl: 60, minimum: 60)], rcode: .nxDomain)
        ])
        let resolver = DNSResolver(transport: transport, clock: clock)
        guard case .success = await Self.miss(resolver, "gone.example.") else {
            Issue.record("the NXDOMAIN is an answer to the stub")
            return
        }
        clock.advance(61)
        transport.remove("gone.example.", .a)  // the upstream now times out
        let trace = try await Self.miss(resolver, "gone.example.").get()
        // RFC 8767 §4: the expired answer stands in; the walk was handed the failed query, not asked again.
        #expect(Array(trace.steps).map(\.source) == [.expiredCache])
        guard case .nxdomain = trace.steps.last?.answer else { Issue.record("expected the stale NXDOMAIN"); return }
        #expect(transport.started == 2 && transport.awaited == 0)
    }

    @Test func aFailureWithNothingToServeIsTheWalksError() async throws {
        let transport = StartingTransport()
        let resolver = DNSResolver(transport: transport)
        guard case .failure(let error) = await Self.miss(resolver, "nothing.example.") else {
            Issue.record("expected an error")
            return
        }
        #expect(error.code == .timeout)
        #expect(error.attempts.count == 1)
        #expect(transport.started == 1 && transport.awaited == 0)
    }

    @Test func aQuestionInFlightIsJoinedNotAskedAgain() async throws {
        let transport = StartingTransport(["busy.example. A": reply([aRecord("busy.example.", [192, 0, 2, 9])])])
        transport.hold()
        let resolver = DNSResolver(transport: transport)
        async let first = Self.miss(resolver, "busy.example.")
        // The first miss is in flight (started, held) before the second asks.
        for _ in 0..<300 where transport.started == 0 { try await Task.sleep(for: .milliseconds(10)) }
        async let second = Self.miss(resolver, "busy.example.")
        try await Task.sleep(for: .milliseconds(50))
        transport.release()
        let traces = try await [first.get(), second.get()]
        for trace in traces {
            #expect(trace.steps.last?.answer.payload?.records == [aRecord("busy.example.", [192, 0, 2, 9])])
        }
        #expect(transport.started == 1 && transport.awaited == 0)
        // The second joined the first's query (not a cache hit after it).
        #expect(resolver.inflightStatistics.coalesced == 1)
    }

    @Test func aTransportThatAsksOnlyInATaskStillAnswers() async throws {
        let transport = ReplyTransport(["plain.example. A": reply([aRecord("plain.example.", [192, 0, 2, 5])])])
        let resolver = DNSResolver(transport: transport)
        let trace = try await Self.miss(resolver, "plain.example.").get()
        #expect(Array(trace.steps).map(\.source) == [.network])
        #expect(transport.count("plain.example.", .a) == 1)
        #expect(resolver.cache.statistics.misses == 1)
    }
}
