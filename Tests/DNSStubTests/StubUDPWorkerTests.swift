import DNSCore
import Logging
import NIOCore
import NIOPosix
import Resolver
import Testing

@testable import DNSStub

#if canImport(Glibc)
import Glibc
#endif

/// An upstream that never answers: every miss ends in SERVFAIL, which the worker sends late (from a task).
private struct SilentTransport: DNSTransport {
    func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
        throw DNSTransportError(code: .timeout, message: "no upstream in this test")
    }
}

/// The stub's UDP thread on a real loopback socket: batched replies, late replies, stopping.
@Suite struct StubUDPWorkerTests {
    /// A client socket on loopback; a missing reply fails the test after a deadline instead of hanging.
    struct Client {
        let fd: CInt
        let server: sockaddr_in

        init(port: UInt16) throws {
            fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            try #require(fd >= 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            server = address
        }

        func send(_ bytes: [UInt8]) {
            var address = server
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }

        /// The next reply, or nil after 10 s. Polls without blocking: a blocked thread of the test's cooperative
        /// pool could be the one the stub's late reply (a task) needs. The socket is read once more after the
        /// deadline: on a loaded machine this task itself may wake only after it, with the reply long there.
        func receive() async -> [UInt8]? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let deadline = ContinuousClock.now + .seconds(10)
            while true {
                let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count >= 0 { return Array(buffer[0..<count]) }
                if ContinuousClock.now >= deadline { return nil }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    static func serve() async throws -> (StubUDPWorker, UInt16) {
        let settings = StubSettings(listen: [], answerLocal: false)
        let responder = StubResponder(
            resolver: DNSResolver(transport: SilentTransport()), local: nil, settings: settings,
            logger: Logger(label: "test"))
        let socket = try StubUDPSocket.bind(HostAndPort(host: "127.0.0.1", port: 0))
        let description = try #require(socket.localDescription)
        let port = try #require(UInt16(description.split(separator: ":").last ?? ""))
        let worker = StubUDPWorker(socket: socket, responder: responder, name: "test-udp", logger: Logger(label: "test"))
        try await worker.start()
        return (worker, port)
    }

    @Test func answersABurstLargerThanOneBatch() async throws {
        let (worker, port) = try await Self.serve()
        let client = try Client(port: port)
        // ANY is answered at once (RFC 8482): 80 queries in flight, more than two receive batches of 32.
        let ids = (1...80).map { UInt16($0) }
        for id in ids { client.send(Wire.header(id: id) + Wire.name(["burst", "test"]) + [0, 255, 0, 1]) }
        var answered: Set<UInt16> = []
        for _ in ids {
            let reply = try #require(await client.receive())
            #expect(reply[2] & 0x80 != 0)  // QR
            #expect(reply[3] & 0x0F == 0)  // NOERROR
            answered.insert(UInt16(reply[0]) << 8 | UInt16(reply[1]))
        }
        #expect(answered == Set(ids))
        await worker.stop()
        worker.socket.close()
    }

    /// Receive slots are reused: each batch's senders come from that batch, whichever slots an earlier, larger
    /// batch filled (only the headers the kernel wrote are set back between receives).
    @Test func repliesGoToEachBatchsOwnSenders() async throws {
        let (worker, port) = try await Self.serve()
        let first = try Client(port: port)
        let second = try Client(port: port)
        for round in 0..<3 {
            // A burst from the first client fills several slots, then single queries from each client in turn.
            let burst = (1...20).map { UInt16(round * 100 + $0) }
            for id in burst { first.send(Wire.header(id: id) + Wire.name(["slot", "test"]) + [0, 255, 0, 1]) }
            var answered: Set<UInt16> = []
            for _ in burst { answered.insert(try #require(await first.receive()).prefix(2).reduce(0) { $0 << 8 | UInt16($1) }) }
            #expect(answered == Set(burst))
            for (index, client) in [second, first, second].enumerated() {
                let id = UInt16(round * 100 + 50 + index)
                client.send(Wire.header(id: id) + Wire.name(["one", "test"]) + [0, 255, 0, 1])
                let reply = try #require(await client.receive())
                #expect(Array(reply[0..<2]) == [UInt8(id >> 8), UInt8(id & 0xFF)])
            }
        }
        await worker.stop()
        worker.socket.close()
    }

    @Test func aMissIsAnsweredLaterAndAMalformedQueryAtOnce() async throws {
        let (worker, port) = try await Self.serve()
        let client = try Client(port: port)
        client.send(Wire.header(id: 7) + Wire.name(["miss", "test"]) + [0, 1, 0, 1])
        let late = try #require(await client.receive())
        #expect(Array(late[0..<2]) == [0, 7])
        #expect(late[3] & 0x0F == 2)  // SERVFAIL: the upstream never answers
        client.send(Wire.header(id: 8, qd: 2) + Wire.name(["bad"]) + [0, 1, 0, 1])
        let formErr = try #require(await client.receive())
        #expect(Array(formErr[0..<2]) == [0, 8])
        #expect(formErr[3] & 0x0F == 1)  // FORMERR
        // A message with QR set gets no reply; the next query still does.
        client.send(Wire.header(id: 9, flags: 0x8100) + Wire.name(["r"]) + [0, 1, 0, 1])
        client.send(Wire.header(id: 10) + Wire.name(["after", "test"]) + [0, 255, 0, 1])
        let next = try #require(await client.receive())
        #expect(Array(next[0..<2]) == [0, 10])
        await worker.stop()
        worker.socket.close()
    }

    @Test func stopEndsTheThreadWhileItWaits() async throws {
        let (worker, _) = try await Self.serve()
        try await Task.sleep(for: .milliseconds(20))  // waiting on its loop by now
        await worker.stop()
        worker.socket.close()
        // A late reply after close goes nowhere and does not touch a reused descriptor.
        worker.socket.send([1, 2, 3], to: .init([0, 0], length: 2))
    }

    /// A bound client socket on loopback, and its address as a late reply's peer.
    static func boundClient() throws -> (fd: CInt, peer: StubUDPSocket.Peer) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        try #require(bound)
        let peer = withUnsafeBytes(of: address) { StubUDPSocket.Peer($0.baseAddress!, length: UInt32(length)) }
        return (fd, peer)
    }

    /// The datagrams waiting on `fd` now, without blocking.
    static func pending(_ fd: CInt) -> [[UInt8]] {
        var found: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            guard count >= 0 else { return found }
            found.append(Array(buffer[0..<count]))
        }
    }

    /// Late replies made on an event loop while other misses still await theirs leave together once the loop's
    /// queued jobs have run; the last one awaited, and one made off any event loop, leave at once.
    @Test func lateRepliesOfOneLoopTurnLeaveTogetherAndTheLastAtOnce() async throws {
        let socket = try StubUDPSocket.bind(HostAndPort(host: "127.0.0.1", port: 0))
        let (fd, peer) = try Self.boundClient()
        defer {
            close(fd)
            socket.close()
        }
        for _ in 0..<4 { socket.expectLateReply() }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let inTurn = try await loop.submit {
            socket.sendLate([1], to: peer)
            socket.sendLate([2], to: peer)
            return Self.pending(fd)
        }.get()
        #expect(inTurn.isEmpty, "held until the loop's turn ends")
        // The flush was queued behind the job above: once a later job runs, both have gone.
        try await loop.submit {}.get()
        var received: [[UInt8]] = []
        for _ in 0..<100 where received.count < 2 {
            received += Self.pending(fd)
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(Set(received) == [[1], [2]])
        // Off any event loop: at once, although one more miss still awaits its reply.
        let offLoop = await Task.detached {
            socket.sendLate([3], to: peer)
            return Self.pending(fd)
        }.value
        #expect(offLoop == [[3]])
        // The last reply awaited: at once, on the loop too.
        let last = try await loop.submit {
            socket.sendLate([4], to: peer)
            return Self.pending(fd)
        }.get()
        #expect(last == [[4]])
    }

    /// More replies than one `sendmmsg` call takes (64) all arrive, each to its peer.
    @Test func aLargeOutboxGoesOutWhole() async throws {
        let socket = try StubUDPSocket.bind(HostAndPort(host: "127.0.0.1", port: 0))
        let (fd, peer) = try Self.boundClient()
        let (other, otherPeer) = try Self.boundClient()
        defer {
            close(fd)
            close(other)
            socket.close()
        }
        for _ in 0..<151 { socket.expectLateReply() }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        try await loop.submit {
            for index in 0..<150 { socket.sendLate([UInt8(index)], to: index % 3 == 0 ? otherPeer : peer) }
        }.get()
        try await loop.submit {}.get()
        var mine: [[UInt8]] = []
        var theirs: [[UInt8]] = []
        for _ in 0..<200 where mine.count + theirs.count < 150 {
            mine += Self.pending(fd)
            theirs += Self.pending(other)
            try await Task.sleep(for: .milliseconds(1))
        }
        let expectedTheirs: Set<[UInt8]> = Set((0..<150).filter { $0 % 3 == 0 }.map { [UInt8($0)] })
        let expectedMine: Set<[UInt8]> = Set((0..<150).filter { $0 % 3 != 0 }.map { [UInt8($0)] })
        #expect(Set(theirs) == expectedTheirs)
        #expect(Set(mine) == expectedMine)
    }

    @Test func clientAddresses() {
        var v4 = sockaddr_in()
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_addr.s_addr = UInt32(0x7F00_0005).bigEndian
        let loopback = withUnsafeBytes(of: v4) { StubClient(sockaddr: $0.baseAddress!) }
        #expect(loopback.isLoopback)
        #expect(loopback.bytes == [127, 0, 0, 5])
        v4.sin_addr.s_addr = UInt32(0xC000_0207).bigEndian
        let remote = withUnsafeBytes(of: v4) { StubClient(sockaddr: $0.baseAddress!) }
        #expect(!remote.isLoopback)
        #expect(remote.bytes == [192, 0, 2, 7])
        let mapped = StubClient(try? SocketAddress(ipAddress: "::ffff:127.0.0.1", port: 53))
        #expect(mapped.isLoopback)
        #expect(StubClient(try? SocketAddress(ipAddress: "::1", port: 53)).isLoopback)
        let six = StubClient(try? SocketAddress(ipAddress: "2001:db8::1", port: 53))
        #expect(!six.isLoopback)
        #expect(six.bytes?.count == 16)
        #expect(StubClient(nil) == .unknown)
        #expect(StubClient.unknown.bytes == nil)
        #expect(!StubClient.unknown.isLoopback)
    }
}
