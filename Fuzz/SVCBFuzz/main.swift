// libFuzzer entry point: feeds arbitrary bytes to the SvcParams/SVCB RDATA parser, to RFC 9460 client
// processing, to DNSMessage.parse (CommonReplyParser, else ldns) and ldns's presentation format of what it reads,
// and takes every message that parses for an upstream's reply: the bailiwick scrubber and the DNSSEC cryptography
// (signatures, DS digests, NSEC/NSEC3 denial, through ldns) on whatever records it holds. Any crash, trap or
// sanitizer report is a bug: malformed input must only ever throw or fail a check. Two oracles besides:
// CommonReplyParser is checked against ldns (what it accepts, ldns must accept and read the same way), and the
// scrubber's shortcuts against its rules.
//
// Built outside SwiftPM by Fuzz/build-and-run.sh: this file with Sources/Resolver/Wire (the ldns codec),
// Sources/Resolver/SVCB, the scrubber, the DNSSEC cryptography and DoHPathTemplate as one module that imports
// DNSCore.

import DNSCore
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    // 1. The whole input as one SVCB/HTTPS RDATA, and as a bare SvcParams blob.
    if let record = try? SVCBRecord.parse(rdata: bytes), !record.isAliasMode {
        let binding = ServiceBinding(record: record, ownerName: "fuzz.example.")
        _ = binding.effectiveALPN
        _ = binding.supportsH3
        if let dohpath = record.params.dohpath { dohTemplate(dohpath) }
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
            // What `discover query` prints of a server's reply: ldns writes any record it read.
            _ = record.presentationData()
            _ = record.presentationData(comments: true)
        }
        var chain = AliasChain(start: message.question?.name ?? ".")
        _ = try? chain.followCNAMEs(type: .https, in: message.answer)
        _ = HTTPSProcessing.process(records: message.answer, ownerName: message.question?.name ?? ".")
        upstreamReply(message)
    }

    // 4. Names: the input as presentation text and as wire format; the text as a DoH URI template too.
    if let text = String(validating: bytes, as: UTF8.self) {
        if let name = try? DNSName(text) { _ = try? DNSName(wire: name.wire) }
        dohTemplate(text)
    }
    _ = try? DNSName(wire: bytes)
    return 0
}

/// A DDR dohpath or an operator's DoH path (DoHPathTemplate): what it accepts must make `:path` values an HTTP/2
/// library sends as they are: visible ASCII, no template syntax left, the GET's `dns` parameter exactly once.
func dohTemplate(_ text: String) {
    guard let template = try? DoHPathTemplate(text) else { return }
    let get = template.getPath(dns: "QUJD")
    for path in [template.postPath, get] {
        precondition(path.hasPrefix("/"), "a DoH path that is not absolute: \(path)")
        precondition(
            path.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "{") && $0 != UInt8(ascii: "}") },
            "a DoH path with a character a :path must not carry: \(path.debugDescription)")
    }
    let parameters = get.split(separator: "?", maxSplits: 1).dropFirst().first?.split(separator: "&") ?? []
    precondition(parameters.filter { $0.hasPrefix("dns=") }.count == 1, "GET without exactly one dns=: \(get)")
    precondition(parameters.contains("dns=QUJD"), "GET lost its query: \(get)")
}

/// The message as an upstream's reply to its own question: what the resolver does with one before caching it.
func upstreamReply(_ message: DNSMessage) {
    guard let question = message.question else { return }
    // The bailiwick rules, with and without their shortcuts: the same result, and every record accounted for.
    let scrubbed = ReplyScrubber.scrub(message, question: question, maximumHops: 8)
    let rules = ReplyScrubber.scrubByTheRules(
        answer: message.answer, authority: message.authority, additionalCount: message.additional.count,
        question: question, maximumHops: 8)
    precondition(scrubbed == rules, "the scrubber's shortcut disagrees with its rules")
    let total = message.answer.count + message.authority.count + message.additional.count
    // A CNAME may be made from a DNAME when the reply had none that agreed (RFC 6672 §3.1): kept, not given.
    let made = scrubbed.answer.filter { !message.answer.contains($0) }
    precondition(
        made.allSatisfy { $0.type == .cname } && (made.isEmpty || scrubbed.answer.contains { $0.type.rawValue == 39 }),
        "the scrubber kept a record it was not given")
    precondition(
        scrubbed.answer.count - made.count + scrubbed.authority.count + scrubbed.dropped == total,
        "the scrubber lost count")
    precondition(
        scrubbed.authority.allSatisfy(message.authority.contains), "the scrubber kept a record it was not given")

    // DNSSEC on whatever the records hold, as the validator calls it (a bounded number of each, as one reply could
    // carry no more). NSEC3 above the RFC 9276 limit is never hashed by the validator, so not here either.
    let all = message.answer + message.authority
    let signatures = Array(all.filter { $0.type.rawValue == 46 }.prefix(8))
    let keys = Array(all.filter { $0.type.rawValue == 48 }.prefix(4))
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    for signature in signatures.prefix(4) {
        _ = DNSSECCrypto.signerOf(signature)
        _ = DNSSECCrypto.labelsOf(signature)
        guard let covered = DNSSECCrypto.typeCovered(signature) else { continue }
        let rrset = all.filter { $0.name == signature.name && $0.type == covered && $0.class == signature.class }
        if !rrset.isEmpty {
            _ = DNSSECCrypto.verify(rrset: rrset, signatures: [signature], keys: keys, now: now)
        }
    }
    for ds in all.filter({ $0.type.rawValue == 43 }).prefix(4) {
        for key in keys { _ = DNSSECCrypto.dsMatches(ds, key: key) }
    }
    let proof = Array(all.filter { $0.type.rawValue == 47 || $0.type.rawValue == 50 }.prefix(8))
    guard !proof.isEmpty else { return }
    for record in proof {
        _ = record.type.rawValue == 47 ? DNSSECCrypto.nsecTypes(record) != nil : DNSSECCrypto.nsec3Types(record) != nil
    }
    _ = DNSSECCrypto.denial(
        name: question.name, type: question.type, nameExists: message.rcode != .nxDomain, proof: proof,
        signatures: signatures)
    guard !proof.contains(where: { DNSSECCrypto.iterationsOf($0) > DNSSECCrypto.maximumNSEC3Iterations }) else {
        return
    }
    _ = DNSSECCrypto.matchingNSEC3(question.name, in: proof.filter { $0.type.rawValue == 50 })
    _ = DNSSECCrypto.covers(question.name, proof: proof)
    if let labels = signatures.first.flatMap(DNSSECCrypto.labelsOf) {
        _ = DNSSECCrypto.provesWildcardExpansion(question.name, labels: labels, proof: proof)
    }
}
