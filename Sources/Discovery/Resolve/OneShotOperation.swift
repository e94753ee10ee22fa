/// The plumbing of a one-shot Avahi operation (resolve, browse types, browse domains): one continuation resumed
/// exactly once, by the Avahi callbacks, by a deadline, or by task cancellation; Avahi objects freed when it ends.
///
/// `State` is the operation's own data (collected results and its Avahi handles).
final class OneShotOperation<Value: Sendable, State>: @unchecked Sendable {
    // @unchecked Sendable: `state`, `continuation`, `result` and `cleanup` are only touched with the poll lock held;
    // `poll` is immutable.
    let poll: ThreadedPoll
    var state: State
    private var continuation: CheckedContinuation<Value, any Error>?
    private var result: Result<Value, any Error>?
    private var cleanup: ((inout State) -> Void)?

    init(poll: ThreadedPoll, state: State, cleanup: @escaping (inout State) -> Void) {
        self.poll = poll
        self.state = state
        self.cleanup = cleanup
    }

    /// True once the operation has a result.
    var isFinished: Bool { self.result != nil }

    /// Ends the operation (first call wins) and frees its Avahi objects. Lock held.
    func finish(_ result: Result<Value, any Error>) {
        guard self.result == nil else { return }
        self.result = result
        self.cleanup?(&self.state)
        self.cleanup = nil
        if let continuation = self.continuation {
            self.continuation = nil
            continuation.resume(with: result)
        }
    }

    /// Runs the operation: `start` (lock held) creates the Avahi objects; after `timeout`, `onTimeout` (lock held)
    /// gives the result.
    func run(
        timeout: Duration,
        start: @escaping @Sendable (OneShotOperation) throws -> Void,
        onTimeout: @escaping @Sendable (OneShotOperation) -> Result<Value, any Error>
    ) async throws -> Value {
        let deadline = Task { [weak self] in
            try await Task.sleep(for: timeout)
            guard let self else { return }
            self.poll.performLocked { self.finish(onTimeout(self)) }
        }
        defer { deadline.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                // Creating the Avahi objects waits for the lock and for D-Bus: not on the caller's thread.
                self.poll.performLocked {
                    if let result = self.result {
                        continuation.resume(with: result)
                        return
                    }
                    self.continuation = continuation
                    do {
                        try start(self)
                    } catch {
                        self.finish(.failure(error))
                    }
                }
            }
        } onCancel: {
            self.poll.performLocked { self.finish(.failure(CancellationError())) }
        }
    }
}
