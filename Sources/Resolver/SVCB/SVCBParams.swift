import DNSCore

/// A SvcParam this parser does not interpret, with its raw value.
public struct SVCBUnknownParam: Hashable, Sendable {
    /// The key number.
    public var key: SVCBParamKey
    /// The raw value bytes.
    public var value: [UInt8]

    /// Creates an unknown parameter.
    public init(key: SVCBParamKey, value: [UInt8]) {
        self.key = key
        self.value = value
    }
}

/// The validated SvcParams of one ServiceMode SVCB/HTTPS record.
///
/// ldns 1.8.3 accepts any SvcParams blob (unsorted or duplicate keys, bad lengths, trailing bytes), so the
/// blob is parsed here and every rule of RFC 9460 §2.2 and §7 (and RFC 9461 §5 for dohpath) is applied.
public struct SVCBParams: Hashable, Sendable {
    /// Every key present, in wire order (strictly increasing).
    public var keys: [SVCBParamKey] = []
    /// `mandatory` (§8): the listed keys, strictly increasing, never key 0 itself.
    public var mandatory: [SVCBParamKey] = []
    /// `alpn` (§7.1.1): the ALPN protocol ids as raw bytes, in record order.
    public var alpnIDs: [[UInt8]] = []
    /// `no-default-alpn` (§7.1.1) is present.
    public var noDefaultAlpn = false
    /// `port` (§7.2).
    public var port: UInt16?
    /// `ipv4hint` (§7.3) as dotted quads.
    public var ipv4hint: [String] = []
    /// `ech` (§14.3.2, draft-ietf-tls-svcb-ech): the opaque ECHConfigList.
    public var ech: [UInt8]?
    /// `ipv6hint` (§7.3) in RFC 5952 text.
    public var ipv6hint: [String] = []
    /// `dohpath` (RFC 9461 §5): a UTF-8 URI template.
    public var dohpath: String?
    /// Keys without a registered format here, in wire order.
    public var unknown: [SVCBUnknownParam] = []

    /// Creates an empty parameter list.
    public init() {}

    /// Whether `key` is present.
    public func contains(_ key: SVCBParamKey) -> Bool { keys.contains(key) }

    /// The ALPN ids as text: UTF-8 when valid, otherwise with each octet outside printable ASCII written as `\DDD`.
    public var alpn: [String] { alpnIDs.map(Self.alpnText) }

    /// Parses and validates a SvcParams blob: the RDATA after TargetName (RFC 9460 §2.2).
    ///
    /// - Parameter bytes: the blob; may be empty.
    /// - Throws: `SVCBError` when the end of the RDATA falls inside a SvcParam, keys are not strictly
    ///   increasing, or any value does not have the format of its key.
    public static func parse(_ bytes: [UInt8]) throws(SVCBError) -> SVCBParams {
        try parse(bytes, from: 0)
    }

    static func parse(_ bytes: [UInt8], from start: Int) throws(SVCBError) -> SVCBParams {
        var params = SVCBParams()
        var offset = start
        var previous: UInt16?
        while offset < bytes.count {
            // RFC 9460 §2.2: "the end of the RDATA occurs within a SvcParam" is malformed.
            guard bytes.count - offset >= 4 else {
                throw SVCBError(.paramOverrun, "RDATA ends inside a SvcParam key or length")
            }
            let keyValue = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let length = Int(UInt16(bytes[offset + 2]) << 8 | UInt16(bytes[offset + 3]))
            offset += 4
            let key = SVCBParamKey(keyValue)
            // RFC 9460 §2.2: keys "not in strictly increasing numeric order" (which also forbids duplicates).
            if let previous, keyValue <= previous {
                throw SVCBError(
                    .keysNotIncreasing, key: key, "key \(key) follows key \(SVCBParamKey(previous))")
            }
            previous = keyValue
            guard bytes.count - offset >= length else {
                throw SVCBError(.paramOverrun, key: key, "value of \(length) bytes runs past the RDATA")
            }
            let value = Array(bytes[offset..<offset + length])
            offset += length
            params.keys.append(key)
            try params.apply(key, value)
        }
        return params
    }

