@_spi(Benchmarks) import Discovery
import DNSSDModel
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One subscriber's receipts; written only by its task, read after that task ended.
final class Recorder: @unchecked Sendable {
    var records: [(key: EventKey, at: UInt64)] = []
}

/// Installs the hook that records, per event, when the Avahi callback that caused it entered the library.
func installCallbackHook(prefix: String) -> Timestamps {
    let callbacks = Timestamps()
    BrowseBenchmarkHook.observer = { event, at in
        switch event {
        case .added(let s) where s.name.hasPrefix(prefix): callbacks.setFirst(EventKey(name: s.name, added: true), at)
        case .removed(let s) where s.name.hasPrefix(prefix):
            callbacks.setFirst(EventKey(name: s.name, added: false), at)
        default: break
        }
    }
    return callbacks
}

func waitRunning(_ service: DiscoveryService) {
    let deadline = Date().addingTimeInterval(15)
    while service.avahiState != .running {
        if Date() > deadline { fail("avahi-daemon not reachable (DBUS_SYSTEM_BUS_ADDRESS=\(ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"] ?? "unset"))") }
        usleep(20_000)
    }
}

/// Targets 1 and 2 in-process: N subscribers of one type on one `DiscoveryService`; a peer on host B publishes and
/// withdraws instances; per delivery, the delay from the Avahi callback (hook) to the subscriber's receipt.
func runLibraryFanout(_ opts: Options) {
    let n = opts.int("subscribers", 1000)
    let rounds = max(1, opts.int("events", 50) / 2)
    let type = opts.string("type", "_dbench._tcp")
    let prefix = "dbl\(getpid())x\(monotonicNow() % 100_000)"
    let callbacks = installCallbackHook(prefix: prefix)
    let service: DiscoveryService
    do {
        service = try DiscoveryService(dbusSystemBusAddress: opts.values["dbus"])
        try service.start()
    } catch { fail("\(error)") }
    waitRunning(service)

    let counter = ReceiptCounter()
    let allForNow = EventKey(name: "", added: true)
    let recorders = (0..<n).map { _ in Recorder() }
    let finished = DispatchSemaphore(value: 0)
    var tasks: [Task<Void, Never>] = []
    let subscribeStart = monotonicNow()
    for i in 0..<n {
        let stream: AsyncThrowingStream<BrowseEvent, any Error>
        do { stream = try service.browse(type: type) } catch { fail("browse: \(error)") }
        let recorder = recorders[i]
        recorder.records.reserveCapacity(rounds * 2 + 4)
        tasks.append(
            Task.detached {
                do {
                    for try await event in stream {
                        let at = monotonicNow()
                        switch event {
                        case .added(let s) where s.name.hasPrefix(prefix):
                            let key = EventKey(name: s.name, added: true)
                            recorder.records.append((key, at))
                            counter.add(key)
                        case .removed(let s) where s.name.hasPrefix(prefix):
                            let key = EventKey(name: s.name, added: false)
                            recorder.records.append((key, at))
                            counter.add(key)
                        case .allForNow:
                            counter.add(allForNow)
                        default:
                            break
                        }
                    }
                } catch {}
                finished.signal()
            })
    }
    let subscribeMs = Double(monotonicNow() - subscribeStart) / 1e6
    let deadline = Date().addingTimeInterval(15)
    while counter.count(allForNow) < n, Date() < deadline { usleep(10_000) }
    let counts = service.objectCounts
    let stats = service.statistics
    log(
        "library: \(n) subscribers in \(fmt(subscribeMs)) ms; allForNow \(counter.count(allForNow))/\(n); "
            + "serviceBrowsers=\(counts.serviceBrowsers) serviceResolvers=\(counts.serviceResolvers) "
            + "sharedBrowsers=\(stats.sharedBrowsers) subscribers=\(stats.subscribers)")

    let driver = PeerDriver(lab: opts.string("lab", "Scripts/lab"), type: type, prefix: prefix)
    let result = driver.run(rounds: rounds, timeout: Double(opts.int("timeout", 20)), gap: 0.3) {
        counter.count($0) >= n
    }

    // Objects with resolving subscribers: N more subscribers with resolve: true while one instance is up.
    var resolveCheck: [String: Any] = [:]
    if opts.flag("resolve-check") {
        let name = "r\(prefix)"
        let resolveCounter = ReceiptCounter()
        var resolveTasks: [Task<Void, Never>] = []
        driver.publish(name)
        for _ in 0..<n {
            guard let stream = try? service.browse(type: type, resolve: true) else { continue }
            resolveTasks.append(
                Task.detached {
                    var resolved = false
                    do {
                        for try await event in stream {
                            switch event {
                            case .added(let s), .changed(let s):
                                if !resolved, s.name == name, s.port != nil {
                                    resolved = true
                                    resolveCounter.add(EventKey(name: name, added: true))
                                }
                            default: break
                            }
                        }
                    } catch {}
                })
        }
        let until = Date().addingTimeInterval(10)
        while resolveCounter.count(EventKey(name: name, added: true)) < n, Date() < until { usleep(10_000) }
        let c = service.objectCounts
        resolveCheck = [
            "subscribers": 2 * n, "resolvingSubscribers": n,
            "resolvedDeliveries": resolveCounter.count(EventKey(name: name, added: true)),
            "serviceBrowsers": c.serviceBrowsers, "serviceResolvers": c.serviceResolvers,
            "entryGroups": c.entryGroups, "otherBrowsers": c.otherBrowsers,
        ]
        log("resolve check: \(resolveCheck)")
        for t in resolveTasks { t.cancel() }
        driver.withdraw(name)
    }
    driver.stopAll()

    for t in tasks { t.cancel() }
    for _ in 0..<n { _ = finished.wait(timeout: .now() + 10) }
    let cb = callbacks.all

    var delays: [Double] = []
    delays.reserveCapacity(n * rounds * 2)
    var perEvent: [EventKey: (first: UInt64, last: UInt64, count: Int)] = [:]
    for recorder in recorders {
        for (key, at) in recorder.records {
            if let c = cb[key] { delays.append(Double(Int64(at) - Int64(c)) / 1e6) }
            var e = perEvent[key] ?? (at, at, 0)
            e.first = min(e.first, at)
            e.last = max(e.last, at)
            e.count += 1
            perEvent[key] = e
        }
    }
    var lastDelays: [Double] = []
    var spreads: [Double] = []
    for key in result.keys {
        guard let e = perEvent[key] else { continue }
        spreads.append(Double(e.last - e.first) / 1e6)
        if let c = cb[key] { lastDelays.append(Double(Int64(e.last) - Int64(c)) / 1e6) }
    }
    let expected = n * result.keys.count
    let out: [String: Any] = [
        "mode": "library", "subscribers": n, "events": result.keys.count, "type": type,
        "expectedDeliveries": expected, "deliveries": delays.count,
        "timedOutEvents": result.timedOut.count, "eventsWithCallback": result.keys.filter { cb[$0] != nil }.count,
        "subscribeMs": subscribeMs,
        "objectCounts": [
            "serviceBrowsers": counts.serviceBrowsers, "serviceResolvers": counts.serviceResolvers,
            "entryGroups": counts.entryGroups, "otherBrowsers": counts.otherBrowsers,
            "sharedBrowsers": stats.sharedBrowsers, "subscribers": stats.subscribers,
        ],
        "resolveCheck": resolveCheck,
        "callbackToReceiptMs": summary(delays),
        "callbackToLastSubscriberMs": summary(lastDelays),
        "firstToLastSubscriberMs": summary(spreads),
    ]
    log(
        "library: callback→receipt ms p50 \(fmt(summary(delays)["p50"])) p99 \(fmt(summary(delays)["p99"])) "
            + "max \(fmt(summary(delays)["max"])) over \(delays.count)/\(expected) deliveries")
    emitJSON(out, to: opts.values["json"])
    service.shutdown()
}
