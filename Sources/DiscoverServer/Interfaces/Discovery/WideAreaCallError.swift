import DNSSDModel
import DiscoverAPI
import WideAreaDiscovery

/// A ``WideAreaError`` together with the subject of its call, as the varlink error of docs/API.md.
///
/// io.discoverd.Discovery has no error for a DNS server that failed: those are answered with the Resolver
/// interface's `UpstreamFailure {rcode}`, which names the rcode (REFUSED, NOTAUTH, BADSIG).
struct WideAreaCallError: VarlinkErrorConvertible {
    var error: WideAreaError
    var subject: DiscoverySubject

    var varlinkError: VarlinkError {
        switch error.code {
        case .notFound: return .notFound(subject.name)
        case .timeout: return .discoveryTimeout
        case .nameConflict: return .nameConflict(subject.name)
        case .lookupFailed, .updateRejected: return .upstreamFailure(rcode: error.rcode ?? "SERVFAIL")
        case .badReplySignature: return .upstreamFailure(rcode: error.rcode ?? "BADSIG")
        case .noKey: return .invalidParameter("domain")
        case .noUpdateServer: return .notFound(subject.name)
        case .invalidParameter: return .invalidParameter(subject.parameter)
        default:
            // Never passed off as another error (WideAreaWireTests checks every code of `Code.allCases`).
            return .internalError(reason: "wide-area error \(error.code) has no varlink error: \(error)")
        }
    }
}
