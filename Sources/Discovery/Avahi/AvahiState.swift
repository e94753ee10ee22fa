/// The state of the connection to avahi-daemon.
public enum AvahiState: String, Hashable, Sendable {
    /// Connected; avahi-daemon is up and its host name is established.
    case running
    /// Waiting for avahi-daemon to appear on the system bus, or for it to establish its host name.
    case connecting
    /// The system bus cannot be reached or the client failed; a new attempt is scheduled.
    case unavailable
}
