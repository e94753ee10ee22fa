/// The fields of an SOA record (RFC 1035 §3.3.13).
public struct SOAData: Hashable, Sendable {
    /// The primary name server.
    public var mname: String
    /// The responsible mailbox, as a name.
    public var rname: String
    /// The zone serial number.
    public var serial: UInt32
    /// Secondary refresh interval in seconds.
    public var refresh: UInt32
    /// Secondary retry interval in seconds.
    public var retry: UInt32
    /// Seconds after which a secondary stops answering.
    public var expire: UInt32
    /// The TTL for negative answers (RFC 2308 §4).
    public var minimum: UInt32
}

extension ResourceRecord {
    /// The IPv4 address of an A record, e.g. `192.0.2.1`.
    ///
    /// - Throws: `DNSWireError.Code.malformedRData` unless this is an A record with exactly 4 bytes.
    public func ipv4Address() throws(DNSWireError) -> String {
        guard type == .a, rdata.count == 4 else { throw DNSWireError(.malformedRData, "A record is not 4 bytes") }
        return IPAddressText.ipv4(rdata)
    }

    /// The IPv6 address of an AAAA record in RFC 5952 form, e.g. `2001:db8::1`.
    ///
    /// - Throws: `DNSWireError.Code.malformedRData` unless this is an AAAA record with exactly 16 bytes.
    public func ipv6Address() throws(DNSWireError) -> String {
        guard type == .aaaa, rdata.count == 16 else {
            throw DNSWireError(.malformedRData, "AAAA record is not 16 bytes")
        }
        return IPAddressText.ipv6(rdata)
    }

    /// The target of a CNAME record, lowercased and absolute.
    ///
    /// - Throws: `DNSWireError.Code.malformedRData` unless this is a CNAME holding exactly one name.
    public func cnameTarget() throws(DNSWireError) -> String {
        guard type == .cname else { throw DNSWireError(.malformedRData, "not a CNAME record") }
        do {
            return try DNSName(wire: rdata).text
        } catch {
            throw DNSWireError(.malformedRData, "CNAME: \(error.message)")
        }
    }

    /// The fields of an SOA record.
    ///
    /// - Throws: `DNSWireError.Code.malformedRData` unless this is an SOA with two names and five 32-bit fields.
    public func soa() throws(DNSWireError) -> SOAData {
        guard type == .soa else { throw DNSWireError(.malformedRData, "not an SOA record") }
        var reader = WireReader(rdata)
        do throws(DNSWireError) {
            let mname = try reader.readUncompressedName()
            let rname = try reader.readUncompressedName()
            let soa = SOAData(
                mname: mname.text, rname: rname.text, serial: try reader.readUInt32(),
                refresh: try reader.readUInt32(), retry: try reader.readUInt32(), expire: try reader.readUInt32(),
                minimum: try reader.readUInt32())
            guard reader.isAtEnd else { throw DNSWireError(.malformedRData, "bytes after SOA minimum") }
            return soa
        } catch {
            throw DNSWireError(.malformedRData, "SOA: \(error.message)")
        }
    }
}

extension ResourceRecord {
    /// The MINIMUM field of an SOA record, or nil where ``soa()`` would throw: the two names are checked and
    /// skipped, not decoded (a negative answer needs only this field, once per miss).
    public func soaMinimum() -> UInt32? {
        guard type == .soa, let afterMname = DNSName.skipUncompressed(rdata, at: 0, end: rdata.count),
            let afterRname = DNSName.skipUncompressed(rdata, at: afterMname, end: rdata.count),
            rdata.count - afterRname == 20
        else { return nil }
        let at = rdata.count - 4
        return UInt32(rdata[at]) << 24 | UInt32(rdata[at + 1]) << 16 | UInt32(rdata[at + 2]) << 8 | UInt32(rdata[at + 3])
    }
}

extension DNSMessage {
    /// How long a negative answer (NXDOMAIN or NODATA) may be cached: the smaller of the authority SOA's TTL
    /// and its MINIMUM field (RFC 2308 §5), or `nil` when the authority section has no usable SOA (then the
    /// answer must not be cached, RFC 2308 §5).
    public var negativeCacheTTL: UInt32? {
        for record in authority where record.type == .soa {
            if let minimum = record.soaMinimum() { return min(record.ttl, minimum) }
        }
        return nil
    }
}
