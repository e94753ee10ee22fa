import CLDNS
import DNSCore
import Foundation
import Synchronization

/// The cryptography of DNSSEC, done by libldns (which uses libssl): signatures over RRsets (RFC 4035 §5.3), DS
/// digests of keys (RFC 4034 §5, RFC 6605) and NSEC/NSEC3 denial (RFC 4035 §5.4, RFC 5155 §8). Pure functions
/// over our wire records: every call converts the records to `ldns_rr`s and frees them before returning.
public enum DNSSECCrypto {
    /// Signing algorithms validated (RFC 8624 "MUST validate" plus ED448, which this libldns has): RSASHA256,
    /// RSASHA512, ECDSAP256SHA256, ECDSAP384SHA384, ED25519, ED448. Any other makes its zone insecure
    /// (RFC 4035 §5.2).
    public static let supportedAlgorithms: Set<UInt8> = [8, 10, 13, 14, 15, 16]
    /// DS digest types used: SHA-256 (2) and SHA-384 (4).
    public static let supportedDigests: Set<UInt8> = [2, 4]
    /// RFC 9276 §3.2: NSEC3 with more iterations than this is treated as insecure.
    public static let maximumNSEC3Iterations = 150

    /// The outcome of checking the signatures of one RRset.
    public enum SignatureCheck: Sendable, Equatable {
        /// A signature made by one of the keys verifies now; the earliest expiration among the valid ones.
        case valid(expiration: UInt32)
        /// Every signature is of an algorithm not validated here.
        case unsupportedAlgorithm
        /// The best signature is past its expiration (EDE 7).
        case expired
        /// The best signature is not valid yet (EDE 8).
        case notYetValid
        /// No signature verifies with the keys (EDE 6), with ldns's reason.
        case bogus(String)
    }

    // MARK: - Records to ldns

    /// One record in wire format (uncompressed owner, no compression in RDATA: our records hold it expanded).
    static func wire(_ record: ResourceRecord) -> [UInt8]? {
        guard let name = try? DNSName(record.name), record.rdata.count <= 0xFFFF else { return nil }
        var bytes = name.wire
        bytes += [UInt8(record.type.rawValue >> 8), UInt8(record.type.rawValue & 0xFF)]
        bytes += [UInt8(record.class.rawValue >> 8), UInt8(record.class.rawValue & 0xFF)]
        bytes += [24, 16, 8, 0].map { UInt8((record.ttl >> $0) & 0xFF) }
        bytes += [UInt8(record.rdata.count >> 8), UInt8(record.rdata.count & 0xFF)]
        return bytes + record.rdata
    }

    /// A list of `ldns_rr` made from records, freed (deeply) with the list.
    final class RRList {
        let pointer: UnsafeMutablePointer<ldns_rr_list>

        init?(_ records: [ResourceRecord]) {
            guard let list = ldns_rr_list_new() else { return nil }
            pointer = list
            for record in records {
                guard let bytes = Self.wire(record) else { return nil }
                var rr: UnsafeMutablePointer<ldns_rr>? = nil
                var position = 0
                let status = bytes.withUnsafeBufferPointer {
                    ldns_wire2rr(&rr, $0.baseAddress, $0.count, &position, LDNS_SECTION_ANSWER)
                }
                guard status == LDNS_STATUS_OK, let rr else { return nil }
                ldns_rr_list_push_rr(list, rr)
            }
        }

        private static func wire(_ record: ResourceRecord) -> [UInt8]? { DNSSECCrypto.wire(record) }

        var count: Int { ldns_rr_list_rr_count(pointer) }
        func rr(_ index: Int) -> UnsafeMutablePointer<ldns_rr> { ldns_rr_list_rr(pointer, index) }

        deinit { ldns_rr_list_deep_free(pointer) }
    }

    // MARK: - Signatures

