import DNSCore
import Foundation
import Synchronization

/// Where the validator gets DS and DNSKEY answers: the resolver's cache and in-flight table (each answer itself
/// validated on store). Nil when the question could not be answered.
protocol DNSSECFetcher: Sendable {
    func dnssecFetch(_ name: String, type: RRType) async -> CacheAnswer<CachedRRset>?
    /// Starts the fetch of an RRset the chain will need next, without waiting for it (a later `dnssecFetch` joins
    /// it); nothing when it is cached.
    func dnssecPrefetch(_ name: String, type: RRType)
}

/// The chain of trust (docs/DNSSEC.md): validates one scrubbed upstream answer, fetching the DS and DNSKEY RRsets
/// it needs through the resolver. Every fetch goes strictly up the tree (a DS signed by an ancestor, a DNSKEY by
/// its own zone), so the recursion ends at an anchor and never waits on the question being validated.
public final class DNSSECValidator: Sendable {
    struct Settings: Sendable {
        var mode: DNSSECMode
        var anchors: TrustAnchors
    }
    private let settings: Mutex<Settings>
    private let statistics: Mutex<DNSSECStatistics>
    /// allow-downgrade's verdicts for upstreams not shown capable (``verdictWithoutData(upstream:)``).
    private let downgradeVerdicts = Mutex(DowngradeVerdicts())
    private let now: @Sendable () -> Date

    public init(mode: DNSSECMode, anchors: TrustAnchors = .builtIn, now: @escaping @Sendable () -> Date = { Date() }) {
        settings = Mutex(Settings(mode: mode, anchors: anchors))
        statistics = Mutex(DNSSECStatistics(mode: mode))
        self.now = now
    }

    /// The mode in force.
    public var mode: DNSSECMode { settings.withLock { $0.mode } }
    /// Whether answers get a verdict at all.
    public var enabled: Bool { mode != .no }

    /// Whether upstream queries carry DO: `yes`, or `allow-downgrade` once the probe has shown some upstream passes
    /// DNSSEC data. Until then allow-downgrade changes nothing on the wire, so an upstream that cannot do DNSSEC
    /// never costs a name. Which answers are validated is decided per answer (``validate(_:name:type:upstream:fetcher:)``).
    public var active: Bool {
        switch mode {
        case .yes: true
        case .allowDowngrade: statistics.withLock { $0.upstreamStates.anyCapable }
        case .no: false
        }
    }
    public var anchors: TrustAnchors { settings.withLock { $0.anchors } }

    /// Reload: a new mode and anchors; what is cached keeps its verdict until it expires or is flushed.
    public func update(mode: DNSSECMode, anchors: TrustAnchors) {
        settings.withLock { $0 = Settings(mode: mode, anchors: anchors) }
        statistics.withLock { $0.mode = mode }
    }

    /// The upstreams in use (start, Reload): kept ones keep their state, new ones start unknown.
    public func configureUpstreams(_ servers: [String]) {
        statistics.withLock { $0.upstreamStates.configure(servers) }
    }

    /// One upstream's probe evidence (``UpstreamDNSSECStates/record(_:_:detail:at:)``): nil changes nothing, so
    /// one lost or odd reply never changes an upstream's state. Returns whether the state changed.
    @discardableResult
    public func recordProbe(server: String, _ evidence: DNSSECProbeEvidence?, detail: String) -> Bool {
        let now = self.now()
        return statistics.withLock { $0.upstreamStates.record(server, evidence, detail: detail, at: now) }
    }

    /// Every upstream's state.
    public var upstreamStates: UpstreamDNSSECStates { statistics.withLock { $0.upstreamStates } }

    /// The summary of the upstreams' states (``UpstreamDNSSECStates/summary``).
    public var upstreamCapability: UpstreamDNSSECCapability { upstreamStates.summary }

    public var currentStatistics: DNSSECStatistics { statistics.withLock { $0 } }

    /// Counts a verdict served (per stored answer).
    func count(_ validation: DNSSECValidation, name: String) {
        statistics.withLock {
            switch validation.state {
            case .secure: $0.secure += 1
            case .insecure, .indeterminate: $0.insecure += 1
            case .bogus:
                $0.bogus += 1
                $0.lastBogusName = name
                $0.lastBogusReason = validation.reason
            }
        }
    }

