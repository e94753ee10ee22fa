import CAvahi
import DNSSDModel

/// Owns one `AvahiServiceResolver`. Kept open it reports `FOUND` again whenever the service data changes.
///
/// Created and closed with the poll lock held; `deinit` closes (taking the lock) as a safety net.
final class ServiceResolverHandle {
    /// What a resolver found.
    struct Found {
        var name: String
        var type: String
        var domain: String
        var host: String
        var address: String?
        var port: UInt16
        var txt: TXTRecord
    }

    /// One resolver callback.
    struct Event {
        var interface: Int32
        var proto: Int32
        var result: Result<Found, DNSSDError>
    }

    private let client: AvahiClientHandle
    private var pointer: OpaquePointer?
    // Retained while the Avahi object exists; released in `close` after avahi_service_resolver_free (lock held).
    private var box: Unmanaged<CallbackBox<Event>>?

    /// Creates the resolver. Lock held.
    /// - Parameters:
    ///   - proto: the protocol to query with, as reported by the browser; the address family asked for is the same
    ///     (A over IPv4, AAAA over IPv6), so the two sightings of a dual-stack service give both addresses.
    /// - Throws: the Avahi error as `DNSSDError`.
    init(
        client: AvahiClientHandle,
        interface: Int32,
        proto: Int32,
        name: String,
        type: String,
        domain: String,
        handler: @escaping (Event) -> Void
    ) throws(DNSSDError) {
        self.client = client
        let avahiClient = try client.connectedClient()
        let box = Unmanaged.passRetained(CallbackBox<Event>(poll: client.poll, handler: handler))
        let pointer = avahi_service_resolver_new(
            avahiClient,
            interface,
            proto,
            name,
            type,
            domain,
            proto,
            AvahiLookupFlags(0),
            { resolver, interface, proto, event, name, type, domain, host, address, port, txt, _, userdata in
                guard let box = CallbackBox<Event>.fromCallback(userdata) else { return }
                let result: Result<Found, DNSSDError>
                if event == AVAHI_RESOLVER_FOUND {
                    result = .success(
                        Found(
                            name: AvahiConversions.string(name),
                            type: AvahiConversions.string(type),
                            domain: AvahiConversions.string(domain),
                            host: AvahiConversions.string(host),
                            address: address.flatMap { AvahiConversions.format($0, interface: interface) },
                            port: port,
                            txt: AvahiConversions.txtRecord(from: txt)
                        )
                    )
                } else {
                    let rc = resolver.flatMap { avahi_service_resolver_get_client($0) }.map { avahi_client_errno($0) }
                    result = .failure(
                        DNSSDError.fromAvahi(rc ?? Int32(AVAHI_ERR_FAILURE), "cannot resolve service")
                            ?? DNSSDError(.avahiFailure, "cannot resolve service")
                    )
                }
                box.handler(Event(interface: interface, proto: proto, result: result))
            },
            box.toOpaque()
        )
        guard let pointer else {
            box.release()
            throw DNSSDError.fromAvahi(avahi_client_errno(avahiClient), "cannot resolve \(name).\(type)")
                ?? DNSSDError(.avahiFailure, "cannot resolve \(name).\(type)")
        }
        self.pointer = pointer
        self.box = box
        client.counts.serviceResolvers += 1
    }

    /// Frees the resolver; no callback runs afterwards. Idempotent.
    func close() {
        self.client.poll.withLocked {
            guard let pointer = self.pointer else { return }
            self.pointer = nil
            avahi_service_resolver_free(pointer)
            self.box?.release()
            self.box = nil
            self.client.counts.serviceResolvers -= 1
        }
    }

    deinit {
        self.close()
    }
}
