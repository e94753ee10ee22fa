/// A bounds-checked cursor over wire bytes; every read past `end` throws instead of trapping.
package struct WireReader {
    let bytes: [UInt8]
    private(set) var offset: Int
    let end: Int

    init(_ bytes: [UInt8], offset: Int = 0, end: Int? = nil) {
        self.bytes = bytes
        self.offset = offset
        self.end = min(end ?? bytes.count, bytes.count)
    }

    package var remaining: Int { max(0, end - offset) }
    package var isAtEnd: Bool { offset >= end }

    package mutating func readUInt8() throws(DNSWireError) -> UInt8 {
        guard remaining >= 1 else { throw DNSWireError(.truncated, "expected 1 more byte") }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func readUInt16() throws(DNSWireError) -> UInt16 {
        guard remaining >= 2 else { throw DNSWireError(.truncated, "expected 2 more bytes") }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    package mutating func readUInt32() throws(DNSWireError) -> UInt32 {
        guard remaining >= 4 else { throw DNSWireError(.truncated, "expected 4 more bytes") }
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    package mutating func readBytes(_ count: Int) throws(DNSWireError) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw DNSWireError(.truncated, "expected \(count) more bytes") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    package mutating func readUncompressedName() throws(DNSWireError) -> DNSName {
        let (name, next) = try DNSName.readUncompressed(bytes, at: offset, end: end)
        offset = next
        return name
    }
}
