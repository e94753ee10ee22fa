import CAvahi
import DNSSDModel

/// Owns one Avahi object (a browser, a resolver, an entry group) of the client and the callback box it was given as
/// userdata: every kind of Avahi object the module uses is this one class.
///
/// Generic over the event its callback reports; a typed initializer per kind of object (`ServiceBrowserHandle`,
/// `ServiceResolverHandle`, `ServiceTypeBrowserHandle`, `DomainBrowserHandle`, `RecordBrowserHandle`,
/// `EntryGroupHandle`) supplies the create and free functions; operations on the object borrow its pointer with
/// ``withPointer(_:)``. Created and closed with the poll lock held; `deinit` closes (taking the
/// lock) as a safety net. Owners that outlive the client connection must close it when the client reports the loss
/// (`AvahiClientHandle.addLossObserver`), before `avahi_client_free` frees the object itself.
final class AvahiObjectHandle<Event> {
    private let client: AvahiClientHandle
    private let counter: WritableKeyPath<AvahiObjectCounts, Int>
    private let free: (OpaquePointer) -> Void
    private var pointer: OpaquePointer?
    // Retained while the Avahi object exists; released in `close` after the free (lock held).
    private var box: Unmanaged<CallbackBox<Event>>?

    /// Creates the object. Lock held.
    /// - Parameters:
    ///   - counter: the field of `AvahiObjectCounts` that counts objects of this kind.
    ///   - what: what is being done, for the error message (`"browse records of x.local"`).
    ///   - needsRunningDaemon: create only while avahi-daemon is running (entry groups), not merely connected.
    ///   - create: calls `avahi_*_new` with the connected client and the userdata to give it.
    ///   - free: calls `avahi_*_free`.
    ///   - handler: runs for every callback, lock held; for an entry group possibly before this returns.
    /// - Throws: `avahiUnavailable` if the client is not connected, else the Avahi error as `DNSSDError`.
    init(
        client: AvahiClientHandle,
        counter: WritableKeyPath<AvahiObjectCounts, Int>,
        what: String,
        needsRunningDaemon: Bool = false,
        create: (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?,
        free: @escaping (OpaquePointer) -> Void,
        handler: @escaping (Event) -> Void
    ) throws(DNSSDError) {
        self.client = client
        self.counter = counter
        self.free = free
        let avahiClient = try needsRunningDaemon ? client.runningClient() : client.connectedClient()
        let box = Unmanaged.passRetained(CallbackBox<Event>(poll: client.poll, handler: handler))
        guard let pointer = create(avahiClient, box.toOpaque()) else {
            box.release()
            throw DNSSDError.fromAvahi(avahi_client_errno(avahiClient), "cannot \(what)")
                ?? DNSSDError(.avahiFailure, "cannot \(what)")
        }
        self.pointer = pointer
        self.box = box
        client.counts[keyPath: counter] += 1
    }

    /// Lends the object's pointer to `body`. Lock held.
    /// - Throws: `avahiUnavailable` when the object is closed, or what `body` throws.
    func withPointer<Result>(_ body: (OpaquePointer) throws(DNSSDError) -> Result) throws(DNSSDError) -> Result {
        guard let pointer = self.pointer else { throw DNSSDError(.avahiUnavailable, "the Avahi object is closed") }
        return try body(pointer)
    }

    /// Frees the object; no callback runs afterwards. Idempotent.
    func close() {
        self.client.poll.withLocked {
            guard let pointer = self.pointer else { return }
            self.pointer = nil
            self.free(pointer)
            self.box?.release()
            self.box = nil
            self.client.counts[keyPath: self.counter] -= 1
        }
    }

    deinit {
        self.close()
    }
}
