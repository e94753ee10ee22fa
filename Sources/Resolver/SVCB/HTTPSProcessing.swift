import DNSCore

/// What an HTTPS (or SVCB) RRset tells a client, after RFC 9460 client processing.
public enum HTTPSRRSetOutcome: Sendable, Equatable {
    /// The RRset has an AliasMode record: query `target` next (RFC 9460 §2.4.2); ServiceMode records in the
    /// same set were ignored. The caller chases it within an `AliasChain`.
    case alias(target: String)
    /// The AliasMode TargetName is `.`: the service is declared unavailable (RFC 9460 §2.5.1). This is
    /// advisory; a client may still connect without SVCB.
    case serviceUnavailable
    /// The usable ServiceMode bindings in priority order; empty when no record is usable (then the client acts
    /// as if there were no SVCB records, RFC 9460 §8).
    case bindings([ServiceBinding])
    /// A record is malformed, so the whole RRset is rejected and the client falls back to non-SVCB connection
    /// establishment (RFC 9460 §2.2).
    case malformed(SVCBError)

    /// The usable bindings, or an empty list for any other outcome.
    public var bindings: [ServiceBinding] {
        if case .bindings(let bindings) = self { return bindings }
        return []
    }

    /// Whether any usable binding offers HTTP/3.
    public var h3: Bool { bindings.contains(where: \.supportsH3) }
}

/// RFC 9460 client processing of an HTTPS RRset: pure functions, no I/O.
public enum HTTPSProcessing {
    /// The ALPN every HTTPS endpoint is assumed to support unless `no-default-alpn` (RFC 9460 §9.1).
    public static let defaultALPN = "http/1.1"

    /// The keys this client understands, for the "mandatory" check of RFC 9460 §8.
    public static let supportedKeys: Set<SVCBParamKey> = [
        .mandatory, .alpn, .noDefaultAlpn, .port, .ipv4hint, .ech, .ipv6hint, .dohpath,
    ]

    /// Keys that are mandatory whenever present for HTTPS, without being listed (RFC 9460 §9.1: "port" and
    /// "no-default-alpn").
    public static let automaticallyMandatoryKeys: [SVCBParamKey] = [.noDefaultAlpn, .port]

    /// Whether an ALPN id is an HTTP/3 version, which runs over QUIC rather than TCP.
    public static func isQUICALPN(_ id: String) -> Bool { id == "h3" || id.hasPrefix("h3-") }

    /// Processes the HTTPS/SVCB records of one RRset.
    ///
    /// - Parameters:
    ///   - records: the answer records; only those of type HTTPS or SVCB owned by `ownerName` are used.
    ///   - ownerName: the owner name of the RRset (after following CNAMEs), used for TargetName `.`.
    ///   - supportedKeys: the keys this client understands (RFC 9460 §8).
    /// - Returns: the outcome; see `HTTPSRRSetOutcome`.
    public static func process(
        records: [ResourceRecord], ownerName: String, supportedKeys: Set<SVCBParamKey> = supportedKeys
    ) -> HTTPSRRSetOutcome {
        let owner = DNSName.normalized(ownerName)
        let rdatas = records.filter { ($0.type == .https || $0.type == .svcb) && $0.name == owner }.map(\.rdata)
        return process(rdatas: rdatas, ownerName: owner, supportedKeys: supportedKeys)
    }

