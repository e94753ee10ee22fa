import DNSSDModel
import Synchronization
import Testing

@testable import DNSSD

/// The browse over every browse domain: the link's stream and the unicast domains' streams as one.
@Suite("Merged browse over every browse domain")
struct MergedBrowseTests {
    static func service(_ name: String, domain: String) -> DNSSDService {
        DNSSDService(name: name, type: "_http._tcp", domain: domain)
    }

    /// A stream fed by the test.
    static func source() -> (AsyncThrowingStream<BrowseEvent, any Error>, AsyncThrowingStream<BrowseEvent, any Error>.Continuation) {
        AsyncThrowingStream.makeStream()
    }

    @Test func allForNowComesOnceAfterEverySourceSaidIt() async throws {
        let (link, linkFeed) = Self.source()
        let (unicast, unicastFeed) = Self.source()
        var events = MergedBrowse.merge([link, unicast]).makeAsyncIterator()
        linkFeed.yield(.added(Self.service("A", domain: "local")))
        linkFeed.yield(.allForNow)
        #expect(try await events.next() == .added(Self.service("A", domain: "local")))
        unicastFeed.yield(.added(Self.service("B", domain: "example.com")))
        #expect(try await events.next() == .added(Self.service("B", domain: "example.com")))
        unicastFeed.yield(.allForNow)
        #expect(try await events.next() == .allForNow)
        linkFeed.finish()
        #expect(try await events.next() == nil, "the link's end ends the merged stream")
    }

    @Test func aFailingUnicastDomainOnlyStopsContributing() async throws {
        let (link, linkFeed) = Self.source()
        let (unicast, unicastFeed) = Self.source()
        var events = MergedBrowse.merge([link, unicast]).makeAsyncIterator()
        unicastFeed.finish(throwing: DNSSDError(.timeout, "the zone's server is gone"))
        linkFeed.yield(.added(Self.service("A", domain: "local")))
        #expect(try await events.next() == .added(Self.service("A", domain: "local")))
        linkFeed.yield(.allForNow)
        #expect(try await events.next() == .allForNow, "the failed source counts as done")
        linkFeed.finish(throwing: DNSSDError(.avahiUnavailable, "avahi-daemon went away"))
        await #expect(throws: DNSSDError.self) { _ = try await events.next() }
    }

    @Test func oneSourceIsPassedThroughUnchanged() async throws {
        let (link, linkFeed) = Self.source()
        var events = MergedBrowse.merge([link]).makeAsyncIterator()
        linkFeed.yield(.allForNow)
        linkFeed.finish()
        #expect(try await events.next() == .allForNow)
        #expect(try await events.next() == nil)
    }

    @Test func aOneShotBrowseReturnsWhatIsPresentAtAllForNowSorted() async throws {
        let (stream, feed) = Self.source()
        feed.yield(.added(Self.service("B", domain: "local")))
        feed.yield(.added(Self.service("A", domain: "local")))
        feed.yield(.added(Self.service("C", domain: "local")))
        feed.yield(.removed(Self.service("C", domain: "local")))
        feed.yield(.allForNow)
        let found = try await ServiceDiscovery.collect(stream, timeout: .seconds(30))
        #expect(found.map(\.name) == ["A", "B"])
    }

    @Test func aOneShotBrowseReturnsWhatItHasWhenTheTimeRunsOut() async throws {
        let (stream, feed) = Self.source()
        feed.yield(.added(Self.service("A", domain: "local")))
        let found = try await ServiceDiscovery.collect(stream, timeout: .milliseconds(100))
        #expect(found.map(\.name) == ["A"])
        feed.finish()
    }

    @Test func theSinkFormMergesAllForNowAndEndsWithTheFirstSource() {
        let received = Received()
        let merged = MergedBrowse.Sink(
            BrowseSink(event: { received.append(.event($0)) }, end: { received.append(.end($0 == nil)) }), sources: 2)
        let link = merged.sink(for: 0)
        let unicast = merged.sink(for: 1)
        link.event(.added(Self.service("A", domain: "local")))
        link.event(.allForNow)
        #expect(received.all == [.event(.added(Self.service("A", domain: "local")))], "one source is not all")
        unicast.end(DNSSDError(.timeout, "the zone's server is gone"))
        #expect(received.all.last == .event(.allForNow), "a failed unicast source counts as done, and ends nothing")
        link.end(nil)
        #expect(received.all.last == .end(true), "the link's end is the end")
    }

    @Test func forwardingAStreamEndsWithItAndStopsWhenCancelled() async throws {
        let received = Received()
        let (stream, feed) = Self.source()
        let subscription = MergedBrowse.forward(
            stream, to: BrowseSink(event: { received.append(.event($0)) }, end: { received.append(.end($0 == nil)) }))
        feed.yield(.allForNow)
        feed.finish()
        for _ in 0..<500 where received.all.count < 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(received.all == [.event(.allForNow), .end(true)])
        subscription.cancel()
    }
}

/// What a test sink received, in order.
final class Received: Sendable {
    enum Item: Equatable, Sendable {
        case event(BrowseEvent)
        /// true: finished without an error.
        case end(Bool)
    }

    private let items = Mutex<[Item]>([])
    func append(_ item: Item) { items.withLock { $0.append(item) } }
    var all: [Item] { items.withLock { $0 } }
}
