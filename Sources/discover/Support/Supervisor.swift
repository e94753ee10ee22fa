import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a command body under `--timeout` and, for live commands, ends it quietly on Ctrl-C (SIGINT), SIGTERM or
/// SIGHUP: the body's task is cancelled, which ends its stream and closes its connection (an advertisement is
/// withdrawn by the daemon when its connection closes), and the command exits 0 without a word.
enum Supervisor {
    /// The deadline of a one-shot command passed.
    struct TimedOut: Error {
        var seconds: Double
    }

    private enum Outcome: Sendable {
        case finished(Int32)
        case deadline
        case signal
    }

    static func run(
        timeout: Double?, liveness: Liveness, _ body: @escaping @Sendable () async throws -> Int32
    ) async throws -> Int32 {
        let signals = liveness == .live ? SignalWaiter([SIGINT, SIGTERM, SIGHUP]) : nil
        defer { signals?.stop() }
        return try await withThrowingTaskGroup(of: Outcome.self) { group in
            group.addTask { .finished(try await body()) }
            if let timeout {
                group.addTask {
                    try await Task.sleep(for: .milliseconds(Int((timeout * 1000).rounded(.up))))
                    return .deadline
                }
            }
            if let signals {
                group.addTask {
                    await signals.wait()
                    return .signal
                }
            }
            defer { group.cancelAll() }
            while let outcome = try await group.next() {
                switch outcome {
                case .finished(let status): return status
                case .signal: return 0
                case .deadline:
                    if liveness == .live { return 0 }
                    throw TimedOut(seconds: timeout ?? 0)
                }
            }
            return 0
        }
    }
}

/// Turns signals into an awaitable event (their default action, ending the process, is switched off meanwhile).
// @unchecked: the sources are created in init and only cancelled afterwards (DispatchSource is thread-safe).
final class SignalWaiter: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]
    private let stream: AsyncStream<Void>

    init(_ signals: [Int32]) {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        self.stream = stream
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield() }
            source.resume()
            return source
        }
    }

    /// Returns at the first signal, or when the task is cancelled.
    func wait() async {
        for await _ in stream { return }
    }

    func stop() {
        for source in sources { source.cancel() }
    }
}
