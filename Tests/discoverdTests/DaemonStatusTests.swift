import DNSCore
import DiscoverAPI
import DiscoverServer
import Discovery
import NIOConcurrencyHelpers
import Resolver
import Testing

@testable import discoverd

/// `io.discoverd.Daemon.Status` read many times: what it reads through stays as it was.
@Suite struct DaemonStatusTests {
    struct NoUpstream: DNSTransport {
        func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
            throw DNSTransportError(code: .timeout, message: "no upstream in unit tests", attempts: [])
        }
    }

    /// An address in the caller's stack frame: how deep the stack is where it is called.
    @inline(never)
    static func stackAddress() -> UInt {
        var marker = 0
        return withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
    }

    /// Each Status call used to wrap the stub's status closure in two more reabstraction thunks, stored back into
    /// its box: 64 bytes kept per call, and calling the closure recursed through every thunk of every call before
    /// (the abuse soak's steady growth, 0.7 MB a second; a 3 MB deep stack after 200 000 calls).
    @Test func statusCallsLeaveTheStubReporterAsItWas() throws {
        let state = DaemonState(
            registry: ConnectionRegistry(), discovery: try DiscoveryService(),
            resolver: DNSResolver(transport: NoUpstream()), registrations: { 0 })
        let depths = NIOLockedValueBox<[UInt]>([])
        state.attach(stub: {
            depths.withLockedValue { $0.append(Self.stackAddress()) }
            return nil
        })
        for _ in 0..<2000 { _ = state.status() }
        let seen = depths.withLockedValue { $0 }
        #expect(seen.count == 2000)
        // Called from the same frame each time, the closure runs at the same depth: no chain of thunks in between.
        let spread = (seen.max() ?? 0) - (seen.min() ?? 0)
        #expect(spread < 1024, "the stub's status closure ran \(spread) bytes deeper after 2000 Status calls")
    }
}
