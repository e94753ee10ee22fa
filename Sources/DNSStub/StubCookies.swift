import DNSCore
import Resolver

#if canImport(Glibc)
import Glibc
#endif

/// DNS Cookies (RFC 7873) with interoperable server cookies (RFC 9018), for a stub that listens beyond loopback.
///
/// A client that sends a COOKIE option gets its client cookie back with a fresh server cookie: version 1, three
/// reserved bytes, a timestamp and SipHash-2-4 over the client cookie, those fields and the client's address,
/// keyed with a secret made at start. A client can then tell our replies from off-path forgeries, and a server
/// cookie it sends back proves its address was not spoofed (``verify(_:client:now:)``). A malformed COOKIE option
/// gets FORMERR (RFC 7873 §5.2.2). Clients outside `[stub] allow` never get a cookie: their refusal must stay no
/// larger than their query.
struct StubCookies: Sendable {
    /// The SipHash key, 16 random bytes.
    let secret: (UInt64, UInt64)

    init(secret: (UInt64, UInt64)? = nil) {
        if let secret {
            self.secret = secret
        } else {
            // SystemRandomNumberGenerator reads the kernel's CSPRNG (getrandom) on Linux.
            var random = SystemRandomNumberGenerator()
            self.secret = (random.next(), random.next())
        }
    }

    /// What a query says about cookies.
    enum QueryCookie: Equatable {
        /// No OPT record or no COOKIE option.
        case none
        /// The client cookie (8 bytes), the server cookie it sent back (empty or 8 to 32 bytes), and the UDP
        /// payload size of its OPT record.
        case present(client: [UInt8], server: [UInt8], payload: Int)
        /// A COOKIE option of an impossible length: FORMERR.
        case malformed
    }

    static let optionCode: UInt16 = 10

    /// Finds the COOKIE option of a query. Messages that are no query or are cut short are `none`: the responder
    /// answers those as it always does.
    static func cookie(in bytes: [UInt8]) -> QueryCookie {
        guard bytes.count >= 12, bytes[2] & 0x80 == 0, bytes[4] == 0, bytes[5] == 1,
            let found = EDNSOptionScan.find(optionCode, in: bytes)
        else { return .none }
        // RFC 7873 §5.2.2: 8 bytes, or 16 to 40.
        guard found.value.count == 8 || (16...40).contains(found.value.count) else { return .malformed }
        return .present(
            client: Array(found.value.prefix(8)), server: Array(found.value.dropFirst(8)), payload: found.payloadSize)
    }

    /// The 16-byte server cookie for `client` (RFC 9018 §4.2).
    func serverCookie(clientCookie: [UInt8], client: StubClient, now: UInt32) -> [UInt8] {
        let head: [UInt8] = [1, 0, 0, 0, UInt8(now >> 24), UInt8(now >> 16 & 0xFF), UInt8(now >> 8 & 0xFF), UInt8(now & 0xFF)]
        let hash = SipHash24.hash(clientCookie + head + (client.bytes ?? []), key: secret)
        return head + withUnsafeBytes(of: hash.littleEndian) { Array($0) }
    }

    /// Whether `server` is a cookie we made for this client in the last hour (RFC 9018 §4.3; 5 minutes ahead
    /// allowed for clock steps).
    func verify(_ server: [UInt8], clientCookie: [UInt8], client: StubClient, now: UInt32) -> Bool {
        guard server.count == 16, server[0] == 1 else { return false }
        let stamp = UInt32(server[4]) << 24 | UInt32(server[5]) << 16 | UInt32(server[6]) << 8 | UInt32(server[7])
        let age = Int64(now) - Int64(stamp)
        guard age <= 3600, age >= -300 else { return false }
        return serverCookie(clientCookie: clientCookie, client: client, now: stamp) == server
    }

    /// `reply` with the COOKIE option (client cookie and a fresh server cookie) added to its OPT record, when the
    /// OPT record is the last record (as the stub writes it) and the result fits in `limit`; else `reply`.
    func adding(to reply: [UInt8], clientCookie: [UInt8], client: StubClient, now: UInt32, limit: Int) -> [UInt8] {
        guard let optStart = Self.finalOPT(in: reply) else { return reply }
        let server = serverCookie(clientCookie: clientCookie, client: client, now: now)
        let option: [UInt8] = [0, UInt8(Self.optionCode), 0, UInt8(clientCookie.count + server.count)] + clientCookie + server
        guard reply.count + option.count <= limit else { return reply }
        var out = reply
        let lengthAt = optStart + 9
        let length = (Int(out[lengthAt]) << 8 | Int(out[lengthAt + 1])) + option.count
        out[lengthAt] = UInt8(length >> 8)
        out[lengthAt + 1] = UInt8(length & 0xFF)
        out.append(contentsOf: option)
        return out
    }

