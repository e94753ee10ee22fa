import CAvahi
import DNSSDModel

/// One service type browser callback: a service type seen or gone in a domain.
struct ServiceTypeBrowserEvent {
    var kind: BrowserCallbackKind
    var type: String
    var domain: String
}

/// Owns one `AvahiServiceTypeBrowser` (used by one-shot `browseTypes`).
typealias ServiceTypeBrowserHandle = AvahiObjectHandle<ServiceTypeBrowserEvent>

extension AvahiObjectHandle where Event == ServiceTypeBrowserEvent {
    /// Creates the browser. Lock held.
    convenience init(
        client: AvahiClientHandle, domain: String?, handler: @escaping (ServiceTypeBrowserEvent) -> Void
    ) throws(DNSSDError) {
        try self.init(
            client: client,
            counter: \.otherBrowsers,
            what: "browse service types",
            create: { avahiClient, userdata in
                avahi_service_type_browser_new(
                    avahiClient,
                    AvahiConversions.interfaceUnspecified,
                    AvahiConversions.protocolUnspecified,
                    domain,
                    AvahiLookupFlags(0),
                    { browser, _, _, event, type, domain, _, userdata in
                        guard let box = CallbackBox<ServiceTypeBrowserEvent>.fromCallback(userdata) else { return }
                        let kind = BrowserCallbackKind(
                            event,
                            client: browser.flatMap { avahi_service_type_browser_get_client($0) },
                            what: "service type browser"
                        )
                        box.handler(
                            ServiceTypeBrowserEvent(
                                kind: kind, type: AvahiConversions.string(type), domain: AvahiConversions.string(domain))
                        )
                    },
                    userdata
                )
            },
            free: { _ = avahi_service_type_browser_free($0) },
            handler: handler
        )
    }
}

/// One domain browser callback: a browse domain seen or gone.
struct DomainBrowserEvent {
    var kind: BrowserCallbackKind
    var domain: String
}

/// Owns one `AvahiDomainBrowser` for browse domains (`AVAHI_DOMAIN_BROWSER_BROWSE`).
typealias DomainBrowserHandle = AvahiObjectHandle<DomainBrowserEvent>

extension AvahiObjectHandle where Event == DomainBrowserEvent {
    /// Creates the browser. Lock held.
    convenience init(client: AvahiClientHandle, handler: @escaping (DomainBrowserEvent) -> Void) throws(DNSSDError) {
        try self.init(
            client: client,
            counter: \.otherBrowsers,
            what: "browse domains",
            create: { avahiClient, userdata in
                avahi_domain_browser_new(
                    avahiClient,
                    AvahiConversions.interfaceUnspecified,
                    AvahiConversions.protocolUnspecified,
                    nil,
                    AVAHI_DOMAIN_BROWSER_BROWSE,
                    AvahiLookupFlags(0),
                    { browser, _, _, event, domain, _, userdata in
                        guard let box = CallbackBox<DomainBrowserEvent>.fromCallback(userdata) else { return }
                        let kind = BrowserCallbackKind(
                            event,
                            client: browser.flatMap { avahi_domain_browser_get_client($0) },
                            what: "domain browser"
                        )
                        box.handler(DomainBrowserEvent(kind: kind, domain: AvahiConversions.string(domain)))
                    },
                    userdata
                )
            },
            free: { _ = avahi_domain_browser_free($0) },
            handler: handler
        )
    }
}
