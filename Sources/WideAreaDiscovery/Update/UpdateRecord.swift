import DNSCore

/// One record of an UPDATE message's prerequisite or update section (RFC 2136 §2.4, §2.5), in wire terms: the
/// owner as raw labels (case kept), type, class (IN to add or assert, NONE to delete one RR or assert absence, ANY
/// to delete an RRset or assert presence), TTL and rdata.
public struct UpdateRecord: Hashable, Sendable, Codable {
    public var owner: [[UInt8]]
    public var type: UInt16
    public var rrClass: UInt16
    public var ttl: UInt32
    public var rdata: [UInt8]

    public static let classIN: UInt16 = 1
    public static let classNONE: UInt16 = 254
    public static let classANY: UInt16 = 255
    public static let typeANY: UInt16 = 255

    public init(owner: [[UInt8]], type: UInt16, rrClass: UInt16 = UpdateRecord.classIN, ttl: UInt32, rdata: [UInt8]) {
        self.owner = owner
        self.type = type
        self.rrClass = rrClass
        self.ttl = ttl
        self.rdata = rdata
    }

    /// RFC 2136 §2.4.5: the name must not be in use (prerequisite).
    static func nameNotInUse(_ owner: [[UInt8]]) -> UpdateRecord {
        UpdateRecord(owner: owner, type: typeANY, rrClass: classNONE, ttl: 0, rdata: [])
    }

    /// RFC 2136 §2.4.2: this exact RR must exist (prerequisite; with the rest of its RRset, which we own).
    var mustExist: UpdateRecord {
        UpdateRecord(owner: owner, type: type, rrClass: Self.classIN, ttl: 0, rdata: rdata)
    }

    /// RFC 2136 §2.5.4: delete this RR (update).
    var deletion: UpdateRecord {
        UpdateRecord(owner: owner, type: type, rrClass: Self.classNONE, ttl: 0, rdata: rdata)
    }

    /// The record in wire format (owner uncompressed).
    var wire: [UInt8] {
        var out = DNSName.wire(owner)
        out += [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(rrClass >> 8), UInt8(rrClass & 0xFF)]
        out += [UInt8(ttl >> 24), UInt8((ttl >> 16) & 0xFF), UInt8((ttl >> 8) & 0xFF), UInt8(ttl & 0xFF)]
        out += [UInt8(rdata.count >> 8), UInt8(rdata.count & 0xFF)]
        return out + rdata
    }
}
