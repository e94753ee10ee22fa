import CAvahi
import DNSSDModel

/// Owns one `AvahiServiceTypeBrowser` (used by one-shot `browseTypes`).
///
/// Created and closed with the poll lock held; `deinit` closes (taking the lock) as a safety net.
final class ServiceTypeBrowserHandle {
    /// One callback: a service type seen or gone in a domain.
    struct Event {
        var kind: BrowserCallbackKind
        var type: String
        var domain: String
    }

    private let client: AvahiClientHandle
    private var pointer: OpaquePointer?
    // Retained while the Avahi object exists; released in `close` after the free (lock held).
    private var box: Unmanaged<CallbackBox<Event>>?

    init(client: AvahiClientHandle, domain: String?, handler: @escaping (Event) -> Void) throws(DNSSDError) {
        self.client = client
        let avahiClient = try client.connectedClient()
        let box = Unmanaged.passRetained(CallbackBox<Event>(poll: client.poll, handler: handler))
        let pointer = avahi_service_type_browser_new(
            avahiClient,
            AvahiConversions.interfaceUnspecified,
            AvahiConversions.protocolUnspecified,
            domain,
            AvahiLookupFlags(0),
            { browser, _, _, event, type, domain, _, userdata in
                guard let box = CallbackBox<Event>.fromCallback(userdata) else { return }
                let kind = BrowserCallbackKind(
                    event,
                    client: browser.flatMap { avahi_service_type_browser_get_client($0) },
                    what: "service type browser"
                )
                box.handler(
                    Event(kind: kind, type: AvahiConversions.string(type), domain: AvahiConversions.string(domain))
                )
            },
            box.toOpaque()
        )
        guard let pointer else {
            box.release()
            throw DNSSDError.fromAvahi(avahi_client_errno(avahiClient), "cannot browse service types")
                ?? DNSSDError(.avahiFailure, "cannot browse service types")
        }
        self.pointer = pointer
        self.box = box
        client.counts.otherBrowsers += 1
    }

    /// Frees the browser. Idempotent.
    func close() {
        self.client.poll.withLocked {
            guard let pointer = self.pointer else { return }
            self.pointer = nil
            avahi_service_type_browser_free(pointer)
            self.box?.release()
            self.box = nil
            self.client.counts.otherBrowsers -= 1
        }
    }

    deinit {
        self.close()
    }
}

/// Owns one `AvahiDomainBrowser` for browse domains (`AVAHI_DOMAIN_BROWSER_BROWSE`).
///
/// Created and closed with the poll lock held; `deinit` closes (taking the lock) as a safety net.
final class DomainBrowserHandle {
    /// One callback: a browse domain seen or gone.
    struct Event {
        var kind: BrowserCallbackKind
        var domain: String
    }

    private let client: AvahiClientHandle
    private var pointer: OpaquePointer?
    // Retained while the Avahi object exists; released in `close` after the free (lock held).
    private var box: Unmanaged<CallbackBox<Event>>?

    init(client: AvahiClientHandle, handler: @escaping (Event) -> Void) throws(DNSSDError) {
        self.client = client
        let avahiClient = try client.connectedClient()
        let box = Unmanaged.passRetained(CallbackBox<Event>(poll: client.poll, handler: handler))
        let pointer = avahi_domain_browser_new(
            avahiClient,
            AvahiConversions.interfaceUnspecified,
            AvahiConversions.protocolUnspecified,
            nil,
            AVAHI_DOMAIN_BROWSER_BROWSE,
            AvahiLookupFlags(0),
            { browser, _, _, event, domain, _, userdata in
                guard let box = CallbackBox<Event>.fromCallback(userdata) else { return }
                let kind = BrowserCallbackKind(
                    event,
                    client: browser.flatMap { avahi_domain_browser_get_client($0) },
                    what: "domain browser"
                )
                box.handler(Event(kind: kind, domain: AvahiConversions.string(domain)))
            },
            box.toOpaque()
        )
        guard let pointer else {
            box.release()
            throw DNSSDError.fromAvahi(avahi_client_errno(avahiClient), "cannot browse domains")
                ?? DNSSDError(.avahiFailure, "cannot browse domains")
        }
        self.pointer = pointer
        self.box = box
        client.counts.otherBrowsers += 1
    }

    /// Frees the browser. Idempotent.
    func close() {
        self.client.poll.withLocked {
            guard let pointer = self.pointer else { return }
            self.pointer = nil
            avahi_domain_browser_free(pointer)
            self.box?.release()
            self.box = nil
            self.client.counts.otherBrowsers -= 1
        }
    }

    deinit {
        self.close()
    }
}
