import DNSSDModel
import Foundation

/// Collects the events of a stream (a browse, record updates) in the background, for tests to wait on.
public final class StreamLog<Event: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `events`, `error` and `finished` are only accessed under `lock`; `task` is set in init.
    private let lock = NSLock()
    private var events: [Event] = []
    private var error: (any Error)?
    private var finished = false
    private var task: Task<Void, Never>?

    public init(_ stream: AsyncThrowingStream<Event, any Error>) {
        self.task = Task { [weak self] in
            do {
                for try await event in stream {
                    guard let self else { return }
                    self.lock.withLock { self.events.append(event) }
                }
                self?.lock.withLock { self?.finished = true }
            } catch {
                self?.lock.withLock {
                    self?.error = error
                    self?.finished = true
                }
            }
        }
    }

    /// Every event so far, in order.
    public var all: [Event] { self.lock.withLock { self.events } }
    /// Whether the stream ended (normally or with an error).
    public var isFinished: Bool { self.lock.withLock { self.finished } }
    /// The error the stream ended with, if any.
    public var failure: (any Error)? { self.lock.withLock { self.error } }

    public func count(where predicate: (Event) -> Bool) -> Int {
        self.all.filter(predicate).count
    }

    /// Index of the first event after `start` matching `predicate`, waiting up to `timeout`.
    public func waitFor(
        after start: Int = -1, timeout: Duration = .seconds(15), _ predicate: @escaping (Event) -> Bool
    ) async -> Int? {
        var index: Int?
        _ = await eventually(timeout: timeout) {
            let events = self.all
            index = events.indices.first { $0 > start && predicate(events[$0]) }
            return index != nil
        }
        return index
    }

    /// Cancels the consuming task (which ends the subscription).
    public func cancel() {
        self.task?.cancel()
    }

    deinit {
        self.task?.cancel()
    }
}

/// The events of a browse stream.
public typealias EventLog = StreamLog<BrowseEvent>

extension StreamLog where Event == BrowseEvent {
    /// The services currently known from the events so far (added/changed minus removed), by name.
    public var current: [String: DNSSDService] {
        var result: [String: DNSSDService] = [:]
        for event in self.all {
            switch event {
            case .added(let service), .changed(let service): result[service.name] = service
            case .removed(let service): result[service.name] = nil
            case .allForNow: break
            }
        }
        return result
    }
}

extension BrowseEvent {
    /// The service an event is about; nil for `allForNow`.
    public var service: DNSSDService? {
        switch self {
        case .added(let service), .changed(let service), .removed(let service): service
        case .allForNow: nil
        }
    }

    public var isAdded: Bool { if case .added = self { true } else { false } }
    public var isRemoved: Bool { if case .removed = self { true } else { false } }
    public var isChanged: Bool { if case .changed = self { true } else { false } }
    public var isAllForNow: Bool { if case .allForNow = self { true } else { false } }

    /// An event of kind `kind` (`added`, `removed`, `changed`) for instance `name`.
    public func `is`(_ kind: String, _ name: String) -> Bool {
        guard service?.name == name else { return false }
        switch kind {
        case "added": return isAdded
        case "removed": return isRemoved
        case "changed": return isChanged
        default: return false
        }
    }
}
