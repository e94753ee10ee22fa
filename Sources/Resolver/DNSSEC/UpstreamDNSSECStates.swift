import DNSCore
import Foundation

/// allow-downgrade's evidence about one upstream, from one probe reply (docs/DNSSEC.md, "Modes and
/// allow-downgrade"). The probe asks each upstream on its own for the DNSKEY RRset of every positive anchor's zone,
/// with DO.
public enum DNSSECProbeEvidence: String, Sendable, Hashable {
    /// NOERROR with DNSKEY records and RRSIGs over them: the upstream passes DNSSEC data.
    case signed
    /// NOERROR without them (keys without RRSIGs, or no keys where the anchor says there are some): the upstream
    /// strips DNSSEC data.
    case stripped

    /// What one probe reply shows: nil for no reply, and for a reply that shows nothing (SERVFAIL, REFUSED, any
    /// other error code). A timeout, a dropped reply or garbage never reaches here as a message (the transport
    /// drops what does not match the query), so it is nil too.
    public static func of(_ reply: DNSMessage?) -> DNSSECProbeEvidence? {
        guard let reply, reply.rcode == .noError else { return nil }
        let answer = reply.answer
        if answer.contains(where: { $0.type.rawValue == 46 }) && answer.contains(where: { $0.type.rawValue == 48 }) {
            return .signed
        }
        return .stripped
    }

    /// One upstream's evidence over the probe's questions (one per anchor zone): signed keys from any zone show
    /// the upstream passes DNSSEC data; otherwise a stripped reply shows it strips it; otherwise nothing is shown.
    public static func combined(_ replies: [DNSSECProbeEvidence?]) -> DNSSECProbeEvidence? {
        if replies.contains(.signed) { return .signed }
        if replies.contains(.stripped) { return .stripped }
        return nil
    }
}

/// The DNSSEC state of each upstream (allow-downgrade), decided only from probe evidence: pure, so the rule is
/// tested on its own (Tests/ResolverTests/UpstreamDNSSECStatesTests.swift).
///
/// The rule: an upstream starts `unknown`; a probe reply with signed keys makes it `capable`, one without makes it
/// `incapable`; a probe without a usable reply (timeout, SERVFAIL, REFUSED, garbage) changes nothing, and
/// ordinary queries never change anything. A reconfiguration keeps the state of every upstream it keeps (until a
/// new probe reply says otherwise), starts new ones `unknown` and forgets removed ones. An answer is validated
/// only when the upstream that sent it is `capable`.
public struct UpstreamDNSSECStates: Sendable, Equatable {
    /// One upstream's state and what showed it.
    public struct Entry: Sendable, Equatable {
        /// As `QueryAttempt.server` names it (`UpstreamServer.description`).
        public var server: String
        public var capability: UpstreamDNSSECCapability
        /// The probe reply that decided it, for people (`Status`); nil while unknown.
        public var evidence: String?
        /// When it was decided.
        public var since: Date?
    }

    /// In the transport's order.
    public private(set) var entries: [Entry] = []

    public init() {}

    /// The upstreams in use now: kept ones keep their state, new ones start unknown, removed ones are forgotten.
    public mutating func configure(_ servers: [String]) {
        entries = servers.map { server in
            entries.first { $0.server == server } ?? Entry(server: server, capability: .unknown)
        }
    }

    /// Records one upstream's probe evidence; nil evidence changes nothing. An upstream not configured yet (a
    /// transport that cannot list its upstreams) is added. Returns whether its state changed.
    @discardableResult
    public mutating func record(_ server: String, _ evidence: DNSSECProbeEvidence?, detail: String, at now: Date)
        -> Bool
    {
        guard let evidence else { return false }
        let capability: UpstreamDNSSECCapability = evidence == .signed ? .capable : .incapable
        guard let index = entries.firstIndex(where: { $0.server == server }) else {
            entries.append(Entry(server: server, capability: capability, evidence: detail, since: now))
            return true
        }
        let changed = entries[index].capability != capability
        entries[index].evidence = detail
        if changed {
            entries[index].capability = capability
            entries[index].since = now
        }
        return changed
    }

    /// The state of the upstream that sent an answer; `unknown` for one the probe has not shown anything about.
    public func capability(of server: String?) -> UpstreamDNSSECCapability {
        guard let server else { return .unknown }
        return entries.first { $0.server == server }?.capability ?? .unknown
    }

    /// Whether any upstream is capable: in allow-downgrade, upstream queries then carry DO.
    public var anyCapable: Bool { entries.contains { $0.capability == .capable } }

    /// Upstreams whose state is still unknown (the probe asks them again, with back-off).
    public var unknown: [String] { entries.filter { $0.capability == .unknown }.map(\.server) }

    /// One word for all of them: the common state when they agree (`unknown` when there are none), else `mixed`.
    public var summary: UpstreamDNSSECCapability {
        guard let first = entries.first?.capability else { return .unknown }
        return entries.allSatisfy { $0.capability == first } ? first : .mixed
    }
}
