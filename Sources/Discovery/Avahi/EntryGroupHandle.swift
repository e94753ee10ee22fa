import CAvahi
import DNSSDModel

/// One entry group state callback; `error` is set for `AVAHI_ENTRY_GROUP_FAILURE`.
struct EntryGroupEvent {
    var state: AvahiEntryGroupState
    var error: DNSSDError?
}

/// Owns one `AvahiEntryGroup`: the records of one advertisement. Closing it withdraws them.
typealias EntryGroupHandle = AvahiObjectHandle<EntryGroupEvent>

extension AvahiObjectHandle where Event == EntryGroupEvent {
    /// Creates an empty group. Lock held. The handler may run before this initializer returns (with UNCOMMITED).
    /// - Throws: `avahiUnavailable` unless avahi-daemon is running, or the Avahi error.
    convenience init(client: AvahiClientHandle, handler: @escaping (EntryGroupEvent) -> Void) throws(DNSSDError) {
        try self.init(
            client: client,
            counter: \.entryGroups,
            what: "create entry group",
            needsRunningDaemon: true,
            create: { avahiClient, userdata in
                avahi_entry_group_new(
                    avahiClient,
                    { group, state, userdata in
                        guard let box = CallbackBox<EntryGroupEvent>.fromCallback(userdata) else { return }
                        var error: DNSSDError?
                        if state == AVAHI_ENTRY_GROUP_FAILURE {
                            let rc = group.flatMap { avahi_entry_group_get_client($0) }.map { avahi_client_errno($0) }
                            error =
                                DNSSDError.fromAvahi(rc ?? Int32(AVAHI_ERR_FAILURE), "registration failed")
                                ?? DNSSDError(.avahiFailure, "registration failed")
                        }
                        box.handler(EntryGroupEvent(state: state, error: error))
                    },
                    userdata
                )
            },
            free: { _ = avahi_entry_group_free($0) },
            handler: handler
        )
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
        try self.withPointer { (pointer) throws(DNSSDError) in
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
    }

    /// Replaces the TXT record of a committed service. Lock held.
    func updateTXT(name: String, type: String, domain: String?, txt: TXTRecord) throws(DNSSDError) {
        try self.withPointer { (pointer) throws(DNSSDError) in
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
    }

    /// Starts registration. Lock held.
    func commit() throws(DNSSDError) {
        try self.withPointer { (pointer) throws(DNSSDError) in
            try check(avahi_entry_group_commit(pointer), "cannot commit entry group")
        }
    }

    /// Withdraws and empties the group so it can be filled again. Lock held.
    func reset() throws(DNSSDError) {
        try self.withPointer { (pointer) throws(DNSSDError) in
            try check(avahi_entry_group_reset(pointer), "cannot reset entry group")
        }
    }
}
