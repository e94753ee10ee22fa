/// A registration made by advertising a service: on the link through Avahi (`Discovery.Advertisement`) or in a
/// unicast domain by DNS UPDATE (`WideAreaDiscovery.WideAreaRegistration`). Callers treat both alike.
public protocol ServiceRegistration: AnyObject, Sendable {
    /// The id the API reports and `Withdraw` takes.
    var registrationID: String { get }
    /// `registered` first, then `renamed` or `failed`; ends when withdrawn. Meant for one consumer.
    var events: AsyncStream<AdvertisementEvent> { get }
    /// Replaces the TXT record; a `nil` value is a boolean attribute (`key` without `=`, RFC 6763 §6.4).
    func updateTXT(_ txt: [String: String?]) throws
    /// Withdraws the registration and ends `events`. Idempotent.
    func withdraw()
}
