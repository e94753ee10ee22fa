import CLDNS
import DNSCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension ResourceRecord {
    /// The RDATA in presentation format, as dig, kdig and drill print it (`1 . alpn=h3,h2` for an HTTPS record,
    /// `ns.lab.test. hostmaster.lab.test. 2026112101 3600 600 86400 60` for an SOA), written by ldns
    /// (`ldns_rr2str`); RFC 3597's `\# LENGTH HEX` for a type ldns does not know or RDATA it cannot read.
    ///
    /// With `comments`, ldns's notes follow some types' data after a `;` as drill prints them (a DNSKEY's key tag and
    /// size); without, the text is RDATA alone, as a zone file or a script wants it.
    ///
    /// For people and scripts that print records (`discover query`); no answer path uses it.
    public func presentationData(comments: Bool = false) -> String {
        // Written only when it is the answer.
        var generic: String {
            let digits = rdata.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            return "\\# \(rdata.count)" + (rdata.isEmpty ? "" : " " + digits)
        }
        // The record as ldns would read it from a message: owner, type, class, TTL, RDLENGTH, RDATA. The RDATA came
        // out of ldns's own parse (`LDNSRecords`), with names uncompressed.
        guard let owner = try? DNSName(name), rdata.count <= Int(UInt16.max) else { return generic }
        var wire = owner.wire
        let fields = [type.rawValue, self.class.rawValue, UInt16(ttl >> 16), UInt16(ttl & 0xffff), UInt16(rdata.count)]
        for value in fields {
            wire.append(UInt8(value >> 8))
            wire.append(UInt8(value & 0xff))
        }
        wire.append(contentsOf: rdata)
        var rr: UnsafeMutablePointer<ldns_rr>? = nil
        var position = 0
        let status = wire.withUnsafeBufferPointer { buffer in
            ldns_wire2rr(&rr, buffer.baseAddress, buffer.count, &position, LDNS_SECTION_ANSWER)
        }
        guard let rr else { return generic }
        defer { ldns_rr_free(rr) }
        let format = comments ? cldns_format_with_comments() : cldns_format_without_comments()
        guard status == LDNS_STATUS_OK, position == wire.count, let text = ldns_rr2str_fmt(format, rr) else {
            return generic
        }
        defer { free(text) }
        // owner TAB ttl TAB class TAB type TAB rdata, and a newline.
        let line = String(cString: text)
        let columns = line.split(separator: "\t", maxSplits: 4, omittingEmptySubsequences: false)
        guard columns.count == 5 else { return generic }
        var data = columns[4]
        while let last = data.last, last == "\n" || last == " " { data.removeLast() }
        return String(data)
    }
}
