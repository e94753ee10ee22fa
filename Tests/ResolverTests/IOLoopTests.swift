import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import Resolver

#if canImport(Glibc)
import Glibc
#endif

/// ``IOLoop``: tasks, timers and descriptor readiness on discoverd's own event loop (no timing asserted: only order
/// and outcome).
@Suite struct IOLoopTests {
    @Test func tasksRunInOrderOnTheLoopsThread() async throws {
        let loop = try IOLoop(name: "test-tasks")
        let seen = NIOLockedValueBox<[Int]>([])
        let onLoop = NIOLockedValueBox(true)
        for number in 0..<100 {
            loop.execute {
                seen.withLockedValue { $0.append(number) }
                if !loop.inEventLoop || IOLoop.current !== loop { onLoop.withLockedValue { $0 = false } }
            }
        }
        try await loop.submit {}.get()
        #expect(seen.withLockedValue { $0 } == Array(0..<100))
        #expect(onLoop.withLockedValue { $0 })
        #expect(!loop.inEventLoop && IOLoop.current == nil)
        try await loop.shutdownGracefully()
    }

    @Test func timersFireInDeadlineOrderAndACancelledOneNever() async throws {
        let loop = try IOLoop(name: "test-timers")
        let fired = NIOLockedValueBox<[String]>([])
        let now = NIODeadline.now()
        let late = loop.scheduleTask(deadline: now + .milliseconds(60)) { fired.withLockedValue { $0.append("60") } }
        let early = loop.scheduleTask(deadline: now + .milliseconds(20)) { fired.withLockedValue { $0.append("20") } }
        let middle = loop.scheduleTask(deadline: now + .milliseconds(40)) { fired.withLockedValue { $0.append("40") } }
        let cancelled = loop.scheduleTask(deadline: now + .milliseconds(30)) { fired.withLockedValue { $0.append("30") } }
        cancelled.cancel()
        try await early.futureResult.get()
        try await middle.futureResult.get()
        try await late.futureResult.get()
        await #expect(throws: EventLoopError.cancelled) { try await cancelled.futureResult.get() }
        #expect(fired.withLockedValue { $0 } == ["20", "40", "60"])
        // A timer's result and error reach its future.
        let value = try await loop.scheduleTask(in: .milliseconds(1)) { 42 }.futureResult.get()
        #expect(value == 42)
        try await loop.shutdownGracefully()
    }

    @Test func workLeftForLaterRunsOnTheLoopAfterItsDelayAmongTheTimers() async throws {
        let loop = try IOLoop(name: "test-after")
        let fired = NIOLockedValueBox<[String]>([])
        let started = NIODeadline.now()
        let firedAt = NIOLockedValueBox<NIODeadline?>(nil)
        let last = loop.scheduleTask(in: .milliseconds(200)) { fired.withLockedValue { $0.append("timer 200") } }
        try await loop.submit {
            loop.after(.milliseconds(20)) {
                #expect(loop.inEventLoop)
                firedAt.withLockedValue { $0 = .now() }
                fired.withLockedValue { $0.append("after 20") }
            }
            loop.after(.milliseconds(5)) { fired.withLockedValue { $0.append("after 5") } }
        }.get()
        try await last.futureResult.get()
        #expect(fired.withLockedValue { $0 } == ["after 5", "after 20", "timer 200"])
        // Never early.
        let at = try #require(firedAt.withLockedValue { $0 })
        #expect(at - started >= .milliseconds(20))
        try await loop.shutdownGracefully()
    }

