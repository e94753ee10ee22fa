import DNSCore
import Foundation
import Synchronization

/// The four states of a validated answer (mDNSResponder's and RFC 4033 §5's names).
public enum DNSSECState: String, Sendable, Codable, Hashable, CaseIterable {
    /// Proven from a trust anchor; signatures valid now.
    case secure
    /// Proven unsigned (insecure delegation, negative anchor, unsupported algorithm, no anchor above), or not
    /// validated (`dnssec = no`, a downgraded upstream).
    case insecure
    /// Secure data served from expired cache: not proven now.
    case indeterminate
    /// The proof failed.
    case bogus

    /// How weak a state is: a walk over several entries has the weakest of their states.
    var weakness: Int {
        switch self {
        case .secure: 0
        case .insecure: 1
        case .indeterminate: 2
        case .bogus: 3
        }
    }

    /// The weaker of two states.
    public func combined(with other: DNSSECState) -> DNSSECState { other.weakness > weakness ? other : self }
}

/// `[resolver] dnssec`: resolved's names and meanings.
public enum DNSSECMode: String, Sendable, CaseIterable {
    case yes
    case allowDowngrade = "allow-downgrade"
    case no
}

/// The verdict kept with a cache entry: computed once when the entry is stored.
public struct DNSSECValidation: Sendable, Codable, Hashable {
    public var state: DNSSECState
    /// RFC 8914 code for a bogus verdict: 6 DNSSEC Bogus, 7 Signature Expired, 8 Signature Not Yet Valid,
    /// 9 DNSKEY Missing, 10 RRSIGs Missing, 12 NSEC Missing.
    public var ede: UInt16?
    /// Why, for people (EDE text, Status, logs); names the name that failed.
    public var reason: String?
    /// The earliest expiration (seconds since the epoch) of the signatures that proved a secure answer: it is
    /// never served past this, stale or not.
    public var expiration: UInt32?

    public init(state: DNSSECState, ede: UInt16? = nil, reason: String? = nil, expiration: UInt32? = nil) {
        self.state = state
        self.ede = ede
        self.reason = reason
        self.expiration = expiration
    }

    public static func secure(until expiration: UInt32?) -> DNSSECValidation {
        DNSSECValidation(state: .secure, expiration: expiration)
    }
    public static func insecure(_ reason: String) -> DNSSECValidation { DNSSECValidation(state: .insecure, reason: reason) }
    public static func bogus(_ ede: UInt16, _ reason: String) -> DNSSECValidation {
        DNSSECValidation(state: .bogus, ede: ede, reason: reason)
    }

    /// A DS or DNSKEY the proof needs got no answer: not a verdict on the data, so it is not cached; the question
    /// fails as a timeout would (EDE 22, No Reachable Authority).
    public static func unreachable(_ what: String) -> DNSSECValidation {
        .bogus(22, "\(what) could not be fetched to validate the answer")
    }

    /// Whether this is ``unreachable(_:)``: the question fails, nothing is cached.
    public var isUnreachable: Bool { state == .bogus && ede == 22 }

    /// The weaker verdict; for two secure ones the earlier expiration.
    func combined(with other: DNSSECValidation) -> DNSSECValidation {
        if state == .secure && other.state == .secure {
            let earliest = [expiration, other.expiration].compactMap { $0 }.min()
            return .secure(until: earliest)
        }
        return other.state.weakness > state.weakness ? other : self
    }
}

/// Whether an upstream passes DNSSEC data, from the probe only (``UpstreamDNSSECStates``).
public enum UpstreamDNSSECCapability: String, Sendable {
    /// No probe reply has shown anything yet.
    case unknown
    /// The probe's reply carried RRSIGs.
    case capable
    /// The probe's reply arrived without RRSIGs: in allow-downgrade, its answers are not validated.
    case incapable
    /// Only as the summary of several upstreams: they are not all in the same state.
    case mixed
}

/// Counters for Status.
public struct DNSSECStatistics: Sendable {
    public var mode: DNSSECMode
    /// The summary of ``upstreamStates``.
    public var upstreams: UpstreamDNSSECCapability { upstreamStates.summary }
    /// Each upstream's state.
    public var upstreamStates = UpstreamDNSSECStates()
    public var secure: UInt64 = 0
    public var insecure: UInt64 = 0
    public var bogus: UInt64 = 0
    public var lastBogusName: String?
    public var lastBogusReason: String?
}
