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

/// Runs a check that holds only within a time window (docs/DESIGN.md, the lab): `attempt` makes a fresh name,
/// measures the window from an instant before the event it depends on, and returns false without asserting when
/// the test itself came too late for the check to mean anything. It is then redone, at most `tries` times.
/// Returns whether one attempt came in time (and so checked).
public func checkedInTime(tries: Int = 3, _ attempt: () async throws -> Bool) async rethrows -> Bool {
    for _ in 0..<tries {
        if try await attempt() { return true }
    }
    return false
}