    // MARK: - Entry point

    /// The verdict that does not depend on the answer: validation off, or allow-downgrade and an upstream the probe
    /// has not shown to pass DNSSEC data. Nil when the answer itself must be validated. Synchronous, so that the
    /// resolver's miss pays no async call for it; the verdict (its reason names the upstream) is made once per
    /// upstream and state, not per answer.
    func verdictWithoutData(upstream: String?) -> DNSSECValidation? {
        switch mode {
        case .no: return Self.off
        case .yes: return nil
        case .allowDowngrade:
            let capability = statistics.withLock { $0.upstreamStates.capability(of: upstream) }
            if capability == .capable { return nil }
            let key = DowngradeKey(upstream: upstream, capability: capability)
            return downgradeVerdicts.withLock { verdicts in
                // Nearly always the same upstream as the last miss: its name is then the same string, compared
                // without hashing it.
                // (Compared in place: binding the last pair copied both its texts.)
                if verdicts.last?.key == key, let verdict = verdicts.last?.verdict { return verdict }
                let verdict =
                    verdicts.all[key]
                    ?? DNSSECValidation.insecure(
                        "allow-downgrade: upstream \(upstream ?? "?") is \(capability.rawValue) (not shown to pass DNSSEC data)")
                if verdicts.all[key] == nil {
                    if verdicts.all.count >= 64 { verdicts.all.removeAll() }
                    verdicts.all[key] = verdict
                }
                verdicts.last = (key, verdict)
                return verdict
            }
        }
    }

    private static let off = DNSSECValidation.insecure("validation is off")

    private struct DowngradeKey: Hashable {
        var upstream: String?
        var capability: UpstreamDNSSECCapability
    }

    private struct DowngradeVerdicts {
        var all: [DowngradeKey: DNSSECValidation] = [:]
        var last: (key: DowngradeKey, verdict: DNSSECValidation)?
    }

    /// The verdict for an upstream answer to (name, type).
    /// - Parameter upstream: the upstream that sent it (`QueryAttempt.server`): in allow-downgrade, only answers
    ///   from an upstream the probe showed `capable` are validated.
    func validate(
        _ answer: CacheAnswer<CachedRRset>, name: String, type: RRType, upstream: String?, fetcher: any DNSSECFetcher
    ) async -> DNSSECValidation {
        if let verdict = verdictWithoutData(upstream: upstream) { return verdict }
        let verdict: DNSSECValidation
        switch answer {
        case .positive(let rrset):
            verdict = await validatePositive(rrset, name: name, type: type, fetcher: fetcher)
        case .nxdomain(let authority):
            verdict = await validateNegative(
                authority?.authority ?? [], name: name, type: type, nameExists: false, fetcher: fetcher)
        case .nodata(let authority):
            verdict = await validateNegative(
                authority?.authority ?? [], name: name, type: type, nameExists: true, fetcher: fetcher)
        }
        return verdict
    }

    // MARK: - Positive answers

    private func validatePositive(_ rrset: CachedRRset, name: String, type: RRType, fetcher: any DNSSECFetcher) async
        -> DNSSECValidation
    {
        let signatures = rrset.records.filter { $0.type.rawValue == 46 }
        var groups: [(name: String, type: RRType, records: [ResourceRecord])] = []
        for record in rrset.records where record.type.rawValue != 46 {
            if let index = groups.firstIndex(where: { $0.name == record.name && $0.type == record.type }) {
                groups[index].records.append(record)
            } else {
                groups.append((record.name, record.type, [record]))
            }
        }
        if groups.isEmpty { return .bogus(6, "\(name): an answer without records") }
        var verdict = DNSSECValidation.secure(until: nil)
        for group in groups {
            let covering = signatures.filter { $0.name == group.name && DNSSECCrypto.typeCovered($0) == group.type }
            var one = await validateRRset(
                group.records, signatures: covering, question: (name, type), fetcher: fetcher)
            // A wildcard expansion (RRSIG labels below the owner's) is secure only with proof that the name
            // itself does not exist (RFC 4035 §5.3.4).
            if one.state == .secure, let labels = covering.compactMap(DNSSECCrypto.labelsOf).min(),
                labels < Self.labelCount(group.name)
            {
                one = await wildcardProof(
                    group.name, labels: labels, authority: rrset.authority, fetcher: fetcher, verdict: one)
            }
            verdict = verdict.combined(with: one)
            if verdict.state == .bogus { break }
        }
        return verdict
    }

