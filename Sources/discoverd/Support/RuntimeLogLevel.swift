import Logging
import NIOConcurrencyHelpers

/// The daemon's log level, changeable while it runs (`[daemon] log-level` on reload).
final class RuntimeLogLevel: Sendable {
    private let level: NIOLockedValueBox<Logger.Level>

    init(_ level: Logger.Level) { self.level = NIOLockedValueBox(level) }

    /// The level every logger of the daemon uses now.
    var current: Logger.Level {
        get { level.withLockedValue { $0 } }
        set { level.withLockedValue { $0 = newValue } }
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
