import DNSCore
@testable import Resolver

/// Bytes from hex text; spaces and newlines are ignored. Test data only.
func wireBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.utf8).filter { !($0 == 32 || $0 == 10) }
    precondition(digits.count % 2 == 0, "odd number of hex digits in test data")
    func value(_ digit: UInt8) -> UInt8 {
        switch digit {
        case 48...57: return digit - 48
        case 97...102: return digit - 87
        case 65...70: return digit - 55
        default: preconditionFailure("bad hex digit in test data")
        }
    }
    return stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
}

/// Builds DNS messages byte by byte for tests, so every field is explicit.
struct TestMessage {
    var id: UInt16 = 0x1234
    var flags: UInt16 = 0x8180  // QR, RD, RA
    var questions: [[UInt8]] = []
    var answers: [[UInt8]] = []
    var authority: [[UInt8]] = []
    var additional: [[UInt8]] = []

    static func u16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
    static func u32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    static func name(_ text: String) -> [UInt8] {
        // Test names are valid by construction.
        (try? DNSName(text))?.wire ?? []
    }

    static func question(_ name: [UInt8], _ type: RRType, _ rrClass: RRClass = .in) -> [UInt8] {
        name + u16(type.rawValue) + u16(rrClass.rawValue)
    }

    static func record(
        _ name: [UInt8], _ type: RRType, _ rrClass: RRClass = .in, ttl: UInt32 = 300, rdata: [UInt8]
    ) -> [UInt8] {
        name + u16(type.rawValue) + u16(rrClass.rawValue) + u32(ttl) + u16(UInt16(rdata.count)) + rdata
    }

    /// An OPT pseudo-record (RFC 6891 §6.1.2).
    /// An OPT record; `options` is its RDATA (``ednsOption(_:_:)``s one after the other).
    static func opt(
        udpSize: UInt16 = 1232, extendedRCode: UInt8 = 0, version: UInt8 = 0, dnssecOK: Bool = false,
        options: [UInt8] = []
    ) -> [UInt8] {
        [0] + u16(41) + u16(udpSize) + [extendedRCode, version] + u16(dnssecOK ? 0x8000 : 0)
            + u16(UInt16(options.count)) + options
    }

    /// One EDNS option: code, length, value (RFC 6891 §6.1.2).
    static func ednsOption(_ code: UInt16, _ value: [UInt8]) -> [UInt8] { u16(code) + u16(UInt16(value.count)) + value }

    var bytes: [UInt8] {
        var out = Self.u16(id) + Self.u16(flags)
        out += Self.u16(UInt16(questions.count)) + Self.u16(UInt16(answers.count))
        out += Self.u16(UInt16(authority.count)) + Self.u16(UInt16(additional.count))
        for part in questions + answers + authority + additional { out += part }
        return out
    }
}