    /// The labels of `name` as an RRSIG's labels field counts them (RFC 4034 §3.1.3): escapes read (`a\.b.example.`
    /// has two), a leading `*` not counted. A name that does not parse (none from the wire) counts as more than any
    /// RRSIG says, so its answer needs a wildcard proof.
    static func labelCount(_ name: String) -> Int {
        guard let labels = NSECDenial.labels(name) else { return Int.max }
        return labels.first == [UInt8(ascii: "*")] ? labels.count - 1 : labels.count
    }

    private func wildcardProof(
        _ owner: String, labels: Int, authority: [ResourceRecord], fetcher: any DNSSECFetcher,
        verdict: DNSSECValidation
    ) async -> DNSSECValidation {
        let proof = authority.filter { $0.type.rawValue == 47 || $0.type.rawValue == 50 }
        guard !proof.isEmpty else {
            return .bogus(12, "\(owner): wildcard answer without NSEC/NSEC3 proof that the name does not exist")
        }
        let signed = await validateProofRRsets(authority, fetcher: fetcher, question: (owner, RRType(0)))
        if signed.state != .secure { return signed }
        if proof.contains(where: { $0.type.rawValue == 50 && DNSSECCrypto.iterationsOf($0) > DNSSECCrypto.maximumNSEC3Iterations }) {
            return .insecure("\(owner): NSEC3 iterations above \(DNSSECCrypto.maximumNSEC3Iterations) (RFC 9276)")
        }
        guard DNSSECCrypto.provesWildcardExpansion(owner, labels: labels, proof: proof) else {
            return .bogus(12, "\(owner): no NSEC/NSEC3 proves that no closer name than the wildcard's exists")
        }
        return verdict.combined(with: signed)
    }

    /// One RRset (one owner and type) with the RRSIGs covering it.
    func validateRRset(
        _ records: [ResourceRecord], signatures: [ResourceRecord], question: (name: String, type: RRType),
        fetcher: any DNSSECFetcher
    ) async -> DNSSECValidation {
        let owner = records[0].name
        let type = records[0].type
        let anchors = self.anchors
        switch anchors.closest(owner) {
        case .none: return .insecure("\(owner): no trust anchor above it")
        case .negative(let zone): return .insecure("\(owner): negative trust anchor \(zone)")
        case .positive(let anchorZone, _):
            guard !signatures.isEmpty else {
                if let missingKeys = await primeAnchor(anchorZone, question: question, fetcher: fetcher) {
                    return missingKeys
                }
                if let insecure = await provenInsecure(
                    owner, anchorZone: anchorZone, includingSelf: type.rawValue != 43, fetcher: fetcher)
                {
                    return insecure
                }
                return .bogus(10, "\(owner) \(type): RRSIGs missing in a signed zone")
            }
            // Every signature must come from one signer at or above the owner; a DS is signed by an ancestor, a
            // DNSKEY by its own zone (which also keeps every fetch going up).
            let signers = Set(signatures.compactMap(DNSSECCrypto.signerOf))
            guard signers.count == 1, let signer = signers.first,
                ReplyScrubber.isAncestor(signer, of: owner)
            else {
                return .bogus(6, "\(owner) \(type): RRSIG signer is not the owner's zone")
            }
            if type.rawValue == 43 && signer == owner {
                return .bogus(6, "\(owner) DS: signed by the child zone, not its parent")
            }
            if type.rawValue == 48 && signer == owner {
                return await validateKeySet(records, signatures: signatures, zone: owner, fetcher: fetcher)
            }
            guard ReplyScrubber.isAncestor(anchorZone, of: signer) else {
                return .insecure("\(owner): signed by \(signer), above the trust anchor \(anchorZone)")
            }
            // The anchor's keys end every chain below it: ask for them beside the signer's (docs/DNSSEC.md,
            // "Round trips").
            if signer != anchorZone { fetcher.dnssecPrefetch(anchorZone, type: RRType(48)) }
            let keys = await trustedKeys(signer, fetcher: fetcher)
            switch keys {
            case .failure(let verdict): return verdict
            case .success(let (keyRecords, keyExpiration)):
                return Self.verdict(
                    DNSSECCrypto.verify(rrset: records, signatures: signatures, keys: keyRecords, now: now()),
                    what: "\(owner) \(type)", keyExpiration: keyExpiration)
            }
        }
    }

