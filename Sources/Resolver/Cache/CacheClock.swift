import DNSCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A source of wall-clock time for the cache and the Alt-Svc store.
///
/// Expiry times are kept as absolute wall-clock seconds (since 1970) so that they mean the same thing after a
/// restart, when the cache is loaded from disk. Tests inject a manual clock to drive every TTL transition.
public protocol CacheClock: Sendable {
    /// The current wall-clock time in seconds since 1970-01-01T00:00:00Z.
    func now() -> Double
}

/// The system's real-time clock (`CLOCK_REALTIME`).
///
/// A step of the wall clock moves every expiry with it: a step backwards keeps entries longer, which is bounded
/// by the TTL clamps (``CachePolicy/maxTTL``) applied again when a persisted cache is loaded.
public struct SystemCacheClock: CacheClock {
    /// Creates the system clock.
    public init() {}

    public func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1_000_000_000
    }
}

/// Whole seconds in `interval`, rounded down and clamped to `UInt32`; never traps on odd input (NaN, infinity).
func wholeSeconds(_ interval: Double) -> UInt32 {
    guard interval.isFinite, interval > 0 else { return 0 }
    return interval >= Double(UInt32.max) ? .max : UInt32(interval)
}
