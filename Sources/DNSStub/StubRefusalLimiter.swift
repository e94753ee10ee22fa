import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Response-rate limiting of the stub's refusals (the bare REFUSED a client outside `[stub] allow` gets over UDP).
///
/// Each network prefix (/24 for IPv4, /56 for IPv6, as Unbound's and BIND's RRL group clients) may get `perSecond`
/// refusals a second; past it, and past `globalPerSecond` for everyone together, queries are dropped silently. A
/// refusal is never larger than the query it answers (header and question, no OPT), so even a spoofed flood is
/// reflected with an amplification factor of at most 1 in bytes and at most `perSecond` packets a second per
/// victim prefix. The table has a fixed number of slots (a prefix takes the slot of its hash; a collision shares a
/// budget), so a flood from many addresses costs no memory.
final class StubRefusalLimiter: Sendable {
    private struct Slot {
        var prefix: (UInt64, UInt64) = (0, 0)
        var second: UInt32 = 0
        var count: UInt32 = 0
    }

    private struct State {
        var slots: [Slot]
        var second: UInt32 = 0
        var total: UInt32 = 0
    }

    static let slotCount = 4096
    let perSecond: UInt32
    let globalPerSecond: UInt32
    private let state: Mutex<State>

    init(perSecond: Int, globalPerSecond: Int? = nil) {
        self.perSecond = UInt32(clamping: max(0, perSecond))
        self.globalPerSecond = UInt32(clamping: max(0, globalPerSecond ?? perSecond * 200))
        state = Mutex(State(slots: Array(repeating: Slot(), count: Self.slotCount)))
    }

    /// Whether `client` may be sent one more refusal now (counts it when so).
    func admit(_ client: StubClient, now: UInt32 = StubRefusalLimiter.monotonicSecond()) -> Bool {
        guard perSecond > 0 else { return false }
        let prefix = Self.prefix(of: client)
        let index = Int(truncatingIfNeeded: Self.mix(prefix) % UInt64(Self.slotCount))
        return state.withLock { state in
            if state.second != now {
                state.second = now
                state.total = 0
            }
            guard state.total < globalPerSecond else { return false }
            var slot = state.slots[index]
            if slot.prefix != prefix || slot.second != now {
                slot = Slot(prefix: prefix, second: now, count: 0)
            }
            guard slot.count < perSecond else { return false }
            slot.count += 1
            state.slots[index] = slot
            state.total += 1
            return true
        }
    }

    /// The client's /24 (IPv4) or /56 (IPv6), with the family in the last byte so the two never mix.
    static func prefix(of client: StubClient) -> (UInt64, UInt64) {
        var raw = client.raw
        withUnsafeMutableBytes(of: &raw) { bytes in
            switch client.family {
            case .v4:
                for index in 3..<16 { bytes[index] = 0 }
                bytes[15] = 4
            case .v6:
                for index in 7..<16 { bytes[index] = 0 }
                bytes[15] = 6
            case .none:
                for index in 0..<16 { bytes[index] = 0 }
            }
        }
        return raw
    }

    private static func mix(_ prefix: (UInt64, UInt64)) -> UInt64 {
        var x = prefix.0 ^ (prefix.1 &* 0x9E37_79B9_7F4A_7C15)
        x ^= x >> 33
        x = x &* 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        return x
    }

    static func monotonicSecond() -> UInt32 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt32(truncatingIfNeeded: now.tv_sec)
    }
}
