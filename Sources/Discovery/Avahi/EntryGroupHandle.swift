import CAvahi
import DNSSDModel

/// Owns one `AvahiEntryGroup`: the records of one advertisement.
///
/// Created, used and closed with the poll lock held; `deinit` closes (taking the lock) as a safety net.
final class EntryGroupHandle {
    /// One state callback; `error` is set for `AVAHI_ENTRY_GROUP_FAILURE`.
    struct Event {
        var state: AvahiEntryGroupState
        var error: DNSSDError?
    }

    private let client: AvahiClientHandle
    private(set) var pointer: OpaquePointer?
    // Retained while the Avahi object exists; released in `close` after avahi_entry_group_free (lock held).
    private var box: Unmanaged<CallbackBox<Event>>?

    /// Creates an empty group. Lock held. The handler may run before this initializer returns (with UNCOMMITED).
    /// - Throws: `avahiUnavailable` unless avahi-daemon is running, or the Avahi error.
    init(client: AvahiClientHandle, handler: @escaping (Event) -> Void) throws(DNSSDError) {
        self.client = client
        let avahiClient = try client.runningClient()
        let box = Unmanaged.passRetained(CallbackBox<Event>(poll: client.poll, handler: handler))
        let pointer = avahi_entry_group_new(
            avahiClient,
            { group, state, userdata in
                guard let box = CallbackBox<Event>.fromCallback(userdata) else { return }
                var error: DNSSDError?
                if state == AVAHI_ENTRY_GROUP_FAILURE {
                    let rc = group.flatMap { avahi_entry_group_get_client($0) }.map { avahi_client_errno($0) }
                    error =
                        DNSSDError.fromAvahi(rc ?? Int32(AVAHI_ERR_FAILURE), "registration failed")
                        ?? DNSSDError(.avahiFailure, "registration failed")
                }
                box.handler(Event(state: state, error: error))
            },
            box.toOpaque()
        )
        guard let pointer else {
            box.release()
            throw DNSSDError.fromAvahi(avahi_client_errno(avahiClient), "cannot create entry group")
                ?? DNSSDError(.avahiFailure, "cannot create entry group")
        }
        self.pointer = pointer
        self.box = box
        client.counts.entryGroups += 1
    }

    /// Adds a service (and its subtypes) to the group. Lock held.
    /// - Throws: the Avahi error (`nameConflict` when the name is taken locally).
    func addService(
        name: String,
        type: String,
        domain: String?,
        host: String?,
        port: UInt16,
        txt: TXTRecord,
        subtypes: [String]
    ) throws(DNSSDError) {
        guard let pointer else { throw DNSSDError(.avahiUnavailable, "entry group is closed") }
        try AvahiConversions.withStringList(txt) { list throws(DNSSDError) in
            try check(
                avahi_entry_group_add_service_strlst(
                    pointer,
                    AvahiConversions.interfaceUnspecified,
                    AvahiConversions.protocolUnspecified,
                    AvahiPublishFlags(0),
                    name,
                    type,
                    domain,
                    host,
                    port,
                    list
                ),
                "cannot add service \(name).\(type)"
            )
        }
        for subtype in subtypes {
            try check(
                avahi_entry_group_add_service_subtype(
                    pointer,
                    AvahiConversions.interfaceUnspecified,
                    AvahiConversions.protocolUnspecified,
                    AvahiPublishFlags(0),
                    name,
                    type,
                    domain,
                    subtype
                ),
                "cannot add subtype \(subtype)"
            )
        }
    }

    /// Replaces the TXT record of a committed service. Lock held.
    func updateTXT(name: String, type: String, domain: String?, txt: TXTRecord) throws(DNSSDError) {
        guard let pointer else { throw DNSSDError(.avahiUnavailable, "entry group is closed") }
        try AvahiConversions.withStringList(txt) { list throws(DNSSDError) in
            try check(
                avahi_entry_group_update_service_txt_strlst(
                    pointer,
                    AvahiConversions.interfaceUnspecified,
                    AvahiConversions.protocolUnspecified,
                    AvahiPublishFlags(0),
                    name,
                    type,
                    domain,
                    list
                ),
                "cannot update TXT of \(name).\(type)"
            )
        }
    }

    /// Starts registration. Lock held.
    func commit() throws(DNSSDError) {
        guard let pointer else { throw DNSSDError(.avahiUnavailable, "entry group is closed") }
        try check(avahi_entry_group_commit(pointer), "cannot commit entry group")
    }

    /// Withdraws and empties the group so it can be filled again. Lock held.
    func reset() throws(DNSSDError) {
        guard let pointer else { throw DNSSDError(.avahiUnavailable, "entry group is closed") }
        try check(avahi_entry_group_reset(pointer), "cannot reset entry group")
    }

    /// Withdraws the records and frees the group; no callback runs afterwards. Idempotent.
    func close() {
        self.client.poll.withLocked {
            guard let pointer = self.pointer else { return }
            self.pointer = nil
            avahi_entry_group_free(pointer)
            self.box?.release()
            self.box = nil
            self.client.counts.entryGroups -= 1
        }
    }

    deinit {
        self.close()
    }
}
