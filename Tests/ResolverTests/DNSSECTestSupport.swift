import CLDNS
import DNSCore
import Foundation

@testable import Resolver

/// A zone signer for unit tests: real keys and real signatures made by libldns (the same library that verifies
/// them, but through its signing half: `ldns_key_new_frm_algorithm`, `ldns_sign_public`).
final class TestZoneKey: @unchecked Sendable {
    let zone: String
    let key: UnsafeMutablePointer<ldns_key>
    let list: UnsafeMutablePointer<ldns_key_list>
    /// The DNSKEY record.
    let dnskey: ResourceRecord

    /// - Parameters: algorithm: an ldns signing algorithm; inception/expiration: seconds since the epoch.
    init(zone: String, algorithm: ldns_signing_algorithm = LDNS_SIGN_ECDSAP256SHA256, bits: UInt16 = 256,
         inception: UInt32, expiration: UInt32)
    {
        self.zone = zone
        key = ldns_key_new_frm_algorithm(algorithm, bits)!
        ldns_key_set_pubkey_owner(key, ldns_dname_new_frm_str(zone))
        ldns_key_set_flags(key, 257)
        ldns_key_set_inception(key, inception)
        ldns_key_set_expiration(key, expiration)
        let rr = ldns_key2rr(key)!
        ldns_key_set_keytag(key, ldns_calc_keytag(rr))
        dnskey = Self.record(rr)
        ldns_rr_free(rr)
        list = ldns_key_list_new()!
        ldns_key_list_push_key(list, key)
    }

    deinit { ldns_key_list_free(list) }  // frees the key too

    /// The DS (SHA-256) of this key, owned by the zone.
    var ds: ResourceRecord {
        let rr = ldns_key2rr(key)!
        defer { ldns_rr_free(rr) }
        let ds = ldns_key_rr2ds(rr, LDNS_SHA256)!
        defer { ldns_rr_free(ds) }
        return Self.record(ds)
    }

    /// The RRSIG over `rrset` (one owner and type) by this key.
    func sign(_ rrset: [ResourceRecord]) -> ResourceRecord {
        let records = DNSSECCrypto.RRList(rrset)!
        let signatures = ldns_sign_public(records.pointer, list)!
        defer { ldns_rr_list_deep_free(signatures) }
        return Self.record(ldns_rr_list_rr(signatures, 0))
    }

    /// An RRSIG by this key with another validity period.
    func sign(_ rrset: [ResourceRecord], inception: UInt32, expiration: UInt32) -> ResourceRecord {
        let (oldInception, oldExpiration) = (ldns_key_inception(key), ldns_key_expiration(key))
        ldns_key_set_inception(key, inception)
        ldns_key_set_expiration(key, expiration)
        defer {
            ldns_key_set_inception(key, oldInception)
            ldns_key_set_expiration(key, oldExpiration)
        }
        return sign(rrset)
    }

    /// The RRset followed by its RRSIG.
    func signed(_ rrset: [ResourceRecord]) -> [ResourceRecord] { rrset + [sign(rrset)] }

    static func record(_ rr: UnsafeMutablePointer<ldns_rr>) -> ResourceRecord {
        let buffer = ldns_buffer_new(1024)!
        defer { ldns_buffer_free(buffer) }
        _ = ldns_rr_rdata2buffer_wire(buffer, rr)
        let owner = ldns_rdf2str(ldns_rr_owner(rr))!
        defer { free(owner) }
        return ResourceRecord(
            name: String(cString: owner), type: RRType(UInt16(ldns_rr_get_type(rr).rawValue)), ttl: ldns_rr_ttl(rr),
            rdata: Array(UnsafeBufferPointer(start: ldns_buffer_begin(buffer), count: ldns_buffer_position(buffer))))
    }
}

enum DNSSECRecords {
    static func a(_ name: String, _ address: [UInt8], ttl: UInt32 = 300) -> ResourceRecord {
        ResourceRecord(name: name, type: .a, ttl: ttl, rdata: address)
    }

    static func soa(_ zone: String) -> ResourceRecord {
        ReplyScrubberTests.soa(zone, ttl: 300, minimum: 300)
    }

    /// An NSEC record (RFC 4034 §4) from `owner` to `next` listing `types`.
    static func nsec(_ owner: String, next: String, types: [UInt16], ttl: UInt32 = 300) -> ResourceRecord {
        ResourceRecord(name: owner, type: RRType(47), ttl: ttl, rdata: try! DNSName(next).wire + bitmap(types))
    }

    static func bitmap(_ types: [UInt16]) -> [UInt8] {
        var out: [UInt8] = []
        for window in Set(types.map { $0 >> 8 }).sorted() {
            let inWindow = types.filter { $0 >> 8 == window }.map { Int($0 & 0xFF) }
            var bits = [UInt8](repeating: 0, count: inWindow.max()! / 8 + 1)
            for type in inWindow { bits[type / 8] |= 0x80 >> UInt8(type % 8) }
            out += [UInt8(window), UInt8(bits.count)] + bits
        }
        return out
    }
}
