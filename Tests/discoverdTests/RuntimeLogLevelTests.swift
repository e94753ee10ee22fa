import Logging
import Testing

@testable import discoverd

/// The daemon's one log level, read by every logger on every line and changed by a reload.
@Suite struct RuntimeLogLevelTests {
    @Test(arguments: Logger.Level.allCases)
    func everyLevelReadsBackAsSet(_ level: Logger.Level) {
        let runtime = RuntimeLogLevel(.info)
        runtime.current = level
        #expect(runtime.current == level)
        #expect(RuntimeLogLevel(level).current == level)
    }

    @Test func aChangeReachesHandlersMadeBefore() {
        let runtime = RuntimeLogLevel(.warning)
        let handler = RuntimeLevelLogHandler(wrapped: StreamLogHandler.standardError(label: "t"), level: runtime)
        let logger = Logger(label: "t", factory: { _ in handler })
        #expect(logger.logLevel == .warning)
        runtime.current = .debug
        #expect(logger.logLevel == .debug)
    }
}
