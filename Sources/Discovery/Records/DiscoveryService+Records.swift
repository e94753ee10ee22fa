import DNSSDModel

extension DiscoveryService {
    /// The records of (name, type) on the link, asked for over multicast DNS through avahi-daemon.
    ///
    /// Collects until Avahi says all-for-now (`AVAHI_BROWSER_ALL_FOR_NOW`, about a second after the first query) or
    /// `timeout` passes, whichever is first; records already in avahi-daemon's cache arrive at once. The same record
    /// seen on several interfaces or protocols is returned once. Reverse names (`2.2.0.192.in-addr.arpa`, `ip6.arpa`)
    /// are asked on the link too: avahi-daemon answers PTR for its hosts' own addresses. If Avahi follows a CNAME the
    /// records of the target carry the target's name. Cancelling the calling task frees the browser at once and
    /// returns the records seen so far.
    /// - Parameters:
    ///   - name: a name in presentation format (`lab-b.local`, `my\032printer._ipp._tcp.local.`); any case.
    ///   - type: one RR type (1 A, 12 PTR, 16 TXT, 28 AAAA, 33 SRV, …); not a query type such as ANY.
    ///   - dnsClass: one class, 1 (IN) by default.
    ///   - interface: an interface index in avahi-daemon's namespace, or nil for all.
    ///   - timeout: how long to wait at most.
    /// - Returns: the records sorted by name, type and rdata; `[]` when nobody answered.
    /// - Throws: `invalidName` for a malformed name, `invalidParameter` for a query type or class or an index below 1,
    ///   `avahiUnavailable` when avahi-daemon is not running or goes away meanwhile.
    public func lookupRecords(
        name: String,
        type: UInt16,
        dnsClass: UInt16 = 1,
        interface: Int32? = nil,
        timeout: Duration = .seconds(1)
    ) async throws(DNSSDError) -> [MDNSRecord] {
        let query = try RecordLookups.Query(name: name, type: type, dnsClass: dnsClass, interface: interface)
        return try await RecordLookups.lookup(client: self.client, query: query, timeout: timeout)
    }

    /// Follows the records of (name, type) on the link: `added` for each record present or appearing (merged over
    /// interfaces and protocols), `removed` when it goes away (goodbye packet or expiry), `allForNow` once Avahi has
    /// sent its cache and waited a second for answers.
    ///
    /// Cancelling the consuming task frees the browser. The stream fails with `avahiUnavailable` if avahi-daemon goes
    /// away (subscribe again once `avahiState` is back to running), with `subscriberTooSlow` if the consumer falls
    /// `subscriberBufferLimit` events behind, and with Avahi's error if the browser fails.
    /// - Parameters: as for `lookupRecords`.
    /// - Throws: `invalidName`, `invalidParameter`, `avahiUnavailable` (not connected now).
    public func recordUpdates(
        name: String,
        type: UInt16,
        dnsClass: UInt16 = 1,
        interface: Int32? = nil
    ) throws(DNSSDError) -> AsyncThrowingStream<MDNSRecordEvent, any Error> {
        let query = try RecordLookups.Query(name: name, type: type, dnsClass: dnsClass, interface: interface)
        return try RecordLookups.updates(client: self.client, query: query, bufferLimit: self.subscriberBufferLimit)
    }
}
