// libFuzzer entry point: feeds arbitrary bytes to the SvcParams/SVCB RDATA parser, to RFC 9460 client
// processing, and to DNSMessage.parse (CommonReplyParser, else ldns). Any crash, trap or sanitizer report is a bug:
// malformed input must only ever throw. CommonReplyParser is also checked against ldns: what it accepts, ldns must
// accept and read the same way.
//
// Built outside SwiftPM by Fuzz/build-and-run.sh: this file with Sources/Resolver/Wire (the ldns codec) and
// Sources/Resolver/SVCB as one module that imports DNSCore.

import DNSCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    // 1. The whole input as one SVCB/HTTPS RDATA, and as a bare SvcParams blob.
    if let record = try? SVCBRecord.parse(rdata: bytes), !record.isAliasMode {
        let binding = ServiceBinding(record: record, ownerName: "fuzz.example.")
        _ = binding.effectiveALPN
        _ = binding.supportsH3
    }
    _ = try? SVCBParams.parse(bytes)

    // 2. The input split into an RRset: each record is prefixed by a 1-byte length.
    var rdatas: [[UInt8]] = []
    var offset = 0
    while offset < bytes.count {
        let length = Int(bytes[offset])
        offset += 1
        let end = min(bytes.count, offset + length)
        rdatas.append(Array(bytes[offset..<end]))
        offset = end
    }
    _ = HTTPSProcessing.process(rdatas: rdatas, ownerName: "fuzz.example.")

    // 3. The input as a DNS message, then every decoder on every record it yields.
    if let header = try? DNSHeader.parse(bytes), let fast = CommonReplyParser.parse(bytes, header: header) {
        precondition(
            fast == (try? DNSMessage.parseWithLDNS(bytes, header: header)), "CommonReplyParser disagrees with ldns")
    }
    if let message = try? DNSMessage.parse(bytes) {
        _ = message.negativeCacheTTL
        _ = message.matches(id: message.id, question: DNSQuestion(name: "fuzz.example.", type: .https))
        for record in message.answer + message.authority + message.additional {
            _ = try? record.ipv4Address()
            _ = try? record.ipv6Address()
            _ = try? record.cnameTarget()
            _ = try? record.soa()
            _ = try? SVCBRecord.parse(rdata: record.rdata)
        }
        var chain = AliasChain(start: message.question?.name ?? ".")
        _ = try? chain.followCNAMEs(type: .https, in: message.answer)
        _ = HTTPSProcessing.process(records: message.answer, ownerName: message.question?.name ?? ".")
    }

    // 4. Names: the input as presentation text and as wire format.
    if let text = String(validating: bytes, as: UTF8.self), let name = try? DNSName(text) {
        _ = try? DNSName(wire: name.wire)
    }
    _ = try? DNSName(wire: bytes)
    return 0
}
