#if canImport(Glibc)
import DNSCore
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 prefix (`192.0.2.0/24`, `2001:db8::/32`, or one address), for `[stub] allow`.
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes, host bits cleared.
    public let network: [UInt8]
    public let prefixLength: Int

    /// Parses `ADDR` or `ADDR/LEN`.
    /// - Throws: ``AddressRangeError`` naming what is wrong.
    public init(parsing text: String) throws(AddressRangeError) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.parseAddress(String(parts[0])) else {
            throw AddressRangeError(text: text, reason: "not an IPv4 or IPv6 address")
        }
        let bits = bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value) else {
                throw AddressRangeError(text: text, reason: "prefix length must be 0...\(bits)")
            }
            length = value
        }
        self.init(bytes: bytes, prefixLength: length)
    }

    /// The range of one address or a prefix of it.
    public init(bytes: [UInt8], prefixLength: Int) {
        var masked = bytes
        for index in masked.indices {
            let kept = max(0, min(8, prefixLength - index * 8))
            masked[index] &= kept == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - kept))
        }
        self.network = masked
        self.prefixLength = prefixLength
    }

    /// Whether `address` (4 or 16 bytes; IPv4-mapped IPv6 counts as IPv4) lies in the range.
    public func contains(_ address: [UInt8]) -> Bool {
        let candidate = Self.unmapped(address)
        guard candidate.count == network.count else { return false }
        var remaining = prefixLength
        for index in network.indices where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if candidate[index] & mask != network[index] { return false }
            remaining -= bits
        }
        return true
    }

    public var description: String {
        let text = Self.format(network)
        return prefixLength == network.count * 8 ? text : "\(text)/\(prefixLength)"
    }

    /// 127.0.0.0/8 and ::1.
    public static let loopback: [AddressRange] = [
        AddressRange(bytes: [127, 0, 0, 0], prefixLength: 8),
        AddressRange(bytes: [UInt8](repeating: 0, count: 15) + [1], prefixLength: 128),
    ]

    /// `::ffff:a.b.c.d` as the 4 IPv4 bytes; anything else unchanged.
    static func unmapped(_ address: [UInt8]) -> [UInt8] {
        if address.count == 16 && address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF {
            return Array(address[12..<16])
        }
        return address
    }

    static func parseAddress(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    static func format(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) }
        return ok == nil ? "?" : String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Every address configured on the machine's interfaces (getifaddrs), as single-address ranges.
    public static func localAddresses() -> [AddressRange] {
        interfaceAddresses(withPrefix: false)
    }

    /// The networks the machine's interfaces are on (address and netmask), loopback left out: the link whose
    /// hosts mDNS can name.
    public static func linkSubnets() -> [AddressRange] {
        interfaceAddresses(withPrefix: true).filter { range in
            !loopback.contains { $0.prefixLength <= range.prefixLength && $0.contains(range.network) }
        }
    }

    private static func interfaceAddresses(withPrefix: Bool) -> [AddressRange] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var result: [AddressRange] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    withUnsafeBytes(of: pointer.pointee.sin_addr) { Array($0) }
                }
                let mask = entry.pointee.ifa_netmask.map { netmask in
                    netmask.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                        withUnsafeBytes(of: pointer.pointee.sin_addr) { Array($0) }
                    }
                }
                result.append(AddressRange(bytes: bytes, prefixLength: withPrefix ? Self.prefixLength(mask) ?? 32 : 32))
            case AF_INET6:
                let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
                }
                let mask = entry.pointee.ifa_netmask.map { netmask in
                    netmask.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                        withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
                    }
                }
                result.append(
                    AddressRange(bytes: bytes, prefixLength: withPrefix ? Self.prefixLength(mask) ?? 128 : 128))
            default:
                continue
            }
        }
        return result
    }
}

extension AddressRange {
    /// The number of leading one bits of a netmask.
    static func prefixLength(_ mask: [UInt8]?) -> Int? {
        guard let mask else { return nil }
        return mask.reduce(0) { $0 + $1.nonzeroBitCount }
    }
}

/// A `[stub] allow` value that is not a prefix.
public struct AddressRangeError: Error, Sendable, CustomStringConvertible {
    public var text: String
    public var reason: String
    public var description: String { "\"\(text)\": \(reason)" }
}
