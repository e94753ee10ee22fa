/// An event of a browse stream.
public enum BrowseEvent: Hashable, Sendable {
    /// A service instance appeared (first sighting on any interface/protocol).
    case added(DNSSDService)
    /// A service instance disappeared from every interface/protocol, or Avahi went away.
    case removed(DNSSDService)
    /// The interfaces, addresses or TXT record of a known instance changed.
    case changed(DNSSDService)
    /// Avahi has reported everything it currently knows; more events may follow.
    case allForNow
}
