import DiscoverAPI
@testable import DiscoverServer
import NIOConcurrencyHelpers

/// Parameters naming a gate the test opens, and how many replies a stream sends.
struct GateParameters: VarlinkParameters, Equatable {
    enum CodingKeys: String, CodingKey, CaseIterable { case gate, count, size }
    var gate: String
    var count: Int?
    var size: Int?
}

/// A reply naming its call's gate; `index` numbers a stream's replies, `padding` makes them large.
struct GateReply: Codable, Sendable, Equatable {
    var gate: String
    var index: Int?
    var padding: String?
}

/// Gates the calls of the test routes wait for, and the order the calls started in.
final class Gates: Sendable {
    private struct State {
        var open: Set<String> = []
        var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]
        var started: [String] = []
    }

    private let state = NIOLockedValueBox(State())

    /// Calls that have started, by gate name, in order.
    var started: [String] { state.withLockedValue { $0.started } }

    func markStarted(_ gate: String) { state.withLockedValue { $0.started.append(gate) } }

    /// Returns once `gate` is open.
    func wait(_ gate: String) async {
        await withCheckedContinuation { continuation in
            let resume = state.withLockedValue { state -> Bool in
                if state.open.contains(gate) { return true }
                state.waiting[gate, default: []].append(continuation)
                return false
            }
            if resume { continuation.resume() }
        }
    }

    func isOpen(_ gate: String) -> Bool { state.withLockedValue { $0.open.contains(gate) } }

    func open(_ gate: String) {
        let waiting = state.withLockedValue { state in
            state.open.insert(gate)
            return state.waiting.removeValue(forKey: gate) ?? []
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// Methods of a pretend interface, with behaviours the tests control.
enum TestMethods {
    /// Answers when its gate opens.
    static let wait = VarlinkMethod<GateParameters, GateReply>("io.discoverd.Test.Wait")
    /// With more: sends `count` replies, then waits for its gate and ends.
    static let stream = VarlinkMethod<GateParameters, GateReply>("io.discoverd.Test.Stream")
    /// With more: sends `count` replies of `size` bytes at once, then runs until cancelled; a slow reader gets
    /// `SubscriberTooSlow`.
    static let flood = VarlinkMethod<GateParameters, GateReply>("io.discoverd.Test.Flood")
    /// Like `flood`, without a too-slow error: a slow reader loses its connection.
    static let floodWithoutError = VarlinkMethod<GateParameters, GateReply>("io.discoverd.Test.FloodWithoutError")

    /// Answered synchronously (like a cache hit) when its gate is already open, else like `wait`.
    static let instant = VarlinkMethod<GateParameters, GateReply>("io.discoverd.Test.Instant")

    static func routes(_ gates: Gates) -> RouteTable {
        var routes = RouteTable()
        routes.register(wait) { parameters, _ in
            gates.markStarted(parameters.gate)
            await gates.wait(parameters.gate)
            return GateReply(gate: parameters.gate)
        }
        routes.register(stream) { parameters, context in
            gates.markStarted(parameters.gate)
            for index in 0..<(parameters.count ?? 0) { try context.send(GateReply(gate: parameters.gate, index: index)) }
            await gates.wait(parameters.gate)
            return GateReply(gate: parameters.gate)
        }
        let floodBody: @Sendable (GateParameters, CallContext) async throws -> GateReply = { parameters, context in
            gates.markStarted(parameters.gate)
            let padding = String(repeating: "x", count: parameters.size ?? 100)
            for index in 0..<(parameters.count ?? 0) {
                try context.send(GateReply(gate: parameters.gate, index: index, padding: padding))
            }
            while true { try await Task.sleep(for: .seconds(1)) }
        }
        routes.register(flood, whenReaderTooSlow: .subscriberTooSlow, floodBody)
        routes.register(instant) { parameters, _ in
            gates.markStarted(parameters.gate)
            await gates.wait(parameters.gate)
            return GateReply(gate: parameters.gate)
        }
        routes.registerImmediate(instant) { parameters, _ in
            guard gates.isOpen(parameters.gate) else { return nil }
            gates.markStarted("immediate " + parameters.gate)
            return ImmediateReply(
                bytes: try! VarlinkReply.encode(GateReply(gate: parameters.gate)),
                afterWrite: { gates.markStarted("after " + parameters.gate) })
        }
        routes.register(floodWithoutError, floodBody)
        return routes
    }
}
