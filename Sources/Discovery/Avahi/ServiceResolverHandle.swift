import CAvahi
import DNSSDModel

/// What a service resolver found.
struct ResolvedService {
    var name: String
    var type: String
    var domain: String
    var host: String
    var address: String?
    var port: UInt16
    var txt: TXTRecord
}

/// One service resolver callback.
struct ServiceResolverEvent {
    var interface: Int32
    var proto: Int32
    var result: Result<ResolvedService, DNSSDError>
}

/// Owns one `AvahiServiceResolver`. Kept open it reports `FOUND` again whenever the service data changes.
typealias ServiceResolverHandle = AvahiObjectHandle<ServiceResolverEvent>

extension AvahiObjectHandle where Event == ServiceResolverEvent {
    /// Creates the resolver. Lock held.
    /// - Parameters:
    ///   - proto: the protocol to query with, as reported by the browser; the address family asked for is the same
    ///     (A over IPv4, AAAA over IPv6), so the two sightings of a dual-stack service give both addresses.
    /// - Throws: the Avahi error as `DNSSDError`.
    convenience init(
        client: AvahiClientHandle,
        interface: Int32,
        proto: Int32,
        name: String,
        type: String,
        domain: String,
        handler: @escaping (ServiceResolverEvent) -> Void
    ) throws(DNSSDError) {
        try self.init(
            client: client,
            counter: \.serviceResolvers,
            what: "resolve \(name).\(type)",
            create: { avahiClient, userdata in
                avahi_service_resolver_new(
                    avahiClient,
                    interface,
                    proto,
                    name,
                    type,
                    domain,
                    proto,
                    AvahiLookupFlags(0),
                    { resolver, interface, proto, event, name, type, domain, host, address, port, txt, _, userdata in
                        guard let box = CallbackBox<ServiceResolverEvent>.fromCallback(userdata) else { return }
                        let result: Result<ResolvedService, DNSSDError>
                        if event == AVAHI_RESOLVER_FOUND {
                            result = .success(
                                ResolvedService(
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
                            let rc = resolver.flatMap { avahi_service_resolver_get_client($0) }.map {
                                avahi_client_errno($0)
                            }
                            result = .failure(
                                DNSSDError.fromAvahi(rc ?? Int32(AVAHI_ERR_FAILURE), "cannot resolve service")
                                    ?? DNSSDError(.avahiFailure, "cannot resolve service")
                            )
                        }
                        box.handler(ServiceResolverEvent(interface: interface, proto: proto, result: result))
                    },
                    userdata
                )
            },
            free: { _ = avahi_service_resolver_free($0) },
            handler: handler
        )
    }
}