    static func verdict(_ check: DNSSECCrypto.SignatureCheck, what: String, keyExpiration: UInt32?) -> DNSSECValidation {
        switch check {
        case .valid(let expiration):
            return .secure(until: [expiration, keyExpiration].compactMap { $0 }.min())
        case .unsupportedAlgorithm: return .insecure("\(what): signature algorithm not supported (RFC 4035 §5.2)")
        case .expired: return .bogus(7, "\(what): signature expired")
        case .notYetValid: return .bogus(8, "\(what): signature not yet valid")
        case .bogus(let reason): return .bogus(6, "\(what): signature does not verify (\(reason))")
        }
    }

    enum KeyResult {
        case success(([ResourceRecord], UInt32?))
        case failure(DNSSECValidation)
    }

    /// The DNSKEYs of `zone` proven secure, through the cache (their entry was validated on store).
    private func trustedKeys(_ zone: String, fetcher: any DNSSECFetcher) async -> KeyResult {
        // The zone's DS (asked of its parent) proves its DNSKEYs: ask for both at once, one round trip per level
        // instead of two. An anchor's keys need no DS.
        if case .positive(let anchorZone, _) = anchors.closest(zone), anchorZone != zone {
            fetcher.dnssecPrefetch(zone, type: RRType(43))
        }
        guard let answer = await fetcher.dnssecFetch(zone, type: RRType(48)) else {
            return .failure(.unreachable("\(zone) DNSKEY"))
        }
        guard case .positive(let rrset) = answer else {
            return .failure(.bogus(9, "\(zone): DNSKEY missing"))
        }
        let validation = rrset.validation ?? .bogus(9, "\(zone): DNSKEY not validated")
        switch validation.state {
        case .secure:
            let keys = rrset.records.filter { $0.type.rawValue == 48 && $0.name == zone }
            return .success((keys, validation.expiration))
        case .insecure, .indeterminate: return .failure(validation)
        case .bogus: return .failure(validation)
        }
    }

    /// A zone's DNSKEY RRset: secure when a key matching a trusted DS (or the anchor) signs it.
    private func validateKeySet(
        _ keys: [ResourceRecord], signatures: [ResourceRecord], zone: String, fetcher: any DNSSECFetcher
    ) async -> DNSSECValidation {
        var dsRecords: [ResourceRecord]
        var dsExpiration: UInt32?
        var anchorKeys: [ResourceRecord] = []
        switch anchors.closest(zone) {
        case .none: return .insecure("\(zone): no trust anchor above it")
        case .negative(let anchor): return .insecure("\(zone): negative trust anchor \(anchor)")
        case .positive(let anchorZone, let records) where anchorZone == zone:
            dsRecords = records.filter { $0.type.rawValue == 43 }
            anchorKeys = records.filter { $0.type.rawValue == 48 }
        case .positive:
            guard let answer = await fetcher.dnssecFetch(zone, type: RRType(43)) else {
                return .unreachable("\(zone) DS")
            }
            switch answer {
            case .positive(let rrset):
                let validation = rrset.validation ?? .bogus(6, "\(zone) DS: not validated")
                guard validation.state == .secure else { return validation }
                dsRecords = rrset.records.filter { $0.type.rawValue == 43 && $0.name == zone }
                dsExpiration = validation.expiration
            case .nodata(let payload), .nxdomain(let payload):
                let validation = payload?.validation ?? .bogus(6, "\(zone) DS: denial not validated")
                if validation.state == .secure { return .insecure("\(zone): insecure delegation (no DS)") }
                return validation
            }
        }
        let usableDS = dsRecords.filter { DNSSECCrypto.dsMatches($0, key: $0) != nil }
        if usableDS.isEmpty && anchorKeys.isEmpty {
            return .insecure("\(zone): no DS with a supported algorithm and digest (RFC 4035 §5.2)")
        }
        let matched = keys.filter { key in
            usableDS.contains { DNSSECCrypto.dsMatches($0, key: key) == true }
                || anchorKeys.contains { $0.rdata == key.rdata }
        }
        if matched.isEmpty { return .bogus(9, "\(zone): no DNSKEY matches its DS") }
        let check = DNSSECCrypto.verify(rrset: keys, signatures: signatures, keys: matched, now: now())
        return Self.verdict(check, what: "\(zone) DNSKEY", keyExpiration: dsExpiration)
    }