    @Test func aWatchedDescriptorsHandlerRunsOnTheLoopUntilUnwatched() async throws {
        let loop = try IOLoop(name: "test-watch")
        var pair: [CInt] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0)
        defer {
            close(pair[0])
            close(pair[1])
        }
        let reader = pair[0]
        let got = NIOLockedValueBox<[UInt8]>([])
        let promise = loop.makePromise(of: Void.self)
        try await loop.submit {
            try loop.watch(reader, interest: .read) { readiness in
                precondition(loop.inEventLoop)
                #expect(readiness.contains(.read))
                var buffer = [UInt8](repeating: 0, count: 16)
                let count = read(reader, &buffer, buffer.count)
                if count > 0 { got.withLockedValue { $0.append(contentsOf: buffer[0..<count]) } }
                if got.withLockedValue({ $0.count }) >= 3 { promise.succeed() }
            }
        }.get()
        var bytes: [UInt8] = [1, 2, 3]
        #expect(write(pair[1], &bytes, 3) == 3)
        try await promise.futureResult.get()
        #expect(got.withLockedValue { $0 } == [1, 2, 3])
        // Unwatched from another thread: a byte written after it is not read by the loop.
        loop.unwatch(reader)
        bytes = [4]
        #expect(write(pair[1], &bytes, 1) == 1)
        try await loop.submit {}.get()
        var left = [UInt8](repeating: 0, count: 4)
        #expect(read(reader, &left, left.count) == 1 && left[0] == 4)
        try await loop.shutdownGracefully()
    }

    /// Two loops watching one UDP socket with `.exclusive`, as the stub's workers do: an idle stub's datagrams all
    /// wake the first loop (one thread serves one query at a time, as in Unbound), and the second takes one when the
    /// first is busy. Without `.exclusive` both loops wake for every datagram and the second reads some of them.
    @Test func exclusiveWatchersWakeTheFirstLoopWhileItWaitsAndTheNextWhenItIsBusy() async throws {
        let loops = [try IOLoop(name: "test-excl-0"), try IOLoop(name: "test-excl-1")]
        let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        let sender = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(socket >= 0 && sender >= 0)
        defer {
            close(socket)
            close(sender)
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                Glibc.bind(socket, pointer, length) == 0 && getsockname(socket, pointer, &length) == 0
            }
        }
        #expect(bound)
        // What each loop read; a handler that finds nothing (another loop read it first) counts nothing.
        let read = NIOLockedValueBox<[Int]>([0, 0])
        var threads: [String] = []
        for (index, loop) in loops.enumerated() {
            // The loop's thread as /proc names it ("PID/task/TID"), read on that thread.
            threads.append(
                try await loop.submit { () -> String in
                    var link = [CChar](repeating: 0, count: 64)
                    let count = readlink("/proc/thread-self", &link, link.count - 1)
                    return count > 0 ? String(cString: link) : ""
                }.get())
            try loop.watch(socket, interest: [.read, .exclusive]) { _ in
                var buffer = [UInt8](repeating: 0, count: 64)
                while recv(socket, &buffer, buffer.count, 0) > 0 { read.withLockedValue { $0[index] += 1 } }
            }
        }
        func send() {
            var byte: UInt8 = 1
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(sender, &byte, 1, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        func total() -> Int { read.withLockedValue { $0[0] + $0[1] } }
        /// Until the loop's thread sleeps (in epoll_wait: it sleeps nowhere else while idle), seen twice.
        // Both waits give up after about 5 s (the expectations below then fail) rather than hang the suite.
        func waitUntilSleeping(_ thread: String) async throws {
            var seen = 0
            for _ in 0..<2500 {
                if seen >= 2 { return }
                var bytes = [UInt8](repeating: 0, count: 512)
                let fd = open("/proc/\(thread)/stat", O_RDONLY)
                let count = fd >= 0 ? Glibc.read(fd, &bytes, bytes.count) : -1
                if fd >= 0 { close(fd) }
                let stat = String(decoding: bytes.prefix(max(0, count)), as: UTF8.self)
                let state = stat.split(separator: ")").last?.split(separator: " ").first
                seen = state == "S" ? seen + 1 : 0
                try await Task.sleep(for: .milliseconds(2))
            }
        }
        func waitUntilRead(_ count: Int) async throws {
            for _ in 0..<5000 where total() < count { try await Task.sleep(for: .milliseconds(1)) }
        }
        // Idle: both loops wait; every datagram wakes the first one.
        for sent in 1...10 {
            try await waitUntilSleeping(threads[0])
            try await waitUntilSleeping(threads[1])
            send()
            try await waitUntilRead(sent)
        }
        #expect(read.withLockedValue { $0 } == [10, 0])
        // The first loop busy (a task holds it): the datagram wakes the second.
        let release = NIOLockedValueBox(false)
        loops[0].execute {
            while !release.withLockedValue({ $0 }) { usleep(1000) }
        }
        try await waitUntilSleeping(threads[1])
        send()
        try await waitUntilRead(11)
        release.withLockedValue { $0 = true }
        #expect(read.withLockedValue { $0 } == [10, 1])
        for loop in loops { try await loop.shutdownGracefully() }
    }

    @Test func shutdownRunsQueuedTasksCancelsPendingTimersAndTellsWatchers() async throws {
        let loop = try IOLoop(name: "test-shutdown")
        let ran = NIOLockedValueBox(0)
        var pair: [CInt] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0)
        defer {
            close(pair[0])
            close(pair[1])
        }
        let told = NIOLockedValueBox<[IOLoop.Readiness]>([])
        try loop.watch(pair[0], interest: .read) { readiness in told.withLockedValue { $0.append(readiness) } }
        let pending = loop.scheduleTask(in: .hours(1)) {}
        // Registered while the loop runs: the callback runs on the loop as it stops.
        let failure = NIOLockedValueBox<(any Error)?>(nil)
        pending.futureResult.whenFailure { error in failure.withLockedValue { $0 = error } }
        for _ in 0..<10 { loop.execute { ran.withLockedValue { $0 += 1 } } }
        try await loop.shutdownGracefully()
        #expect(ran.withLockedValue { $0 } == 10)
        #expect(loop.isStopping)
        #expect(failure.withLockedValue { $0 } as? EventLoopError == .cancelled)
        // The watcher heard once that the loop stops (nothing was readable).
        #expect(told.withLockedValue { $0 } == [.loopStopping])
        // A second shutdown completes at once.
        try await loop.shutdownGracefully()
    }
}
