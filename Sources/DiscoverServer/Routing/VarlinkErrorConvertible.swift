import DiscoverAPI

/// An error that knows which varlink error it is answered with.
///
/// The one place where a domain error meets the wire: each domain error type states its varlink error name and
/// parameters once, in its conformance, and ``MethodRouter`` asks this protocol for every error a method throws.
/// Errors that do not conform are answered with `io.discoverd.Daemon.InternalError` and logged.
public protocol VarlinkErrorConvertible: Error {
    /// The error as it goes on the wire.
    var varlinkError: VarlinkError { get }
}

extension VarlinkError: VarlinkErrorConvertible {
    /// Itself: method handlers may throw wire errors directly (`PermissionDenied`, `InvalidParameter`).
    public var varlinkError: VarlinkError { self }
}
