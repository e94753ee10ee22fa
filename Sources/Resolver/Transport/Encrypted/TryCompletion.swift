import NIOCore

/// The end of one try on a kept encrypted connection: what an `EventLoopPromise<ExchangeOutcome>` and its future
/// did here, for a fraction of the cost.
///
/// A miss used a promise (a future, its `Result` metadata looked up at run time), three callbacks on it (the pool's
/// bookkeeping, the session's, and `get()`'s continuation, which took an array) and a continuation adapter. Here
/// the waiting task's continuation is resumed directly and the pool's bookkeeping is one handler: about 4 000 fewer
/// instructions per miss (callgrind, BENCHMARKS.md).
///
/// Every method is called on `loop` (``cancel()`` hops there itself). The first ``succeed(_:)`` wins; later ones
/// are ignored, as a promise's second completion would be an error.
final class TryCompletion: @unchecked Sendable {
    // @unchecked Sendable: every `var` is read and written on `loop` only.
    let loop: any EventLoop
    /// Free for the session that carries the try: DoT keeps the message ID here.
    var tag = 0
    private var continuation: UnsafeContinuation<ExchangeOutcome, Never>?
    /// Who waits without a task (``UpstreamClient/startQuery(_:dnssecOK:completion:)``).
    private var callback: ((ExchangeOutcome) -> Void)?
    /// The outcome when it came before anyone waited (a cancel or a refusal before ``wait(_:)``).
    private var early: ExchangeOutcome?
    private(set) var isEnded = false
    /// Runs once when the try ends, before the waiting task resumes or after the waiting callback returned (the
    /// pool's bookkeeping).
    private var endHandler: ((TryCompletion) -> Void)?
    /// Further handlers (DoH's stream close), rarely more than none.
    private var moreHandlers: [(TryCompletion) -> Void] = []

    init(loop: any EventLoop) {
        self.loop = loop
    }

    /// Ends the try with `outcome`: the handlers run, then the waiting task resumes with it. A waiting callback
    /// runs first: it does its work (a stub's miss: the answer to the client) in this call, and the bookkeeping
    /// can wait until the answer is out.
    func succeed(_ outcome: ExchangeOutcome) {
        loop.assertInEventLoop()
        guard !isEnded else { return }
        isEnded = true
        if continuation == nil, let callback {
            self.callback = nil
            callback(outcome)
            runHandlers()
            return
        }
        runHandlers()
        if let continuation {
            self.continuation = nil
            continuation.resume(returning: outcome)
        } else {
            early = outcome
        }
    }

    private func runHandlers() {
        if let handler = endHandler {
            endHandler = nil
            handler(self)
        }
        if !moreHandlers.isEmpty {
            let handlers = moreHandlers
            moreHandlers = []
            for handler in handlers { handler(self) }
        }
    }

    /// Runs `handler` when the try ends (at once when it has).
    func onEnd(_ handler: @escaping (TryCompletion) -> Void) {
        loop.assertInEventLoop()
        if isEnded {
            handler(self)
        } else if endHandler == nil {
            endHandler = handler
        } else {
            moreHandlers.append(handler)
        }
    }

    /// The task that waits for the outcome; resumed at once when the try ended already.
    func wait(_ continuation: UnsafeContinuation<ExchangeOutcome, Never>) {
        loop.assertInEventLoop()
        if let early {
            self.early = nil
            continuation.resume(returning: early)
        } else if isEnded {
            continuation.resume(returning: .failed("internal: try ended without an outcome"))
        } else {
            self.continuation = continuation
        }
    }

    /// Like ``wait(_:)`` for a caller without a task: `callback` gets the outcome on `loop`.
    func wait(_ callback: @escaping (ExchangeOutcome) -> Void) {
        loop.assertInEventLoop()
        if let early {
            self.early = nil
            callback(early)
        } else if isEnded {
            callback(.failed("internal: try ended without an outcome"))
        } else {
            self.callback = callback
        }
    }

    /// The waiting task was cancelled: the try ends with ``ExchangeOutcome/cancelled`` (the connection stays).
    /// From any thread.
    func cancel() {
        if loop.inEventLoop {
            succeed(.cancelled)
        } else {
            loop.execute { self.succeed(.cancelled) }
        }
    }
}
