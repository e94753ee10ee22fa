import CAvahi
import DNSSDModel

/// Owns one `AvahiServiceBrowser`.
///
/// Created and closed with the poll lock held; `deinit` closes (taking the lock) as a safety net.
final class ServiceBrowserHandle {
    /// One browser callback.
    struct Event {
        var interface: Int32
        var proto: Int32
        var kind: BrowserCallbackKind
        var name: String
        var type: String
        var domain: String
    }

    private let client: AvahiClientHandle
    private var pointer: OpaquePointer?
    // Retained while the Avahi object exists; released in `close` after avahi_service_browser_free (lock held).
    private var box: Unmanaged<CallbackBox<Event>>?

    /// Creates the browser. Lock held.
    /// - Throws: the Avahi error as `DNSSDError`.
    init(
        client: AvahiClientHandle,
        interface: Int32,
        type: String,
        domain: String?,
        handler: @escaping (Event) -> Void
    ) throws(DNSSDError) {
        self.client = client
        let avahiClient = try client.connectedClient()
        let box = Unmanaged.passRetained(CallbackBox<Event>(poll: client.poll, handler: handler))
        let pointer = avahi_service_browser_new(
            avahiClient,
            interface,
            AvahiConversions.protocolUnspecified,
            type,
            domain,
            AvahiLookupFlags(0),
            { browser, interface, proto, event, name, type, domain, _, userdata in
                guard let box = CallbackBox<Event>.fromCallback(userdata) else { return }
                let kind = BrowserCallbackKind(
                    event,
                    client: browser.flatMap { avahi_service_browser_get_client($0) },
                    what: "service browser"
                )
                box.handler(
                    Event(
                        interface: interface,
                        proto: proto,
                        kind: kind,
                        name: AvahiConversions.string(name),
                        type: AvahiConversions.string(type),
                        domain: AvahiConversions.string(domain)
                    )
                )
            },
            box.toOpaque()
        )
        guard let pointer else {
            box.release()
            throw DNSSDError.fromAvahi(avahi_client_errno(avahiClient), "cannot browse \(type)")
                ?? DNSSDError(.avahiFailure, "cannot browse \(type)")
        }
        self.pointer = pointer
        self.box = box
        client.counts.serviceBrowsers += 1
    }

    /// Frees the browser; no callback runs afterwards. Idempotent.
    func close() {
        self.client.poll.withLocked {
            guard let pointer = self.pointer else { return }
            self.pointer = nil
            avahi_service_browser_free(pointer)
            self.box?.release()
            self.box = nil
            self.client.counts.serviceBrowsers -= 1
        }
    }

    deinit {
        self.close()
    }
}
