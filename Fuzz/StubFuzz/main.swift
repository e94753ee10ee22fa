// libFuzzer entry point for the DNS stub's input handling: arbitrary bytes as a query message (StubQuery.parse,
// then a reply assembled for it at every size limit), as a name inside mDNS RDATA for the discovery proxy's
// rewriting, and as a reverse-lookup name. Malformed input must only ever throw or return nil.
//
// Built outside SwiftPM by Scripts/fuzz: this file and the discovery proxy's rewriting
// (Sources/DNSStub/DiscoveryProxy.swift) form one module that imports DNSCore, the wire module without C.

import DNSCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    switch Result(catching: { () throws(StubQueryProblem) in try StubQuery.parse(bytes) }) {
    case .success(let query):
        let record = ResourceRecord(name: query.name.text, type: query.type, ttl: 60, rdata: Array(bytes.prefix(64)))
        let part = AnswerPart(sections: EncodedSections(answer: [record], authority: [record]), ttl: 30)
        for limit in [12, 512, StubReply.sizeLimit(for: query, overTCP: false), 65535] {
            let (reply, truncated) = StubReply.make(
                to: query, code: .noError, parts: [part], includeDNSSEC: bytes.count % 2 == 0,
                error: .staleAnswer("fuzz"), limit: limit)
            precondition(truncated || reply.count <= max(limit, 12 + query.questionWire.count + 64))
        }
        _ = LocalZones.isLocal(query.name)
        _ = LocalZones.reverseAddress(query.name)
    case .failure(let problem):
        _ = StubReply.problem(problem)
    }

    if let zone = try? DNSName("proxy.example") {
        _ = DiscoveryProxy.rewriteWireName(bytes[...], zone: zone)
        let srv = ResourceRecord(name: "x.local.", type: .srv, ttl: 120, rdata: bytes)
        _ = DiscoveryProxy.rewrite(srv, zone: zone)
    }
    return 0
}
