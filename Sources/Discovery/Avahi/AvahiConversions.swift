import CAvahi
import DNSSDModel

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Conversions between Avahi's C types and ours. Pure functions; callable with or without the poll lock.
enum AvahiConversions {
    static let interfaceUnspecified = Int32(AVAHI_IF_UNSPEC)
    static let protocolUnspecified = Int32(AVAHI_PROTO_UNSPEC)
    static let protocolIPv4 = Int32(AVAHI_PROTO_INET)
    static let protocolIPv6 = Int32(AVAHI_PROTO_INET6)

    /// The interface's name (`if_indextoname`), or nil for an unknown index.
    ///
    /// The index is resolved in this process's network namespace; avahi-daemon reports indexes of its own namespace
    /// (they differ only when the daemon runs in another namespace, as in the test lab).
    static func interfaceName(_ index: Int32) -> String? {
        guard index > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(UInt32(index), &buffer) != nil else { return nil }
        return string(fromBuffer: buffer)
    }

    /// The interface index for a name (`if_nametoindex`), or nil if there is no such interface.
    static func interfaceIndex(_ name: String) -> Int32? {
        let index = if_nametoindex(name)
        guard index > 0, let value = Int32(exactly: index) else { return nil }
        return value
    }

    /// An address as text; IPv6 link-local addresses get `%ifname` (or `%index`) appended.
    static func format(_ address: UnsafePointer<AvahiAddress>, interface: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard avahi_address_snprint(&buffer, buffer.count, address) != nil else { return nil }
        let text = string(fromBuffer: buffer)
        guard address.pointee.proto == protocolIPv6, isIPv6LinkLocal(text) else { return text }
        let zone = interfaceName(interface) ?? (interface > 0 ? "\(interface)" : nil)
        return zone.map { "\(text)%\($0)" } ?? text
    }

    /// fe80::/10, judged from the textual form (first hextet fe80-febf).
    static func isIPv6LinkLocal(_ text: String) -> Bool {
        let first = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard first.count == 4, let value = UInt16(first, radix: 16) else { return false }
        return value & 0xFFC0 == 0xFE80
    }

    // Avahi's string list order is not symmetric. A resolver hands over the TXT strings in wire order, but a list
    // given to avahi_entry_group_add_service_strlst goes on the wire last element first (avahi-daemon's D-Bus glue
    // rebuilds it by prepending). Checked in the lab with kdig against avahi-publish and against our advertisements.

    /// Copies an Avahi string list into a TXT record in wire order.
    static func txtRecord(from list: UnsafeMutablePointer<AvahiStringList>?) -> TXTRecord {
        var strings: [[UInt8]] = []
        var node = list
        while let current = node {
            let size = avahi_string_list_get_size(current)
            if size > 0, let text = avahi_string_list_get_text(current) {
                strings.append(Array(UnsafeBufferPointer(start: text, count: size)))
            }
            node = avahi_string_list_get_next(current)
        }
        return TXTRecord(strings: strings)
    }

    /// Builds an Avahi string list that puts `txt` on the wire in the record's order, passes it to `body`, frees it.
    @discardableResult
    static func withStringList<Result>(
        _ txt: TXTRecord,
        _ body: (UnsafeMutablePointer<AvahiStringList>?) throws(DNSSDError) -> Result
    ) throws(DNSSDError) -> Result {
        var list: UnsafeMutablePointer<AvahiStringList>? = nil
        // avahi_string_list_add_arbitrary prepends: adding in record order leaves the list in reverse wire order.
        for string in txt.strings {
            let added = string.withUnsafeBufferPointer { buffer in
                avahi_string_list_add_arbitrary(list, buffer.baseAddress, buffer.count)
            }
            guard let added else {
                avahi_string_list_free(list)
                throw DNSSDError(.avahiFailure, "out of memory building TXT record")
            }
            list = added
        }
        defer { avahi_string_list_free(list) }
        return try body(list)
    }

    /// The NUL-terminated text in a C buffer.
    static func string(fromBuffer buffer: [CChar]) -> String {
        String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A C string from Avahi, or "" for NULL.
    static func string(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    /// Normalizes a domain for comparison and display: lower case, no trailing dot.
    static func normalizedDomain(_ domain: String) -> String {
        var result = domain.lowercased()
        while result.hasSuffix(".") { result.removeLast() }
        return result
    }
}
