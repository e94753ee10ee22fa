import NIOCore
import NIOEmbedded
import Testing

@testable import Resolver

/// The one timer of a pool's try deadlines (`TryDeadlines`): every try still waiting at its deadline times out,
/// in deadline order whatever the order they were added in, and a try that ended is left alone.
@Suite struct TryDeadlinesTests {
    final class Holder: TryHolder {
        var waiting: Set<Int> = []
        var timedOut: [Int] = []
        func timedOut(_ number: Int) {
            if waiting.remove(number) != nil { timedOut.append(number) }
        }
        func waits(_ number: Int) -> Bool { waiting.contains(number) }
    }

    @Test func waitingTriesTimeOutInDeadlineOrderAndEndedOnesAreLeftAlone() throws {
        let loop = EmbeddedEventLoop()
        defer { try? loop.syncShutdownGracefully() }
        let deadlines = TryDeadlines(loop: loop)
        let holder = Holder()
        let start = loop.now
        // Added out of order (a shorter timeout after a longer one), as a per-call timeout may.
        for (number, ms) in [(1, 300), (2, 100), (3, 200), (4, 200), (5, 1000)] {
            holder.waiting.insert(number)
            deadlines.add(start + .milliseconds(Int64(ms)), link: holder, number: number)
        }
        holder.waiting.remove(3)  // ended before its deadline (a reply came)
        loop.advanceTime(by: .milliseconds(99))
        #expect(holder.timedOut.isEmpty)
        loop.advanceTime(by: .milliseconds(1))
        #expect(holder.timedOut == [2])
        loop.advanceTime(by: .milliseconds(200))
        #expect(holder.timedOut == [2, 4, 1])
        // A later try gets its own deadline after the timer was re-armed for the last one.
        holder.waiting.insert(6)
        deadlines.add(loop.now + .milliseconds(50), link: holder, number: 6)
        loop.advanceTime(by: .milliseconds(50))
        #expect(holder.timedOut == [2, 4, 1, 6])
        #expect(holder.waiting == [5])
        loop.advanceTime(by: .milliseconds(700))
        #expect(holder.timedOut == [2, 4, 1, 6, 5])
        #expect(holder.waiting.isEmpty)
    }

    @Test func manyTriesAreTimedOutAndTheQueueStartsOverEmpty() {
        let loop = EmbeddedEventLoop()
        defer { try? loop.syncShutdownGracefully() }
        let deadlines = TryDeadlines(loop: loop)
        let holder = Holder()
        for number in 0..<2000 {
            holder.waiting.insert(number)
            deadlines.add(loop.now + .milliseconds(Int64(1000 + number)), link: holder, number: number)
            if number % 2 == 0 { holder.waiting.remove(number) }
        }
        loop.advanceTime(by: .milliseconds(1500))
        #expect(holder.timedOut == Array(stride(from: 1, to: 501, by: 2)))
        loop.advanceTime(by: .seconds(2))
        #expect(holder.timedOut == Array(stride(from: 1, to: 2000, by: 2)))
        #expect(holder.waiting.isEmpty)
    }
}
