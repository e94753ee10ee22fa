import CAvahi
import DNSSDModel

/// One service browser callback.
struct ServiceBrowserEvent {
    var interface: Int32
    var proto: Int32
    var kind: BrowserCallbackKind
    var name: String
    var type: String
    var domain: String
}

/// Owns one `AvahiServiceBrowser`.
typealias ServiceBrowserHandle = AvahiObjectHandle<ServiceBrowserEvent>

extension AvahiObjectHandle where Event == ServiceBrowserEvent {
    /// Creates the browser. Lock held.
    /// - Throws: the Avahi error as `DNSSDError`.
    convenience init(
        client: AvahiClientHandle,
        interface: Int32,
        type: String,
        domain: String?,
        handler: @escaping (ServiceBrowserEvent) -> Void
    ) throws(DNSSDError) {
        try self.init(
            client: client,
            counter: \.serviceBrowsers,
            what: "browse \(type)",
            create: { avahiClient, userdata in
                avahi_service_browser_new(
                    avahiClient,
                    interface,
                    AvahiConversions.protocolUnspecified,
                    type,
                    domain,
                    AvahiLookupFlags(0),
                    { browser, interface, proto, event, name, type, domain, _, userdata in
                        guard let box = CallbackBox<ServiceBrowserEvent>.fromCallback(userdata) else { return }
                        let kind = BrowserCallbackKind(
                            event,
                            client: browser.flatMap { avahi_service_browser_get_client($0) },
                            what: "service browser"
                        )
                        box.handler(
                            ServiceBrowserEvent(
                                interface: interface,
                                proto: proto,
                                kind: kind,
                                name: AvahiConversions.string(name),
                                type: AvahiConversions.string(type),
                                domain: AvahiConversions.string(domain)
                            )
                        )
                    },
                    userdata
                )
            },
            free: { _ = avahi_service_browser_free($0) },
            handler: handler
        )
    }
}
