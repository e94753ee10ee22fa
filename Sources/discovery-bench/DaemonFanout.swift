import CBenchIO
import DNSSDModel
@_spi(Benchmarks) import Discovery
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One raw varlink Browse stream over its own Unix socket.
private struct RawSubscriber {
    var fd: Int32
    var pending: [UInt8] = []
    var receipts: [(key: EventKey, at: UInt64)] = []
}

/// The string value after `"field":` in a JSON message (no escapes expected: benchmark names are plain ASCII).
private func jsonString(_ message: ArraySlice<UInt8>, field: String) -> String? {
    let needle = Array("\"\(field)\":".utf8)
    guard message.count >= needle.count else { return nil }
    var i = message.startIndex
    let end = message.endIndex - needle.count
    while i <= end {
        if message[i] == needle[0], message[i..<(i + needle.count)].elementsEqual(needle) {
            var j = i + needle.count
            while j < message.endIndex, message[j] == UInt8(ascii: " ") { j += 1 }
            guard j < message.endIndex, message[j] == UInt8(ascii: "\"") else { return nil }
            j += 1
            var k = j
            while k < message.endIndex, message[k] != UInt8(ascii: "\"") { k += 1 }
            return String(decoding: message[j..<k], as: UTF8.self)
        }
        i += 1
    }
    return nil
}

private func connectUnix(_ path: String) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { fail("socket: \(String(cString: strerror(errno)))") }
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { fail("socket path too long") }
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard rc == 0 else { fail("connect \(path): \(String(cString: strerror(errno)))") }
    return fd
}

private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var off = 0
    while off < bytes.count {
        let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR || errno == EAGAIN { continue }
            fail("write: \(String(cString: strerror(errno)))")
        }
        off += n
    }
}

