import DNSSDModel

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Benchmark instrumentation, not API (`@_spi(Benchmarks) import Discovery`): lets `discovery-bench` measure browse
/// fan-out latency from the Avahi callback to each subscriber.
///
/// When `observer` is set, every `added`/`removed` that a service-browser callback emits is first reported to it,
/// with the `CLOCK_MONOTONIC` time (ns) at which that Avahi callback entered `SharedBrowser`, before the event is
/// queued to any subscriber. It runs on the Avahi poll thread with the poll lock held: keep it to a few
/// microseconds and never call back into the library.
///
/// Cost when unused (nil): one load and nil check per service-browser callback (not per subscriber). Behaviour is
/// unchanged either way. Set it once, before creating the `DiscoveryService`, and leave it while that service runs
/// (it is deliberately unsynchronized).
@_spi(Benchmarks)
public enum BrowseBenchmarkHook {
    /// `(event, callbackNanoseconds)`; see the type's documentation.
    nonisolated(unsafe) public static var observer: (@Sendable (BrowseEvent, UInt64) -> Void)?

    /// `CLOCK_MONOTONIC` in nanoseconds (the clock of `observer`'s timestamps).
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
