import DNSCore
import CAvahi
import DNSSDModel

/// One callback of a record browser. For `new` and `remove`, `name` is in Avahi's escaped text form and `rdata` is
/// the record's RDATA as avahi-daemon serialized it for D-Bus (`avahi_rdata_serialize`: wire format without a
/// compression table, so names in PTR/SRV/CNAME rdata are uncompressed).
struct RecordBrowserEvent {
    var interface: Int32
    var proto: Int32
    var kind: BrowserCallbackKind
    var name: String
    var dnsClass: UInt16
    var type: UInt16
    var rdata: [UInt8]
}

/// Owns one `AvahiRecordBrowser`: the records of one (name, class, type), asked for over multicast DNS.
typealias RecordBrowserHandle = AvahiObjectHandle<RecordBrowserEvent>

extension AvahiObjectHandle where Event == RecordBrowserEvent {
    /// Creates the record browser. Lock held.
    /// - Parameters:
    ///   - interface: an interface index, or `AVAHI_IF_UNSPEC`.
    ///   - name: the name in Avahi's escaped text form (`DNSName.avahiText`).
    /// - Throws: the Avahi error as `DNSSDError`.
    convenience init(
        client: AvahiClientHandle,
        interface: Int32,
        name: String,
        dnsClass: UInt16,
        type: UInt16,
        handler: @escaping (RecordBrowserEvent) -> Void
    ) throws(DNSSDError) {
        try self.init(
            client: client,
            counter: \.otherBrowsers,
            what: "browse records of \(name)",
            create: { avahiClient, userdata in
                // USE_MULTICAST: without it avahi-daemon hands names outside `local` and the link-local reverse zones
                // to its wide-area (unicast DNS) engine whenever it knows a DNS server, so the reverse names of the
                // hosts' ordinary addresses would never be asked on the link.
                avahi_record_browser_new(
                    avahiClient,
                    interface,
                    AvahiConversions.protocolUnspecified,
                    name,
                    dnsClass,
                    type,
                    AVAHI_LOOKUP_USE_MULTICAST,
                    { browser, interface, proto, event, name, dnsClass, type, rdata, size, _, userdata in
                        guard let box = CallbackBox<RecordBrowserEvent>.fromCallback(userdata) else { return }
                        let kind = BrowserCallbackKind(
                            event,
                            client: browser.flatMap { avahi_record_browser_get_client($0) },
                            what: "record browser"
                        )
                        let bytes = rdata.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                        box.handler(
                            RecordBrowserEvent(
                                interface: interface,
                                proto: proto,
                                kind: kind,
                                name: AvahiConversions.string(name),
                                dnsClass: dnsClass,
                                type: type,
                                rdata: bytes
                            )
                        )
                    },
                    userdata
                )
            },
            free: { _ = avahi_record_browser_free($0) },
            handler: handler
        )
    }
}