/// Target 1 through the daemon: N raw varlink `Browse` streams (one Unix socket each, `more: true`) read by one
/// epoll loop that timestamps every message as soon as read(2) returns it. A second Avahi client in this process
/// (the library, one subscriber, `BrowseBenchmarkHook`) on the same bus as the daemon gives an approximate callback
/// time for each event.
func runDaemonFanout(_ opts: Options) {
    raiseOpenFiles()
    let n = opts.int("subscribers", 1000)
    let rounds = max(1, opts.int("events", 50) / 2)
    let type = opts.string("type", "_dbench._tcp")
    let socketPath = opts.string("socket", "/tmp/dbench-discoverd.sock")
    let prefix = "dbd\(getpid())x\(monotonicNow() % 100_000)"

    // Observer: our own Avahi client on host A's bus, one subscriber; its callback time ≈ the daemon's.
    let callbacks = installCallbackHook(prefix: prefix)
    let observer: DiscoveryService
    do {
        observer = try DiscoveryService(dbusSystemBusAddress: opts.values["dbus"])
        try observer.start()
    } catch { fail("\(error)") }
    waitRunning(observer)
    let observerStream: AsyncThrowingStream<BrowseEvent, any Error>
    do { observerStream = try observer.browse(type: type) } catch { fail("observer browse: \(error)") }
    let observerTask = Task.detached { do { for try await _ in observerStream {} } catch {} }

    // N subscribers.
    let call = Array(
        "{\"method\":\"io.discoverd.Discovery.Browse\",\"parameters\":{\"type\":\"\(type)\"},\"more\":true}".utf8) + [0]
    var subs: [RawSubscriber] = []
    subs.reserveCapacity(n)
    let connectStart = monotonicNow()
    for _ in 0..<n {
        let fd = connectUnix(socketPath)
        writeAll(fd, call)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        subs.append(RawSubscriber(fd: fd))
    }
    let connectMs = Double(monotonicNow() - connectStart) / 1e6

    let counter = ReceiptCounter()
    let allForNow = EventKey(name: "", added: true)
    let stop = ReceiptCounter()  // count(allForNow) > 0 means stop
    let errors = ReceiptCounter()
    let finished = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var shared = subs
    let reader = Thread {
        // epoll, one read per ready socket: a poll(2) over all 1000 descriptors per wake-up, and a second read
        // per socket to see EAGAIN, cost this reader more CPU than the daemon's writes on 2 cores, and the spread
        // measured was largely the reader's own.
        let epfd = cbench_epoll_create()
        guard epfd >= 0 else { fail("epoll_create1: \(String(cString: strerror(errno)))") }
        for (i, subscriber) in shared.enumerated() {
            guard cbench_epoll_add(epfd, subscriber.fd, UInt64(i)) == 0 else {
                fail("epoll_ctl: \(String(cString: strerror(errno)))")
            }
        }
        var tags = [UInt64](repeating: 0, count: 1024)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var batch: [(index: Int, at: UInt64, message: ArraySlice<UInt8>)] = []
        while stop.count(allForNow) == 0 {
            let ready = tags.withUnsafeMutableBufferPointer { cbench_epoll_wait(epfd, $0.baseAddress, Int32($0.count), 50) }
            if ready <= 0 { continue }
            batch.removeAll(keepingCapacity: true)
            for e in 0..<Int(ready) {
                let i = Int(tags[e])
                while true {
                    let got = buffer.withUnsafeMutableBytes { read(shared[i].fd, $0.baseAddress, $0.count) }
                    let at = monotonicNow()
                    if got <= 0 {
                        if got == 0 || (errno != EAGAIN && errno != EINTR) {
                            _ = cbench_epoll_remove(epfd, shared[i].fd)
                            errors.add(allForNow)
                        }
                        break
                    }
                    shared[i].pending.append(contentsOf: buffer[0..<got])
                    while let nul = shared[i].pending.firstIndex(of: 0) {
                        batch.append((i, at, shared[i].pending[..<nul]))
                        shared[i].pending.removeSubrange(...nul)
                    }
                    // Less than a full buffer: the socket is drained (level-triggered epoll reports it again
                    // otherwise), no read to see EAGAIN.
                    if got < buffer.count { break }
                }
            }
            // Parse after the whole batch is timestamped.
            for (i, at, message) in batch {
                guard let event = jsonString(message, field: "event") else {
                    errors.add(allForNow)
                    log("unexpected reply: \(String(decoding: message.prefix(300), as: UTF8.self))")
                    continue
                }
                if event == "allForNow" {
                    counter.add(allForNow)
                    continue
                }
                guard event == "added" || event == "removed", let name = jsonString(message, field: "name"),
                    name.hasPrefix(prefix)
                else { continue }
                let key = EventKey(name: name, added: event == "added")
                shared[i].receipts.append((key, at))
                counter.add(key)
            }
        }
        close(epfd)
        finished.signal()
    }
    reader.start()
    let deadline = Date().addingTimeInterval(30)
    while counter.count(allForNow) < n, Date() < deadline { usleep(10_000) }
    log("daemon: \(n) Browse streams connected in \(fmt(connectMs)) ms; allForNow \(counter.count(allForNow))/\(n)")

    let driver = PeerDriver(lab: opts.string("lab", "Scripts/lab"), type: type, prefix: prefix)
    // Done when every subscriber has the event and the observer saw its callback (or 1 s after the former).
    var allReceivedAt: [EventKey: Date] = [:]
    let result = driver.run(rounds: rounds, timeout: Double(opts.int("timeout", 20)), gap: 0.3) { key in
        guard counter.count(key) >= n else { return false }
        if callbacks.get(key) != nil { return true }
        let since = allReceivedAt[key] ?? Date()
        allReceivedAt[key] = since
        return Date().timeIntervalSince(since) > 1
    }
    driver.stopAll()
    stop.add(allForNow)
    finished.wait()
    for s in shared { close(s.fd) }
    observerTask.cancel()
    observer.shutdown()

    let cb = callbacks.all
    var perEvent: [EventKey: (first: UInt64, last: UInt64)] = [:]
    for s in shared {
        for (key, at) in s.receipts {
            var e = perEvent[key] ?? (at, at)
            e.first = min(e.first, at)
            e.last = max(e.last, at)
            perEvent[key] = e
        }
    }
    var endToEnd: [Double] = []
    var fromFirst: [Double] = []
    var spreads: [Double] = []
    var toFirst: [Double] = []
    var toLast: [Double] = []
    var deliveries = 0
    for s in shared {
        for (key, at) in s.receipts {
            deliveries += 1
            if let first = perEvent[key]?.first { fromFirst.append(Double(at - first) / 1e6) }
            if let c = cb[key] { endToEnd.append(Double(Int64(at) - Int64(c)) / 1e6) }
        }
    }
    for key in result.keys {
        guard let e = perEvent[key] else { continue }
        spreads.append(Double(e.last - e.first) / 1e6)
        if let c = cb[key] {
            toFirst.append(Double(Int64(e.first) - Int64(c)) / 1e6)
            toLast.append(Double(Int64(e.last) - Int64(c)) / 1e6)
        }
    }
    let out: [String: Any] = [
        "mode": "daemon", "subscribers": n, "events": result.keys.count, "type": type, "socket": socketPath,
        "expectedDeliveries": n * result.keys.count, "deliveries": deliveries,
        "timedOutEvents": result.timedOut.count, "connectMs": connectMs, "streamErrors": errors.count(allForNow),
        "firstToEachSubscriberMs": summary(fromFirst),
        "firstToLastSubscriberPerEventMs": summary(spreads),
        "observerCallbackToEachSubscriberMs": summary(endToEnd),
        "observerCallbackToFirstSubscriberMs": summary(toFirst),
        "observerCallbackToLastSubscriberMs": summary(toLast),
    ]
    log(
        "daemon: first→each ms p50 \(fmt(summary(fromFirst)["p50"])) p99 \(fmt(summary(fromFirst)["p99"])) "
            + "max \(fmt(summary(fromFirst)["max"])); observer-callback→each p99 \(fmt(summary(endToEnd)["p99"])) "
            + "over \(deliveries)/\(n * result.keys.count)")
    emitJSON(out, to: opts.values["json"])
}