    // MARK: - Negative answers

    private func validateNegative(
        _ authority: [ResourceRecord], name: String, type: RRType, nameExists: Bool, fetcher: any DNSSECFetcher
    ) async -> DNSSECValidation {
        let anchorZone: String
        switch anchors.closest(name) {
        case .none: return .insecure("\(name): no trust anchor above it")
        case .negative(let zone): return .insecure("\(name): negative trust anchor \(zone)")
        case .positive(let zone, _): anchorZone = zone
        }
        let proof = authority.filter { $0.type.rawValue == 47 || $0.type.rawValue == 50 }
        if proof.isEmpty {
            if let missingKeys = await primeAnchor(anchorZone, question: (name, type), fetcher: fetcher) {
                return missingKeys
            }
            if let insecure = await provenInsecure(
                name, anchorZone: anchorZone, includingSelf: type.rawValue != 43, fetcher: fetcher)
            {
                return insecure
            }
            return .bogus(12, "\(name) \(type): NSEC/NSEC3 missing for a denial in a signed zone")
        }
        let signed = await validateProofRRsets(authority, fetcher: fetcher, question: (name, type))
        if signed.state != .secure { return signed }
        switch DNSSECCrypto.denial(
            name: name, type: type, nameExists: nameExists, proof: proof,
            signatures: authority.filter { $0.type.rawValue == 46 })
        {
        case .proven: return signed
        case .tooManyIterations:
            return .insecure("\(name): NSEC3 iterations above \(DNSSECCrypto.maximumNSEC3Iterations) (RFC 9276)")
        case .notProven(let reason):
            return .bogus(12, "\(name) \(type): the NSEC/NSEC3 records do not prove the denial (\(reason))")
        }
    }

    /// The NSEC/NSEC3 RRsets of an authority section, each checked against its signatures. A proof for a DS
    /// question must be signed above the DS's owner (the parent side), which also keeps every fetch going up.
    private func validateProofRRsets(
        _ authority: [ResourceRecord], fetcher: any DNSSECFetcher, question: (name: String, type: RRType)
    ) async -> DNSSECValidation {
        let signatures = authority.filter { $0.type.rawValue == 46 }
        var verdict = DNSSECValidation.secure(until: nil)
        for record in authority where record.type.rawValue == 47 || record.type.rawValue == 50 {
            let covering = signatures.filter { $0.name == record.name && DNSSECCrypto.typeCovered($0) == record.type }
            if question.type.rawValue == 43,
                covering.compactMap(DNSSECCrypto.signerOf).contains(where: { $0 == question.name })
            {
                return .bogus(6, "\(question.name) DS: denial signed by the child zone, not its parent")
            }
            if covering.isEmpty { return .bogus(10, "\(record.name) \(record.type): RRSIG missing on a proof") }
            let one = await validateRRset([record], signatures: covering, question: question, fetcher: fetcher)
            verdict = verdict.combined(with: one)
            if verdict.state != .secure { return verdict }
        }
        return verdict
    }

    // MARK: - Insecure delegations

