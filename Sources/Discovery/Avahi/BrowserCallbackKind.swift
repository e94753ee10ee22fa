import CAvahi
import DNSSDModel

/// The kind of a browser callback (`AvahiBrowserEvent`), with the error for a failure.
enum BrowserCallbackKind {
    case new
    case remove
    case cacheExhausted
    case allForNow
    case failure(DNSSDError)

    /// Converts Avahi's event; `client` gives the error for `AVAHI_BROWSER_FAILURE`. Called with the lock held.
    init(_ event: AvahiBrowserEvent, client: OpaquePointer?, what: String) {
        switch event {
        case AVAHI_BROWSER_NEW: self = .new
        case AVAHI_BROWSER_REMOVE: self = .remove
        case AVAHI_BROWSER_CACHE_EXHAUSTED: self = .cacheExhausted
        case AVAHI_BROWSER_ALL_FOR_NOW: self = .allForNow
        default:
            let rc = client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)
            self = .failure(
                DNSSDError.fromAvahi(rc < 0 ? rc : Int32(AVAHI_ERR_FAILURE), "\(what) failed")
                    ?? DNSSDError(.avahiFailure, "\(what) failed")
            )
        }
    }
}