    /// Processes the RDATA of every record of one HTTPS/SVCB RRset.
    ///
    /// - Parameters:
    ///   - rdatas: the RDATA of each record, in the order received.
    ///   - ownerName: the owner name of the RRset, used for TargetName `.`.
    ///   - supportedKeys: the keys this client understands (RFC 9460 §8).
    public static func process(
        rdatas: [[UInt8]], ownerName: String, supportedKeys: Set<SVCBParamKey> = supportedKeys
    ) -> HTTPSRRSetOutcome {
        var records: [SVCBRecord] = []
        for rdata in rdatas {
            do {
                records.append(try SVCBRecord.parse(rdata: rdata))
            } catch {
                // RFC 9460 §2.2: "If any RRs are malformed, the client MUST reject the entire RRset".
                return .malformed(error)
            }
        }
        // RFC 9460 §2.4.2: with an AliasMode record present, ServiceMode records are ignored. Several
        // AliasMode records are a misconfiguration; clients SHOULD pick one at random; we take the first to
        // stay deterministic.
        if let alias = records.first(where: \.isAliasMode) {
            // RFC 9460 §2.5.1: AliasMode TargetName "." means the service does not exist.
            if alias.target.isRoot { return .serviceUnavailable }
            return .alias(target: alias.target.text)
        }
        let usable = records.filter { isCompatible($0, supportedKeys: supportedKeys) }
        // RFC 9460 §2.4.1: lower SvcPriority first. Equal priorities may be shuffled; a stable sort keeps
        // record order so tests and plans are deterministic.
        let sorted = usable.enumerated().sorted { lhs, rhs in
            lhs.element.priority != rhs.element.priority
                ? lhs.element.priority < rhs.element.priority : lhs.offset < rhs.offset
        }
        return .bindings(sorted.map { ServiceBinding(record: $0.element, ownerName: ownerName) })
    }

    /// Whether a ServiceMode record is self-consistent and compatible with this client.
    ///
    /// - RFC 9460 §8: every key in `mandatory`, and every automatically mandatory key present, must be one
    ///   this client supports; else "the client MUST ignore" the record.
    /// - RFC 9460 §8: keys listed in `mandatory` MUST also appear in the SvcParams (self-consistency, §2.4.3:
    ///   "clients MUST reject any RR whose recognized SvcParams are not self-consistent"); we reject the RR,
    ///   not the whole set, which §2.4.3 only allows.
    /// - RFC 9460 §7.1.1: `no-default-alpn` without `alpn` is not self-consistent; such a record also has an
    ///   empty ALPN set, so it could never be used.
    public static func isCompatible(_ record: SVCBRecord, supportedKeys: Set<SVCBParamKey> = supportedKeys) -> Bool {
        !record.isAliasMode && incompatibility(record, supportedKeys: supportedKeys) == nil
    }

    /// Why a ServiceMode record is ignored by ``isCompatible(_:supportedKeys:)``, or nil when it is usable.
    public static func incompatibility(_ record: SVCBRecord, supportedKeys: Set<SVCBParamKey> = supportedKeys)
        -> String?
    {
        let params = record.params
        for key in params.mandatory {
            guard supportedKeys.contains(key) else { return "mandatory key \(key) is not supported (RFC 9460 §8)" }
            guard params.contains(key) else { return "mandatory key \(key) is missing from the record (RFC 9460 §8)" }
        }
        for key in automaticallyMandatoryKeys where params.contains(key) {
            guard supportedKeys.contains(key) else { return "key \(key) is not supported (RFC 9460 §9.1)" }
        }
        if params.noDefaultAlpn && params.alpnIDs.isEmpty { return "no-default-alpn without alpn (RFC 9460 §7.1.1)" }
        return nil
    }

    /// Why ServiceMode records of an RRset were ignored, one line per ignored record (priority and target
    /// first); empty when every record was usable or the set is not a ServiceMode set.
    public static func ignoredRecords(
        records: [ResourceRecord], ownerName: String, supportedKeys: Set<SVCBParamKey> = supportedKeys
    ) -> [String] {
        let owner = DNSName.normalized(ownerName)
        return records.filter { ($0.type == .https || $0.type == .svcb) && $0.name == owner }.compactMap { record in
            guard let parsed = try? SVCBRecord.parse(rdata: record.rdata), !parsed.isAliasMode,
                let reason = incompatibility(parsed, supportedKeys: supportedKeys)
            else { return nil }
            return "record \(parsed.priority) \(parsed.target.isRoot ? "." : parsed.target.text) ignored: \(reason)"
        }
    }
}