    /// Unsigned data under a positive anchor: first the anchor's own keys, as a validator primes them (an upstream
    /// that strips DNSKEY too is EDE 9, DNSKEY Missing). Nil when they are there. Not for the anchor's DNSKEY
    /// question itself, which is what would be fetched.
    private func primeAnchor(
        _ anchorZone: String, question: (name: String, type: RRType), fetcher: any DNSSECFetcher
    ) async -> DNSSECValidation? {
        if question.name == anchorZone && question.type.rawValue == 48 { return nil }
        if case .failure(let verdict) = await trustedKeys(anchorZone, fetcher: fetcher), verdict.state == .bogus {
            return verdict
        }
        return nil
    }

    /// Proof that `name` lies below an insecure delegation: DS asked top-down from the anchor; a signed denial of
    /// DS at a delegation (NS in the bitmap, no DS, no SOA) or an opt-out NSEC3 proves it. Nil when the signed
    /// chain reaches the name (then unsigned data there is bogus); a bogus step is returned as it is.
    private func provenInsecure(
        _ name: String, anchorZone: String, includingSelf: Bool, fetcher: any DNSSECFetcher
    ) async -> DNSSECValidation? {
        // By labels, escapes read (a split of the text at its dots would ask for DS at names that are not zones).
        guard let labels = NSECDenial.labels(name), let anchorCount = NSECDenial.labels(anchorZone)?.count else {
            return nil
        }
        let last = includingSelf ? labels.count : labels.count - 1
        guard last > anchorCount else { return nil }
        for count in (anchorCount + 1)...last {
            let zone = DNSName(validatedLabels: Array(labels.suffix(count))).text
            guard let answer = await fetcher.dnssecFetch(zone, type: RRType(43)) else {
                return .unreachable("\(zone) DS")
            }
            switch answer {
            // A DS step that is bogus proves nothing: the unsigned data stays unproven (the caller's EDE 10 or
            // 12 says what is missing where it was asked); insecure above means insecure here.
            case .positive(let rrset):
                guard let validation = rrset.validation, validation.state == .secure else {
                    return Self.stepVerdict(rrset.validation)
                }
            case .nxdomain(let payload):
                let validation = payload?.validation
                if validation?.state != .secure { return Self.stepVerdict(validation) }
                return nil
            case .nodata(let payload):
                let validation = payload?.validation
                if validation?.state != .secure { return Self.stepVerdict(validation) }
                if Self.isInsecureDelegation(zone, proof: payload?.authority ?? []) {
                    return .insecure("\(zone): insecure delegation (no DS, proven by NSEC/NSEC3)")
                }
            }
        }
        return nil
    }

    /// What a DS step that is not secure means for the proof: insecure stays insecure, bogus proves nothing.
    static func stepVerdict(_ validation: DNSSECValidation?) -> DNSSECValidation? {
        guard let validation else { return nil }
        switch validation.state {
        case .insecure, .indeterminate: return validation
        case .secure, .bogus: return nil
        }
    }

    /// Whether a proven DS denial at `zone` shows a delegation: NS without DS and SOA at the name (NSEC or a
    /// matching NSEC3), or an opt-out NSEC3 covering it (RFC 5155 §8.9).
    static func isInsecureDelegation(_ zone: String, proof: [ResourceRecord]) -> Bool {
        if let nsec = proof.first(where: { $0.type.rawValue == 47 && $0.name == zone }),
            let types = DNSSECCrypto.nsecTypes(nsec)
        {
            return types.contains(2) && !types.contains(43) && !types.contains(6)
        }
        let nsec3 = proof.filter { $0.type.rawValue == 50 }
        if nsec3.isEmpty { return false }
        // matchingNSEC3 reads only the usable records itself (DNSSECCrypto.usableNSEC3).
        if let match = DNSSECCrypto.matchingNSEC3(zone, in: nsec3), let (types, _) = DNSSECCrypto.nsec3Types(match) {
            return types.contains(2) && !types.contains(43) && !types.contains(6)
        }
        // No matching NSEC3: a covering opt-out one says the delegation may be unsigned.
        return DNSSECCrypto.usableNSEC3(nsec3).contains { DNSSECCrypto.nsec3Types($0)?.optOut == true }
    }
}