    /// Where the OPT record starts when it is the message's last record.
    static func finalOPT(in bytes: [UInt8]) -> Int? {
        var last: EDNSOptionScan.Record?
        guard let end = EDNSOptionScan.walkRecords(bytes, { last = $0; return true }), end == bytes.count,
            let last, Int(bytes[last.fixed]) << 8 | Int(bytes[last.fixed + 1]) == 41, bytes[last.start] == 0
        else { return nil }
        // Our OPT is owned by the root: one zero byte, so its fixed part starts right after it.
        return last.start
    }
}

/// SipHash-2-4 (Aumasson and Bernstein), 64-bit output, as RFC 9018 uses it.
enum SipHash24 {
    static func hash(_ message: [UInt8], key: (UInt64, UInt64)) -> UInt64 {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ key.0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ key.1
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ key.0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ key.1
        func round() {
            v0 = v0 &+ v1; v1 = (v1 << 13) | (v1 >> 51); v1 ^= v0; v0 = (v0 << 32) | (v0 >> 32)
            v2 = v2 &+ v3; v3 = (v3 << 16) | (v3 >> 48); v3 ^= v2
            v0 = v0 &+ v3; v3 = (v3 << 21) | (v3 >> 43); v3 ^= v0
            v2 = v2 &+ v1; v1 = (v1 << 17) | (v1 >> 47); v1 ^= v2; v2 = (v2 << 32) | (v2 >> 32)
        }
        let blocks = message.count / 8
        for block in 0..<blocks {
            var m: UInt64 = 0
            for index in 0..<8 { m |= UInt64(message[block * 8 + index]) << (8 * UInt64(index)) }
            v3 ^= m
            round()
            round()
            v0 ^= m
        }
        var last = UInt64(message.count & 0xFF) << 56
        for index in 0..<(message.count % 8) { last |= UInt64(message[blocks * 8 + index]) << (8 * UInt64(index)) }
        v3 ^= last
        round()
        round()
        v0 ^= last
        v2 ^= 0xFF
        round()
        round()
        round()
        round()
        return v0 ^ v1 ^ v2 ^ v3
    }
}

extension StubResponder {
    /// ``handle(_:client:overTCP:refreshes:later:)`` with DNS Cookies when `cookies` is set (the stub listens
    /// beyond loopback): an allowed client that sent a COOKIE option gets it back with a server cookie in every
    /// reply, a malformed option gets FORMERR; everything else is answered as without cookies.
    func handle(
        _ bytes: [UInt8], client: StubClient, overTCP: Bool, cookies: StubCookies?, refreshes: inout PendingRefreshes,
        later: () -> @Sendable ([UInt8]) -> Void
    ) -> Immediate {
        guard let cookies else {
            return handle(bytes, client: client, overTCP: overTCP, refreshes: &refreshes, later: later)
        }
        switch StubCookies.cookie(in: bytes) {
        case .none:
            return handle(bytes, client: client, overTCP: overTCP, refreshes: &refreshes, later: later)
        case .malformed:
            guard isAllowed(client) else { return .drop }
            let id = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
            let problem = StubQueryProblem.formatError(
                id: id, recursionDesired: bytes[2] & 0x01 != 0, question: nil, reason: "malformed COOKIE option")
            return StubReply.problem(problem).map(Immediate.reply) ?? .drop
        case .present(let clientCookie, _, let payload):
            // Strangers: a bare refusal, never larger than their query.
            guard isAllowed(client) else {
                return handle(bytes, client: client, overTCP: overTCP, refreshes: &refreshes, later: later)
            }
            let limit = overTCP ? 65535 : min(max(512, payload), Int(StubReply.ourPayloadSize))
            let add: @Sendable ([UInt8]) -> [UInt8] = { reply in
                cookies.adding(
                    to: reply, clientCookie: clientCookie, client: client, now: UInt32(truncatingIfNeeded: time(nil)),
                    limit: limit)
            }
            let outcome = handle(bytes, client: client, overTCP: overTCP, refreshes: &refreshes) {
                let send = later()
                return { reply in send(add(reply)) }
            }
            if case .reply(let reply) = outcome { return .reply(add(reply)) }
            return outcome
        }
    }
}
