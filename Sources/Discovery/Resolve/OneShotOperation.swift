import DNSSDModel

/// The plumbing of a one-shot Avahi operation (resolve, browse types, browse domains): one continuation resumed
/// exactly once, by the Avahi callbacks, by a deadline, by task cancellation or by the loss of the connection to
/// avahi-daemon (`avahiUnavailable`, before the client frees the objects); Avahi objects freed when it ends.
///
/// `State` is the operation's own data (collected results and its Avahi handles).
final class OneShotOperation<Value: Sendable, State>: @unchecked Sendable {
    // @unchecked Sendable: `state`, `continuation`, `result`, `cleanup` and `lossObserver` are only touched with the
    // poll lock held; `client` and `poll` are immutable.
    let client: AvahiClientHandle
    let poll: ThreadedPoll
    var state: State
    private var continuation: CheckedContinuation<Value, any Error>?
    private var result: Result<Value, any Error>?
    private var cleanup: ((inout State) -> Void)?
    private var lossObserver: UInt64?

    init(client: AvahiClientHandle, state: State, cleanup: @escaping (inout State) -> Void) {
        self.client = client
        self.poll = client.poll
        self.state = state
        self.cleanup = cleanup
    }

    /// True once the operation has a result.
    var isFinished: Bool { self.result != nil }

    /// Ends the operation (first call wins) and frees its Avahi objects. Lock held.
    func finish(_ result: Result<Value, any Error>) {
        guard self.result == nil else { return }
        self.result = result
        if let lossObserver = self.lossObserver {
            self.lossObserver = nil
            self.client.removeLossObserver(lossObserver)
        }
        self.cleanup?(&self.state)
        self.cleanup = nil
        if let continuation = self.continuation {
            self.continuation = nil
            continuation.resume(with: result)
        }
    }

    /// Runs the operation: `start` (lock held) creates the Avahi objects; after `timeout`, `onTimeout` (lock held)
    /// gives the result; when the task is cancelled, `onCancel` (lock held) does (by default `CancellationError`).
    func run(
        timeout: Duration,
        start: @escaping @Sendable (OneShotOperation) throws -> Void,
        onTimeout: @escaping @Sendable (OneShotOperation) -> Result<Value, any Error>,
        onCancel: @escaping @Sendable (OneShotOperation) -> Result<Value, any Error> = { _ in
            .failure(CancellationError())
        }
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
                    self.lossObserver = self.client.addLossObserver { [weak self] in
                        self?.finish(.failure(DNSSDError(.avahiUnavailable, "avahi-daemon went away")))
                    }
                    do {
                        try start(self)
                    } catch {
                        self.finish(.failure(error))
                    }
                }
            }
        } onCancel: {
            self.poll.performLocked { self.finish(onCancel(self)) }
        }
    }
}
