import Logging
import Synchronization

/// The daemon's log level, changeable while it runs (`[daemon] log-level` on reload).
final class RuntimeLogLevel: Sendable {
    /// The level as a small number: every `logger.debug` on a miss reads it, a lock per read cost three
    /// `pthread_mutex` pairs a miss (BENCHMARKS.md, round 10).
    private let level: Synchronization.Atomic<UInt8>

    init(_ level: Logger.Level) { self.level = Synchronization.Atomic(Self.code(level)) }

    /// The level every logger of the daemon uses now.
    var current: Logger.Level {
        get { Self.level(level.load(ordering: .relaxed)) }
        set { level.store(Self.code(newValue), ordering: .relaxed) }
    }

    private static func code(_ level: Logger.Level) -> UInt8 {
        switch level {
        case .trace: 0
        case .debug: 1
        case .info: 2
        case .notice: 3
        case .warning: 4
        case .error: 5
        case .critical: 6
        }
    }

    private static func level(_ code: UInt8) -> Logger.Level {
        switch code {
        case 0: .trace
        case 1: .debug
        case 2: .info
        case 3: .notice
        case 4: .warning
        case 5: .error
        default: .critical
        }
    }
}

/// A log handler whose level is the daemon's ``RuntimeLogLevel``, so a reload changes the level of every logger
/// already handed out; everything else goes to the wrapped handler (stderr, or a journald handler).
struct RuntimeLevelLogHandler<Wrapped: LogHandler>: LogHandler {
    var wrapped: Wrapped
    let level: RuntimeLogLevel

    var logLevel: Logger.Level {
        get { level.current }
        set { level.current = newValue }
    }

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        wrapped.log(event: event)
    }
}
