import DNSSDModel
import DiscoverAPI
import Discovery
import WideAreaDiscovery

// Discovery's domain types as the wire types of io.discoverd.Discovery (docs/API.md), and its errors as the interface's
// varlink errors. This is the only place either mapping is written.

/// What a Discovery call was about: the wire errors name it, the domain errors do not carry it.
struct DiscoverySubject: Sendable {
    var type: String = ""
    var name: String = ""
    /// The parameter an `invalidParameter` error is about.
    var parameter: String = "parameters"

    /// Runs `body`, tagging a ``DNSSDError`` it throws with this subject.
    func mapErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DNSSDError {
            throw DiscoveryCallError(error: error, subject: self)
        } catch let error as WideAreaError {
            throw WideAreaCallError(error: error, subject: self)
        }
    }
}

/// A ``DNSSDError`` together with the subject of its call: enough to build the varlink error of docs/API.md.
struct DiscoveryCallError: VarlinkErrorConvertible {
    var error: DNSSDError
    var subject: DiscoverySubject

    var varlinkError: VarlinkError {
        switch error.code {
        case .invalidServiceType: return .invalidServiceType(subject.type, reason: error.message)
        case .invalidName: return .invalidServiceName(subject.name, reason: error.message)
        case .notFound: return .notFound(subject.name)
        case .timeout: return .discoveryTimeout
        case .avahiUnavailable: return .avahiUnavailable
        // Avahi refused for a reason no other code describes: for the client the effect is the same.
        case .avahiFailure: return .avahiUnavailable
        case .nameConflict: return .nameConflict(subject.name)
        case .invalidParameter: return .invalidParameter(subject.parameter)
        case .subscriberTooSlow: return .subscriberTooSlow
        default:
            // `Code` is extensible; a code added without a wire error here is reported as what it is, never passed
            // off as another error (DiscoveryAdapterTests checks every code of `Code.allCases`).
            return .internalError(reason: "discovery error \(error.code) has no varlink error: \(error)")
        }
    }
}

extension DNSSDService {
    /// Identifies an instance in a one-shot browse's result.
    var key: String { "\(name)\u{0}\(type)\u{0}\(domain)" }
}

extension BrowseEvent {
    var wire: BrowseReply {
        switch self {
        case .added(let service): BrowseReply(event: .added, service: service)
        case .removed(let service): BrowseReply(event: .removed, service: service)
        case .changed(let service): BrowseReply(event: .changed, service: service)
        case .allForNow: BrowseReply(event: .allForNow)
        }
    }
}

extension Discovery.AvahiState {
    /// The state as `Status` reports it.
    public var wire: DiscoverAPI.AvahiState {
        switch self {
        case .running: .running
        case .connecting: .connecting
        case .unavailable: .unavailable
        }
    }
}