    /// Checks the RRSIGs `signatures` over `rrset` (one owner, type and class) with `keys` (DNSKEY records) at
    /// `now` (seconds since the epoch). Revoked keys and keys without the Zone Key flag are not used.
    public static func verify(
        rrset: [ResourceRecord], signatures: [ResourceRecord], keys: [ResourceRecord], now: Date
    ) -> SignatureCheck {
        let usable = keys.filter { key in
            guard key.rdata.count >= 4 else { return false }
            let flags = UInt16(key.rdata[0]) << 8 | UInt16(key.rdata[1])
            return flags & 0x0100 != 0 && flags & 0x0080 == 0
        }
        let supported = signatures.filter { $0.rdata.count > 2 && supportedAlgorithms.contains($0.rdata[2]) }
        if supported.isEmpty && !signatures.isEmpty { return .unsupportedAlgorithm }
        guard let set = RRList(rrset), let keyList = RRList(usable), let sigs = RRList(supported) else {
            return .bogus("records ldns cannot parse")
        }
        if usable.isEmpty { return .bogus("no usable DNSKEY") }
        var best: SignatureCheck = .bogus("no signature")
        var earliest: UInt32?
        let seconds = time_t(now.timeIntervalSince1970)
        let verifiedBefore = VerifiedSignatures.key(rrset: rrset, keys: usable)
        for index in 0..<sigs.count {
            let memo = verifiedBefore.map { $0 + supported[index].rdata }
            if let memo, VerifiedSignatures.shared.contains(memo), VerifiedSignatures.inWindow(supported[index], now: seconds) {
                let expiration = expirationOf(supported[index]) ?? 0
                earliest = min(earliest ?? expiration, expiration)
                continue
            }
            let status = ldns_verify_rrsig_keylist_time(set.pointer, sigs.rr(index), keyList.pointer, seconds, nil)
            switch status {
            case LDNS_STATUS_OK:
                if let memo { VerifiedSignatures.shared.insert(memo) }
                let expiration = expirationOf(supported[index]) ?? 0
                earliest = min(earliest ?? expiration, expiration)
            case LDNS_STATUS_CRYPTO_SIG_EXPIRED:
                if case .bogus = best { best = .expired }
            case LDNS_STATUS_CRYPTO_SIG_NOT_INCEPTED:
                if case .bogus = best { best = .notYetValid }
            default:
                if case .bogus = best { best = .bogus(String(cString: ldns_get_errorstr_by_id(status))) }
            }
        }
        if let earliest { return .valid(expiration: earliest) }
        return best
    }

    /// Signatures verified before: RFC 4035 §5.3 is deterministic, so the same RRset, RRSIG and keys verify the
    /// same way again, and an RRset that comes back in another answer (a zone's NSEC3 records in one wildcard or
    /// NODATA proof after another, a DS or DNSKEY fetched again after its TTL) costs no signature check, as in
    /// Unbound's RRset cache. Keyed by the exact bytes, not a hash that could collide: owner, type, class and
    /// RDATA of each record (TTLs left out: the signature covers the RRSIG's original TTL), the RRSIG's RDATA, and
    /// the RDATA of every usable key. The validity window is checked again at each use; bounded (emptied when full).
    final class VerifiedSignatures: Sendable {
        static let shared = VerifiedSignatures()
        static let capacity = 1024
        private let entries = Mutex<Set<[UInt8]>>([])

        func contains(_ key: [UInt8]) -> Bool { entries.withLock { $0.contains(key) } }
        func insert(_ key: [UInt8]) {
            entries.withLock {
                if $0.count >= Self.capacity { $0.removeAll(keepingCapacity: true) }
                $0.insert(key)
            }
        }
        var count: Int { entries.withLock { $0.count } }

        /// The key's common part (everything but the RRSIG), nil when a record is too large to frame.
        static func key(rrset: [ResourceRecord], keys: [ResourceRecord]) -> [UInt8]? {
            var out: [UInt8] = []
            for record in rrset + [ResourceRecord(name: ".", type: RRType(0), ttl: 0, rdata: [])] + keys {
                let name = Array(record.name.lowercased().utf8)
                guard name.count <= 0xFFFF, record.rdata.count <= 0xFFFF else { return nil }
                out += [UInt8(name.count >> 8), UInt8(name.count & 0xFF)] + name
                out += [UInt8(record.type.rawValue >> 8), UInt8(record.type.rawValue & 0xFF)]
                out += [UInt8(record.class.rawValue >> 8), UInt8(record.class.rawValue & 0xFF)]
                out += [UInt8(record.rdata.count >> 8), UInt8(record.rdata.count & 0xFF)] + record.rdata
            }
            return out
        }

