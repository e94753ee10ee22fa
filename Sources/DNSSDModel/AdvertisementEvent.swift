/// An event of an advertisement.
public enum AdvertisementEvent: Hashable, Sendable {
    /// The service is published under `name` (the final name after any collision renames). Sent once.
    case registered(name: String)
    /// A later collision (or re-registration after an avahi-daemon restart) changed the name.
    case renamed(name: String)
    /// The registration failed for good; the stream ends after this event.
    case failed(DNSSDError)
}
