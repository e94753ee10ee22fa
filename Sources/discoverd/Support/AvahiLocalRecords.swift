import DNSStub
import Discovery
import Resolver

/// `.local` records for the DNS stub from the daemon's one Avahi client.
struct AvahiLocalRecords: LocalRecordSource {
    let discovery: DiscoveryService

    func lookup(name: DNSName, type: RRType, class rrClass: RRClass) async throws(LocalLookupError) -> [ResourceRecord] {
        throw LocalLookupError("mDNS look-ups are not available yet")
    }
}
