import DNSCore
import Testing

@testable import Resolver

/// A question run in place by the task that started it (the DNS stub's): it counts in the in-flight table like
/// one in a task of its own, later askers join it and get its outcome, and it leaves the table when it ends.
@Suite struct InPlaceFetchTests {
    static func key(_ name: String) -> InflightKey {
        InflightKey(cacheKey: CacheKey(name: name, type: 1, dnsClass: 1), dnssecOK: false, checkingDisabled: false)
    }

    /// An outcome told apart by its reason.
    static func outcome(_ reason: String) -> DNSResolver.FetchOutcome {
        .failure(ResolverError(code: .timeout, name: "a.", reason: reason))
    }

    static func reason(_ outcome: DNSResolver.FetchOutcome) -> String? {
        guard case .failure(let error) = outcome else { return nil }
        return error.reason
    }

    @Test func joinersGetTheRunnersOutcomeAndTheEntryLeavesTheTable() async throws {
        let table = InflightTable(limits: QueryLimits(maxQueries: 2, maxQueriesPerClient: 1))
        let client = QueryClient.uid(1000)
        guard case .run(let fetch) = table.admitInPlace(Self.key("a."), client: client) else {
            Issue.record("the first asker must run the question")
            return
        }
        // The client's one place is taken; another question of it is refused, the same question joins.
        guard case .refused(global: false) = table.admitInPlace(Self.key("b."), client: client) else {
            Issue.record("the client's limit must hold for in-place questions")
            return
        }
        var joined: [InflightTable.Running] = []
        for _ in 0..<3 {
            guard case .joined(let running) = table.admitInPlace(Self.key("a."), client: client) else {
                Issue.record("later askers must join the question in flight")
                return
            }
            joined.append(running)
        }
        // Waiting before or after the outcome comes: both must get it.
        let joiners = joined.map { running in Task { await running.value } }
        // Also through the task-based admission (an API caller asking the same question).
        guard case .joined(let running) = table.admit(Self.key("a."), client: nil, body: { Self.outcome("the joiner's own") }) else {
            Issue.record("a task-based asker must join the question run in place")
            return
        }
        #expect(table.statistics.inflight == 1)
        try await Task.sleep(for: .milliseconds(20))  // let some joiners wait (not asserted on: either path is right)
        table.finishInPlace(Self.key("a."), fetch, outcome: Self.outcome("the runner's"))
        for joiner in joiners { #expect(Self.reason(await joiner.value) == "the runner's") }
        #expect(Self.reason(await running.value) == "the runner's")
        #expect(table.statistics.inflight == 0)
        #expect(table.statistics.coalesced == 4)
        // After it ended, the question is asked anew (and a late joiner of the old one still gets its outcome).
        guard case .run = table.admitInPlace(Self.key("a."), client: client) else {
            Issue.record("an ended question must not be joined")
            return
        }
        #expect(Self.reason(await fetch.value) == "the runner's")
    }
}