    private mutating func apply(_ key: SVCBParamKey, _ value: [UInt8]) throws(SVCBError) {
        func invalid(_ message: String) -> SVCBError { SVCBError(.invalidValue, key: key, message) }
        switch key {
        case .mandatory:
            // RFC 9460 §8: one or more keys, 2 octets each, "in strictly increasing numeric order"; the key
            // "mandatory" itself "MUST NOT appear in its own value-list".
            guard !value.isEmpty, value.count % 2 == 0 else { throw invalid("not a non-empty list of 2-octet keys") }
            var listed: [SVCBParamKey] = []
            for index in stride(from: 0, to: value.count, by: 2) {
                let listedKey = SVCBParamKey(UInt16(value[index]) << 8 | UInt16(value[index + 1]))
                if listedKey == .mandatory { throw invalid("lists the key mandatory itself") }
                if let last = listed.last, listedKey <= last {
                    throw invalid("keys are not strictly increasing (or repeat)")
                }
                listed.append(listedKey)
            }
            mandatory = listed
        case .alpn:
            // RFC 9460 §7.1.1: at least one alpn-id, each prefixed by its 1-octet length, exactly filling the
            // value; an ALPN protocol id is 1 to 255 octets (RFC 7301 §3.1).
            guard !value.isEmpty else { throw invalid("empty alpn list") }
            var ids: [[UInt8]] = []
            var index = 0
            while index < value.count {
                let length = Int(value[index])
                index += 1
                guard length > 0 else { throw invalid("empty alpn-id") }
                guard value.count - index >= length else { throw invalid("alpn-id runs past the value") }
                ids.append(Array(value[index..<index + length]))
                index += length
            }
            alpnIDs = ids
        case .noDefaultAlpn:
            // RFC 9460 §7.1.1: "the value ... MUST be empty".
            guard value.isEmpty else { throw invalid("value must be empty") }
            noDefaultAlpn = true
        case .port:
            // RFC 9460 §7.2: a single 2-octet port number.
            guard value.count == 2 else { throw invalid("value must be exactly 2 octets") }
            port = UInt16(value[0]) << 8 | UInt16(value[1])
        case .ipv4hint:
            // RFC 9460 §7.3: one or more IPv4 addresses; "an empty list of addresses is invalid".
            guard !value.isEmpty, value.count % 4 == 0 else { throw invalid("not a non-empty list of IPv4 addresses") }
            ipv4hint = stride(from: 0, to: value.count, by: 4).map { IPAddressText.ipv4(value[$0..<$0 + 4]) }
        case .ech:
            // Opaque ECHConfigList; interpreted by the TLS client, not here.
            ech = value
        case .ipv6hint:
            guard !value.isEmpty, value.count % 16 == 0 else {
                throw invalid("not a non-empty list of IPv6 addresses")
            }
            ipv6hint = stride(from: 0, to: value.count, by: 16).map { IPAddressText.ipv6(value[$0..<$0 + 16]) }
        case .dohpath:
            // RFC 9461 §5: a relative URI template encoded in UTF-8.
            guard let text = String(validating: value, as: UTF8.self) else { throw invalid("not UTF-8") }
            dohpath = text
        default:
            unknown.append(SVCBUnknownParam(key: key, value: value))
        }
    }

    static func alpnText(_ id: [UInt8]) -> String {
        if let text = String(validating: id, as: UTF8.self), !text.unicodeScalars.contains(where: { $0.value < 0x20 })
        {
            return text
        }
        var out: [UInt8] = []
        for octet in id {
            if octet >= 0x20 && octet <= 0x7E {
                out.append(octet)
            } else {
                out.append(UInt8(ascii: "\\"))
                out.append(48 + octet / 100)
                out.append(48 + (octet / 10) % 10)
                out.append(48 + octet % 10)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// One SVCB or HTTPS record (RFC 9460 §2.2): SvcPriority, TargetName and SvcParams.
public struct SVCBRecord: Hashable, Sendable {
    /// 0 is AliasMode, anything else ServiceMode (RFC 9460 §2.4.1).
    public var priority: UInt16
    /// The TargetName as written (`.` is the root; its meaning depends on the mode, §2.5).
    public var target: DNSName
    /// The parameters; always empty in AliasMode, where they are ignored (§2.4.2).
    public var params: SVCBParams

    /// Creates a record.
    public init(priority: UInt16, target: DNSName, params: SVCBParams = SVCBParams()) {
        self.priority = priority
        self.target = target
        self.params = params
    }

    /// Whether this is an AliasMode record (SvcPriority 0).
    public var isAliasMode: Bool { priority == 0 }

    /// Parses SVCB/HTTPS RDATA from wire bytes.
    ///
    /// In AliasMode the bytes after TargetName are not examined: RFC 9460 §2.4.2 says recipients "MUST ignore
    /// any SvcParams that are present".
    ///
    /// - Parameter rdata: the record's RDATA.
    /// - Throws: `SVCBError` for a truncated record, a TargetName that is not an uncompressed name
    ///   (§2.2 "uncompressed, fully-qualified TargetName"), or malformed SvcParams.
    public static func parse(rdata: [UInt8]) throws(SVCBError) -> SVCBRecord {
        guard rdata.count >= 2 else { throw SVCBError(.truncated, "RDATA shorter than SvcPriority") }
        let priority = UInt16(rdata[0]) << 8 | UInt16(rdata[1])
        let target: DNSName
        let next: Int
        do {
            (target, next) = try DNSName.readUncompressed(rdata, at: 2, end: rdata.count)
        } catch {
            let code: SVCBError.Code = error.code == .truncated ? .truncated : .invalidTargetName
            throw SVCBError(code, "TargetName: \(error.message)")
        }
        if priority == 0 {
            return SVCBRecord(priority: 0, target: target)
        }
        return SVCBRecord(priority: priority, target: target, params: try SVCBParams.parse(rdata, from: next))
    }
}

extension ResourceRecord {
    /// The decoded SVCB/HTTPS data of this record.
    ///
    /// - Throws: `SVCBError` when this is not an SVCB or HTTPS record or its RDATA is malformed.
    public func svcb() throws(SVCBError) -> SVCBRecord {
        guard type == .https || type == .svcb else { throw SVCBError(.invalidValue, "not an SVCB or HTTPS record") }
        return try SVCBRecord.parse(rdata: rdata)
    }
}
