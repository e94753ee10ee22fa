import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// CLOCK_MONOTONIC in ns: the same clock as `BrowseBenchmarkHook` and Python's `time.monotonic_ns()`.
func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

func log(_ message: String) {
    FileHandle.standardError.write(Data("discovery-bench: \(message)\n".utf8))
}

func fail(_ message: String) -> Never {
    log("error: \(message)")
    exit(1)
}

/// Command-line options: `--key value` pairs and bare flags.
struct Options {
    var values: [String: String] = [:]
    var positional: [String] = []

    init(_ args: ArraySlice<String>) {
        var it = args.makeIterator()
        while let arg = it.next() {
            if arg.hasPrefix("--") {
                let key = String(arg.dropFirst(2))
                if let eq = key.firstIndex(of: "=") {
                    values[String(key[..<eq])] = String(key[key.index(after: eq)...])
                } else if ["quick", "resolve-check"].contains(key) {
                    values[key] = "1"
                } else {
                    values[key] = it.next() ?? ""
                }
            } else {
                positional.append(arg)
            }
        }
    }

    func int(_ key: String, _ fallback: Int) -> Int { values[key].flatMap(Int.init) ?? fallback }
    func string(_ key: String, _ fallback: String) -> String { values[key] ?? fallback }
    func flag(_ key: String) -> Bool { values[key] != nil }
}

/// Which event of which instance.
struct EventKey: Hashable, Sendable {
    var name: String
    var added: Bool
}

/// Per-event receipt counts, for the driver to know when every subscriber has an event.
final class ReceiptCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [EventKey: Int] = [:]

    func add(_ key: EventKey) {
        lock.lock()
        counts[key, default: 0] += 1
        lock.unlock()
    }

    func count(_ key: EventKey) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return counts[key] ?? 0
    }
}

/// First timestamp per event key (thread-safe).
final class Timestamps: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [EventKey: UInt64] = [:]

    func setFirst(_ key: EventKey, _ t: UInt64) {
        lock.lock()
        if values[key] == nil { values[key] = t }
        lock.unlock()
    }

    func get(_ key: EventKey) -> UInt64? {
        lock.lock()
        defer { lock.unlock() }
        return values[key]
    }

    var all: [EventKey: UInt64] {
        lock.lock()
        defer { lock.unlock() }
        return values
    }
}

/// The peer on host B: `Scripts/lab exec b avahi-publish -s NAME TYPE PORT` (host B's avahi-daemon, a real mDNS
/// responder inside the lab namespace). One process per published instance; SIGTERM withdraws it (goodbye).
final class PeerDriver {
    let lab: String
    let type: String
    let prefix: String
    private var running: [String: Process] = [:]

    init(lab: String, type: String, prefix: String) {
        self.lab = lab
        self.type = type
        self.prefix = prefix
    }

    func publish(_ name: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: lab)
        p.arguments = ["exec", "b", "avahi-publish", "-s", name, type, "9000"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { fail("cannot start peer: \(error)") }
        running[name] = p
    }

    func withdraw(_ name: String) {
        guard let p = running.removeValue(forKey: name) else { return }
        p.terminate()
        p.waitUntilExit()
    }

    func stopAll() {
        for name in Array(running.keys) { withdraw(name) }
    }

    /// Publishes and withdraws `rounds` fresh instances; after each step waits until `done(key)` (every subscriber
    /// has the event) or `timeout`, then `gap`. Returns the event keys in order and the ones that timed out.
    func run(rounds: Int, timeout: Double, gap: Double, done: (EventKey) -> Bool) -> (keys: [EventKey], timedOut: [EventKey]) {
        var keys: [EventKey] = []
        var timedOut: [EventKey] = []
        func wait(_ key: EventKey) {
            keys.append(key)
            let deadline = Date().addingTimeInterval(timeout)
            while !done(key) {
                if Date() > deadline {
                    timedOut.append(key)
                    log("timeout waiting for \(key)")
                    return
                }
                usleep(2000)
            }
            usleep(UInt32(gap * 1_000_000))
        }
        for round in 0..<rounds {
            let name = "\(prefix)-\(round)"
            publish(name)
            wait(EventKey(name: name, added: true))
            withdraw(name)
            wait(EventKey(name: name, added: false))
        }
        return (keys, timedOut)
    }
}

/// Percentile of sorted values (nearest rank).
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank - 1, 0), sorted.count - 1)]
}

func summary(_ values: [Double]) -> [String: Any] {
    let s = values.sorted()
    return [
        "count": s.count,
        "p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99),
        "max": s.last ?? .nan, "min": s.first ?? .nan,
        "mean": s.isEmpty ? .nan : s.reduce(0, +) / Double(s.count),
    ]
}

func fmt(_ v: Any?) -> String {
    guard let d = v as? Double else { return "\(v ?? "-")" }
    return String(format: "%.3f", d)
}

func emitJSON(_ object: [String: Any], to path: String?) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
    if let path {
        _ = FileManager.default.createFile(atPath: path, contents: data)
    } else {
        FileHandle.standardOutput.write(data)
        FileHandle.standardOutput.write(Data("\n".utf8))
    }
}

func raiseOpenFiles() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
