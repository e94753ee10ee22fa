import DNSCore
import Foundation
import Synchronization
import Testing

@testable import Resolver

/// A wall clock that only moves when told to.
final class ManualClock: CacheClock {
    private let time: Mutex<Double>

    init(_ start: Double = 1_800_000_000) {
        time = Mutex(start)
    }

    func now() -> Double {
        time.withLock { $0 }
    }

    func advance(_ seconds: Double) {
        time.withLock { $0 += seconds }
    }
}

/// Stands in for the resolver's parsed answer.
struct TestAnswer: Codable, Sendable, Equatable {
    var addresses: [String]

    init(_ addresses: String...) {
        self.addresses = addresses
    }
}

typealias TestCache = OptimisticCache<TestAnswer>

func makeCache(_ configure: (inout CachePolicy) -> Void = { _ in }) -> (TestCache, ManualClock) {
    var policy = CachePolicy()
    configure(&policy)
    let clock = ManualClock()
    return (TestCache(policy: policy, clock: clock), clock)
}

let exampleKey = CacheKey(name: "example.com", type: 65)
let exampleAnswer = CacheAnswer.positive(TestAnswer("192.0.2.1"))

/// A fresh directory under the system temporary directory, removed by the caller with `remove()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("discoverd-cache-tests-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }

    func contents() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url.path).sorted()
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// Writes `data` as a state file the daemon trusts (mode 0600 set exactly): the umask cannot be relied on, since
    /// a test running in parallel may change it for the whole process.
    func writePrivate(_ data: Data, to file: URL) throws {
        try data.write(to: file)
        guard chmod(file.path, 0o600) == 0 else { throw CocoaError(.fileWriteNoPermission) }
    }
}