        /// Whether `now` lies between the RRSIG's inception and expiration (RFC 4034 §3.1.5, serial number
        /// arithmetic as ldns does it); anything else is left to ldns, which names the failure.
        static func inWindow(_ rrsig: ResourceRecord, now: time_t) -> Bool {
            guard rrsig.rdata.count >= 16, let expiration = expirationOf(rrsig) else { return false }
            let inception = rrsig.rdata[12..<16].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let now32 = UInt32(truncatingIfNeeded: now)
            return Int32(bitPattern: expiration &- inception) >= 0 && Int32(bitPattern: expiration &- now32) >= 0
                && Int32(bitPattern: inception &- now32) <= 0
        }
    }

    /// The signature expiration field of an RRSIG (RFC 4034 §3.1.5).
    public static func expirationOf(_ rrsig: ResourceRecord) -> UInt32? {
        guard rrsig.rdata.count >= 12 else { return nil }
        return rrsig.rdata[8..<12].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The type an RRSIG covers.
    public static func typeCovered(_ rrsig: ResourceRecord) -> RRType? {
        guard rrsig.rdata.count >= 2 else { return nil }
        return RRType(UInt16(rrsig.rdata[0]) << 8 | UInt16(rrsig.rdata[1]))
    }

    /// The labels field of an RRSIG (fewer than the owner's: a wildcard expansion).
    public static func labelsOf(_ rrsig: ResourceRecord) -> Int? {
        guard rrsig.rdata.count >= 4 else { return nil }
        return Int(rrsig.rdata[3])
    }

    /// The signer's name of an RRSIG, lowercased with a trailing dot.
    public static func signerOf(_ rrsig: ResourceRecord) -> String? {
        guard rrsig.rdata.count > 18, let (labels, _) = try? DNSName.readLabels(rrsig.rdata, at: 18),
            let name = try? DNSName(labels: labels)
        else { return nil }
        return name.text
    }

    // MARK: - DS

    /// Whether `ds` is a digest of `key` (same owner assumed): nil when the DS's digest type or algorithm is
    /// not one used here.
    public static func dsMatches(_ ds: ResourceRecord, key: ResourceRecord) -> Bool? {
        guard ds.rdata.count > 4, supportedDigests.contains(ds.rdata[3]), supportedAlgorithms.contains(ds.rdata[2])
        else { return nil }
        guard let list = RRList([ds, key]) else { return false }
        return ldns_rr_compare_ds(list.rr(0), list.rr(1)) != 0
    }

    // MARK: - Denial

    /// What a set of NSEC or NSEC3 records proves about (name, type).
    public enum Denial: Sendable, Equatable {
        /// The name does not exist, or has no records of the type (as asked).
        case proven
        /// NSEC3 with more iterations than RFC 9276 allows: not checked, the answer is insecure.
        case tooManyIterations
        /// The records do not prove it.
        case notProven(String)
    }

    /// Checks that `proof` (NSEC or NSEC3 records, with their RRSIGs in `signatures`) denies (name, type): for
    /// NXDOMAIN (`nameExists == false`) the name and the wildcard, for NODATA the type at the name.
    public static func denial(
        name: String, type: RRType, nameExists: Bool, proof: [ResourceRecord], signatures: [ResourceRecord]
    ) -> Denial {
        let nsec3 = proof.filter { $0.type.rawValue == 50 }
        if nsec3.contains(where: { iterationsOf($0) > maximumNSEC3Iterations }) { return .tooManyIterations }
        guard let question = RRList([ResourceRecord(name: name, type: type, ttl: 0, rdata: [])]),
            let sigs = RRList(signatures)
        else { return .notProven("records ldns cannot parse") }
        let status: ldns_status
        if !nsec3.isEmpty {
            let usable = usableNSEC3(nsec3)
            guard !usable.isEmpty else {
                return .notProven(
                    "no NSEC3 record with SHA-1 hashing, flags 0 or 1 and well-formed data (RFC 5155 §8.1, §8.2)")
            }
            guard let list = RRList(usable) else { return .notProven("records ldns cannot parse") }
            status = ldns_dnssec_verify_denial_nsec3(
                question.rr(0), list.pointer, sigs.pointer, nameExists ? LDNS_RCODE_NOERROR : LDNS_RCODE_NXDOMAIN,
                ldns_rr_type(rawValue: UInt32(type.rawValue)), 1)
        } else {
            let nsec = proof.filter { $0.type.rawValue == 47 }
            guard !nsec.isEmpty else { return .notProven("no NSEC or NSEC3 records") }
            return NSECDenial.proves(name: name, type: type, nameExists: nameExists, records: nsec)
                ? .proven : .notProven("no NSEC matches or covers the name and its wildcard")
        }
        return status == LDNS_STATUS_OK ? .proven : .notProven(String(cString: ldns_get_errorstr_by_id(status)))
    }

    /// The NSEC3 records a validator may use (RFC 5155 §8.1, §8.2: ignore unknown hash algorithms and flags other
    /// than 0 or 1), well-formed with a SHA-1-sized next hashed owner, not owned by the root, and with the hash
    /// parameters of the first of them. libldns 1.8.3 checks none of this and keeps its assertions:
    /// `ldns_dnssec_verify_denial_nsec3` hashes every name with the first record's parameters and appends the first
    /// owner's parent, and `ldns_nsec_covers_name` turns the next hashed owner into a name; an unknown algorithm (a
    /// NULL hash), a root owner (no parent) or a next hashed owner of another size (no name, or a label over 63
    /// octets) reaches `ldns_dname_cat` or `ldns_str2rdf_dname` with NULL and stops the process. Any zone owner can
    /// sign such a record, so every NSEC3 passes through here before ldns sees it (found by the reply fuzzer,
    /// Fuzz/SVCBFuzz).
    static func usableNSEC3(_ records: [ResourceRecord]) -> [ResourceRecord] {
        func parameters(_ record: ResourceRecord) -> ArraySlice<UInt8>? {
            let data = record.rdata
            guard data.count >= 5, data[0] == 1, data[1] <= 1, record.name != ".", nsec3Types(record) != nil else {
                return nil
            }
            let hashAt = 5 + Int(data[4])
            guard data[hashAt] == 20 else { return nil }  // nsec3Types checked that hashAt is inside
            return data[2..<hashAt]  // iterations and salt (the algorithm is 1 for all)
        }
        guard let first = records.lazy.compactMap(parameters).first else { return [] }
        return records.filter { parameters($0) == first }
    }

    /// The iterations field of an NSEC3 record (RFC 5155 §3.2).
    public static func iterationsOf(_ nsec3: ResourceRecord) -> Int {
        guard nsec3.rdata.count >= 4 else { return 0 }
        return Int(nsec3.rdata[2]) << 8 | Int(nsec3.rdata[3])
    }

    /// The types an NSEC record's bitmap lists at its owner (RFC 4034 §4.1.2), or nil when malformed.
    public static func nsecTypes(_ nsec: ResourceRecord) -> Set<UInt16>? {
        guard let (_, next) = try? DNSName.readLabels(nsec.rdata, at: 0) else { return nil }
        return bitmapTypes(Array(nsec.rdata[next...]))
    }

    /// The types an NSEC3 record's bitmap lists (RFC 5155 §3.2) and its opt-out flag.
    public static func nsec3Types(_ nsec3: ResourceRecord) -> (types: Set<UInt16>, optOut: Bool)? {
        let data = nsec3.rdata
        guard data.count >= 5 else { return nil }
        let saltLength = Int(data[4])
        let hashAt = 5 + saltLength
        guard data.count > hashAt else { return nil }
        let hashLength = Int(data[hashAt])
        let bitmapAt = hashAt + 1 + hashLength
        guard data.count >= bitmapAt, let types = bitmapTypes(Array(data[bitmapAt...])) else { return nil }
        return (types, data[1] & 1 != 0)
    }

    static func bitmapTypes(_ bytes: [UInt8]) -> Set<UInt16>? {
        var types: Set<UInt16> = []
        var index = 0
        while index < bytes.count {
            guard index + 2 <= bytes.count else { return nil }
            let window = UInt16(bytes[index])
            let length = Int(bytes[index + 1])
            guard length >= 1, length <= 32, index + 2 + length <= bytes.count else { return nil }
            for offset in 0..<length {
                let octet = bytes[index + 2 + offset]
                for bit in 0..<8 where octet & (0x80 >> bit) != 0 {
                    types.insert(window << 8 | UInt16(offset * 8 + bit))
                }
            }
            index += 2 + length
        }
        return types
    }

    /// The NSEC3 record whose owner hash is `name`'s (RFC 5155 §8.4), using the record's own parameters.
    public static func matchingNSEC3(_ name: String, in nsec3s: [ResourceRecord]) -> ResourceRecord? {
        let nsec3s = usableNSEC3(nsec3s.filter { $0.type.rawValue == 50 })
        guard let list = RRList(nsec3s), let owner = ldns_dname_new_frm_str(name) else { return nil }
        defer { ldns_rdf_deep_free(owner) }
        for index in 0..<list.count {
            let rr = list.rr(index)
            guard let hashed = ldns_nsec3_hash_name_frm_nsec3(rr, owner) else { continue }
            defer { ldns_rdf_deep_free(hashed) }
            // The hashed name is the first label of the NSEC3's owner (the zone follows).
            guard let ownerLabel = ldns_dname_label(ldns_rr_owner(rr), 0) else { continue }
            defer { ldns_rdf_deep_free(ownerLabel) }
            guard let hashLabel = ldns_dname_label(hashed, 0) else { continue }
            defer { ldns_rdf_deep_free(hashLabel) }
            if ldns_dname_compare(ownerLabel, hashLabel) == 0 { return nsec3s[index] }
        }
        return nil
    }

    /// Whether an NSEC covers `name` (owner < name < next), or an NSEC3 covers its hash, without matching it.
    /// A wildcard expansion for `owner` from a wildcard whose RRSIG has `labels` labels is proven only when the
    /// next closer name (the closest encloser, `labels` labels, plus one more label of `owner`) does not exist
    /// (RFC 4035 §5.3.4, RFC 5155 §8.8): an NSEC3 covers its hash, or an NSEC covers it without the NSEC's next
    /// name lying below it (that would make it an empty non-terminal, which exists).
    public static func provesWildcardExpansion(_ owner: String, labels: Int, proof: [ResourceRecord]) -> Bool {
        guard let name = try? DNSName(owner), labels >= 0, labels < name.labels.count,
            let nextCloser = try? DNSName(labels: Array(name.labels.suffix(labels + 1)))
        else { return false }
        let text = nextCloser.text
        for record in proof where record.type.rawValue == 47 && covers(text, proof: [record]) {
            guard let (next, _) = try? DNSName.readLabels(record.rdata, at: 0), let nextName = try? DNSName(labels: next)
            else { continue }
            if !nextName.isSubdomain(of: nextCloser) { return true }
        }
        return covers(text, proof: proof.filter { $0.type.rawValue == 50 })
    }

    public static func covers(_ name: String, proof: [ResourceRecord]) -> Bool {
        let proof = proof.filter { $0.type.rawValue == 47 } + usableNSEC3(proof.filter { $0.type.rawValue == 50 })
        guard let list = RRList(proof), let owner = ldns_dname_new_frm_str(name) else { return false }
        defer { ldns_rdf_deep_free(owner) }
        for index in 0..<list.count {
            let rr = list.rr(index)
            if ldns_rr_get_type(rr) == LDNS_RR_TYPE_NSEC {
                if ldns_dname_compare(ldns_rr_owner(rr), owner) != 0 && ldns_nsec_covers_name(rr, owner) != 0 { return true }
                continue
            }
            guard let hashed = ldns_nsec3_hash_name_frm_nsec3(rr, owner) else { continue }
            defer { ldns_rdf_deep_free(hashed) }
            guard let zone = ldns_dname_left_chop(ldns_rr_owner(rr)) else { continue }
            defer { ldns_rdf_deep_free(zone) }
            guard ldns_dname_cat(hashed, zone) == LDNS_STATUS_OK else { continue }
            if ldns_dname_compare(ldns_rr_owner(rr), hashed) != 0 && ldns_nsec_covers_name(rr, hashed) != 0 { return true }
        }
        return false
    }
}
