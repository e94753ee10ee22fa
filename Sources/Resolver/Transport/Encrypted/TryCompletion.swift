import NIOConcurrencyHelpers
import NIOCore

/// The end of one try on a kept encrypted connection: what an `EventLoopPromise<ExchangeOutcome>` and its future
/// did here, for a fraction of the cost.
///
/// A miss used a promise (a future, its `Result` metadata looked up at run time), three callbacks on it (the pool's
/// bookkeeping, the session's, and `get()`'s continuation, which took an array) and a continuation adapter. Here
/// the waiting task's continuation is resumed directly and the pool's bookkeeping is one handler: about 4 000 fewer
/// instructions per miss (callgrind, BENCHMARKS.md).
///
/// A try on a NIO pool (DoH) is used on its loop only; a DoT try may end on any thread (see below). ``cancel()``
/// hops to `loop`, so that a loop-confined pool's bookkeeping runs there. The first ``succeed(_:)`` wins; later
/// ones are ignored, as a promise's second completion would be an error.
final class TryCompletion: @unchecked Sendable {
    // @unchecked Sendable: the state is behind `state`'s lock. A try on NIO's loops (DoH) is ended on its loop;
    // a DoT try (``LoopDoTConnection``) may be ended by a reply on a stub worker's loop, a timeout on the
    // connection's home loop or a cancel, whichever comes first: the lock decides, and the first wins.
    let loop: any EventLoop
    /// Free for the session that carries the try: DoT keeps the message ID here. Set before the try is shared.
    var tag = 0
    private struct State {
        var continuation: UnsafeContinuation<ExchangeOutcome, Never>?
        /// Who waits without a task (``UpstreamClient/startQuery(_:dnssecOK:completion:)``).
        var callback: ((ExchangeOutcome) -> Void)?
        /// The outcome when it came before anyone waited (a cancel or a refusal before ``wait(_:)``).
        var early: ExchangeOutcome?
        var isEnded = false
        /// Runs once when the try ends, before the waiting task resumes or after the waiting callback returned
        /// (the pool's bookkeeping).
        var endHandler: ((TryCompletion) -> Void)?
        /// Further handlers (DoH's stream close), rarely more than none.
        var moreHandlers: [(TryCompletion) -> Void] = []
    }
    private let state = NIOLockedValueBox(State())

    init(loop: any EventLoop) {
        self.loop = loop
    }

    var isEnded: Bool { state.withLockedValue { $0.isEnded } }

    /// Ends the try with `outcome`: the handlers run, then the waiting task resumes with it. A waiting callback
    /// runs first: it does its work (a stub's miss: the answer to the client) in this call, and the bookkeeping
    /// can wait until the answer is out. Everything runs on the calling thread, after the lock is let go.
    func succeed(_ outcome: ExchangeOutcome) {
        let taken = state.withLockedValue { state -> State? in
            guard !state.isEnded else { return nil }
            // The waiters are moved out, not copied and then cleared: a copy took a reference count of each
            // closure, and clearing gave it back, on every miss.
            var taken = State()
            swap(&taken, &state)
            state.isEnded = true
            if taken.continuation == nil, taken.callback == nil { state.early = outcome }
            return taken
        }
        guard let taken else { return }
        if taken.continuation == nil, let callback = taken.callback {
            callback(outcome)
            runHandlers(taken)
            return
        }
        runHandlers(taken)
        taken.continuation?.resume(returning: outcome)
    }

    private func runHandlers(_ taken: State) {
        taken.endHandler?(self)
        for handler in taken.moreHandlers { handler(self) }
    }

    /// Runs `handler` when the try ends (at once when it has).
    func onEnd(_ handler: @escaping (TryCompletion) -> Void) {
        let now = state.withLockedValue { state -> Bool in
            if state.isEnded { return true }
            if state.endHandler == nil { state.endHandler = handler } else { state.moreHandlers.append(handler) }
            return false
        }
        if now { handler(self) }
    }

    /// The task that waits for the outcome; resumed at once when the try ended already.
    func wait(_ continuation: UnsafeContinuation<ExchangeOutcome, Never>) {
        if let ready = outcomeOrWait({ $0.continuation = continuation }) { continuation.resume(returning: ready) }
    }

    /// Like ``wait(_:)`` for a caller without a task: `callback` gets the outcome on the thread that ends the try.
    func wait(_ callback: @escaping (ExchangeOutcome) -> Void) {
        if let ready = outcomeOrWait({ $0.callback = callback }) { callback(ready) }
    }

    /// The outcome when the try has ended, or nil after `waiter` was registered under the lock.
    private func outcomeOrWait(_ waiter: (inout State) -> Void) -> ExchangeOutcome? {
        state.withLockedValue { state in
            if let early = state.early {
                state.early = nil
                return early
            }
            if state.isEnded { return .failed("internal: try ended without an outcome") }
            waiter(&state)
            return nil
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
