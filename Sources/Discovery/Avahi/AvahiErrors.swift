import CAvahi
import DNSSDModel

extension DNSSDError {
    /// Turns an Avahi return code into an error, or `nil` when it is not an error (`rc >= 0`).
    static func fromAvahi(_ rc: Int32, _ what: String) -> DNSSDError? {
        guard rc < 0 else { return nil }
        let code: Code
        switch Int(rc) {
        case AVAHI_ERR_COLLISION:
            code = .nameConflict
        case AVAHI_ERR_INVALID_SERVICE_TYPE, AVAHI_ERR_INVALID_SERVICE_SUBTYPE:
            code = .invalidServiceType
        case AVAHI_ERR_INVALID_SERVICE_NAME, AVAHI_ERR_INVALID_HOST_NAME, AVAHI_ERR_INVALID_DOMAIN_NAME:
            code = .invalidName
        case AVAHI_ERR_NOT_FOUND, AVAHI_ERR_DNS_NXDOMAIN:
            code = .notFound
        case AVAHI_ERR_TIMEOUT:
            code = .timeout
        case AVAHI_ERR_NO_DAEMON, AVAHI_ERR_DISCONNECTED, AVAHI_ERR_BAD_STATE, AVAHI_ERR_DBUS_ERROR,
            AVAHI_ERR_NO_NETWORK:
            code = .avahiUnavailable
        case AVAHI_ERR_INVALID_PORT, AVAHI_ERR_INVALID_RECORD, AVAHI_ERR_INVALID_KEY, AVAHI_ERR_INVALID_INTERFACE,
            AVAHI_ERR_INVALID_PROTOCOL, AVAHI_ERR_INVALID_FLAGS, AVAHI_ERR_INVALID_ARGUMENT, AVAHI_ERR_INVALID_ADDRESS:
            code = .invalidParameter
        default:
            code = .avahiFailure
        }
        let text = avahi_strerror(rc).map { String(cString: $0) }
        return DNSSDError(code, what, avahiError: rc, avahiErrorText: text)
    }
}

/// Throws the `DNSSDError` matching an Avahi return code; returns the code when it is not an error.
@discardableResult
func check(_ rc: Int32, _ what: @autoclosure () -> String) throws(DNSSDError) -> Int32 {
    if let error = DNSSDError.fromAvahi(rc, what()) {
        throw error
    }
    return rc
}
