import DNSCore
import NIOCore

/// Runs one try: opens a channel, waits for its outcome, and always closes the channel.
///
/// The outcome is one promise that the first of these completes (later completions are ignored by NIO): the
/// channel's handler (a response, TC, or a socket error), the deadline, a failed connect or send, or the
/// cancellation of the calling task. Whichever wins, the deadline is cancelled and the channel closed, so a try
/// never leaves a socket behind.
enum ExchangeRunner {
    /// Starts a try on `loop` and waits for how it ended.
    ///
    /// - Parameters:
    ///   - loop: the event loop that owns the channel, the promise and the deadline.
    ///   - timeout: the try's deadline, from now.
    ///   - start: opens the channel (its handler completes the promise) and sends the query once connected.
    ///     Called once, before this function suspends.
    static func run(
        on loop: any EventLoop, timeout: TimeAmount,
        start: (EventLoopPromise<ExchangeOutcome>) -> EventLoopFuture<any Channel>
    ) async -> ExchangeOutcome {
        let promise = loop.makePromise(of: ExchangeOutcome.self)
        return await withTaskCancellationHandler {
            let deadline = loop.scheduleTask(in: timeout) { promise.succeed(.timedOut) }
            let channel = start(promise)
            channel.whenFailure { error in promise.succeed(.failed("connect", error)) }
            promise.futureResult.whenComplete { _ in
                deadline.cancel()
                channel.whenSuccess { $0.close(promise: nil) }
            }
            // The promise is only ever succeeded, never failed.
            return (try? await promise.futureResult.get()) ?? .failed("internal: try ended without an outcome")
        } onCancel: {
            promise.succeed(.cancelled)
        }
    }
}
