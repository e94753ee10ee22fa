import DNSCore
import NIOCore
import Resolver

#if canImport(Glibc)
import Glibc
#endif

/// Where a query came from, as the access check needs it: an IPv4 or IPv6 address kept inline (no allocation
/// per datagram), or nothing (a Unix socket, an unknown peer: never allowed).
public struct StubClient: Sendable, Equatable {
    enum Family: Sendable { case none, v4, v6 }
    var family: Family
    /// The address bytes in network order: the first 4 for IPv4, all 16 for IPv6.
    var raw: (UInt64, UInt64)

    public static let unknown = StubClient(family: .none, raw: (0, 0))

    init(family: Family, raw: (UInt64, UInt64)) {
        self.family = family
        self.raw = raw
    }

    public static func == (lhs: StubClient, rhs: StubClient) -> Bool {
        lhs.family == rhs.family && lhs.raw == rhs.raw
    }

    /// From a NIO address (TCP connections, tests).
    public init(_ address: SocketAddress?) {
        switch address {
        case .v4(let v4): self.init(v4: v4.address.sin_addr)
        case .v6(let v6): self.init(v6: v6.address.sin6_addr)
        default: self = .unknown
        }
    }

    init(v4 address: in_addr) {
        var raw: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &raw) { out in withUnsafeBytes(of: address) { out.copyMemory(from: $0) } }
        self.init(family: .v4, raw: raw)
    }

    init(v6 address: in6_addr) {
        var raw: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &raw) { out in withUnsafeBytes(of: address) { out.copyMemory(from: $0) } }
        self.init(family: .v6, raw: raw)
    }

    /// From a `sockaddr` the kernel filled in (recvmmsg).
    init(sockaddr pointer: UnsafeRawPointer) {
        switch Int32(pointer.load(as: sa_family_t.self)) {
        case AF_INET: self.init(v4: pointer.load(as: sockaddr_in.self).sin_addr)
        case AF_INET6: self.init(v6: pointer.load(as: sockaddr_in6.self).sin6_addr)
        default: self = .unknown
        }
    }

    /// 127.0.0.0/8, ::1 and ::ffff:127.x: always allowed, decided without a lock or an allocation.
    public var isLoopback: Bool {
        withUnsafeBytes(of: raw) { bytes in
            switch family {
            case .none:
                return false
            case .v4:
                return bytes[0] == 127
            case .v6:
                let zeros = bytes[0..<10].allSatisfy { $0 == 0 }
                let plain = zeros && bytes[10] == 0 && bytes[11] == 0 && bytes[12..<15].allSatisfy { $0 == 0 }
                    && bytes[15] == 1
                let mapped = zeros && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
                return plain || mapped
            }
        }
    }

    /// Who the client's upstream queries count against (``QueryLimits``); nil when the address is unknown.
    public var queryClient: QueryClient? { bytes.map(QueryClient.address) }

    /// The address bytes (4 or 16) for ``AddressRange/contains(_:)``; nil when unknown.
    public var bytes: [UInt8]? {
        switch family {
        case .none: nil
        case .v4: withUnsafeBytes(of: raw) { Array($0[0..<4]) }
        case .v6: withUnsafeBytes(of: raw) { Array($0) }
        }
    }
}
