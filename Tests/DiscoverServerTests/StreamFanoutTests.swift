@testable import DiscoverServer
import NIOCore
import NIOEmbedded
import Testing

/// ``StreamFanout``'s grouping: one batch per event loop, whatever the number of calls on it.
@Suite struct StreamFanoutTests {
    @Test func callsAreGroupedByEventLoop() async throws {
        let loops = [NIOAsyncTestingEventLoop(), NIOAsyncTestingEventLoop()]
        var harnesses: [ConnectionHarness] = []
        for index in 0..<6 {
            harnesses.append(try await ConnectionHarness(routes: RouteTable(), loop: loops[index % 2]))
        }
        var slots: [StreamSlot] = []
        for harness in harnesses {
            let loop = harness.channel.testingEventLoop
            slots.append(
                try await harness.withHandler { StreamSlot(outbox: NIOLoopBound($0, eventLoop: loop), slot: 0) })
        }
        var fanout = StreamFanout()
        for (id, slot) in slots.enumerated() { fanout.add(UInt64(id), slot) }
        #expect(fanout.count == 6)
        #expect(fanout.loopBatches.count == 2)
        #expect(fanout.loopBatches.map(\.targets.count).sorted() == [3, 3])
        #expect(Set(fanout.ids) == Set(0..<6))

        for id in [0, 2, 4] {
            let removed = fanout.remove(UInt64(id), slots[id])
            #expect(removed)
        }
        let again = fanout.remove(0, slots[0])
        #expect(!again, "removing twice is a no-op")
        #expect(fanout.count == 3)
        #expect(fanout.loopBatches.count == 1, "an event loop without calls has no batch")
        for id in [1, 3, 5] { fanout.remove(UInt64(id), slots[id]) }
        #expect(fanout.isEmpty && fanout.loopBatches.isEmpty)
        for harness in harnesses { try await harness.finish() }
    }
}
