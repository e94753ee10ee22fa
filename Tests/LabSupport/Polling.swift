import Testing

/// Polls `condition` every 50 ms until it holds or `timeout` passes; returns whether it held.
public func eventually(timeout: Duration = .seconds(5), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
}

/// Polls `condition` every 50 ms until it holds; records `what` as a failure and throws after `timeout`.
public func waitUntil(
    _ what: String,
    timeout: Duration = .seconds(15),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    if try await eventually(timeout: timeout, condition) { return }
    Issue.record("timed out waiting for: \(what)", sourceLocation: sourceLocation)
    throw LabFailure("timed out waiting for: \(what)")
}
