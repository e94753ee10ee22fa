import DNSCore
import DNSSDModel


/// The fields of an SRV record (RFC 2782).
public struct SRVData: Hashable, Sendable {
    public var priority: UInt16
    public var weight: UInt16
    public var port: UInt16
    /// The target host, lowercased without trailing dot; empty for `.` ("decidedly not available", RFC 2782).
    public var target: String

    /// Decodes SRV rdata: three 16-bit fields and an uncompressed name filling the rest.
    /// - Throws: `lookupFailed` for rdata that is not exactly that.
    public init(rdata: [UInt8]) throws(WideAreaError) {
        guard rdata.count >= 7 else { throw WideAreaError(.lookupFailed, "malformed SRV record: \(rdata.count) bytes") }
        priority = UInt16(rdata[0]) << 8 | UInt16(rdata[1])
        weight = UInt16(rdata[2]) << 8 | UInt16(rdata[3])
        port = UInt16(rdata[4]) << 8 | UInt16(rdata[5])
        let labels: [[UInt8]]
        let next: Int
        do {
            (labels, next) = try DNSName.readLabels(rdata, at: 6)
        } catch {
            throw WideAreaError(.lookupFailed, "malformed SRV record: \(error.message)")
        }
        guard next == rdata.count else { throw WideAreaError(.lookupFailed, "malformed SRV record: bytes after target") }
        target = labels.map { String(decoding: DNSName.lowercased(label: $0), as: UTF8.self) }.joined(separator: ".")
    }

    /// The SRV to use among several: lowest priority, then highest weight (a browse reports one host and port).
    static func preferred(_ records: [SRVData]) -> SRVData? {
        records.min { ($0.priority, UInt16.max - $0.weight) < ($1.priority, UInt16.max - $1.weight) }
    }
}

extension TXTRecord {
    /// Decodes TXT rdata (one or more length-prefixed strings, RFC 1035 §3.3.14); nil when a length runs past the
    /// end.
    static func fromRData(_ rdata: [UInt8]) -> TXTRecord? {
        var strings: [[UInt8]] = []
        var index = 0
        while index < rdata.count {
            let length = Int(rdata[index])
            guard index + 1 + length <= rdata.count else { return nil }
            strings.append(Array(rdata[(index + 1)..<(index + 1 + length)]))
            index += 1 + length
        }
        return TXTRecord(strings: strings)
    }
}
