import Foundation
import Testing

@testable import DiscoverAPI

/// The one-pass scanner of the hot methods against the Codable path: every shape it accepts decodes to the same
/// call and parameters, and everything else falls back so the reply (the error in particular) is the same.
@Suite("Varlink call scanner")
struct VarlinkCallScannerTests {
    static let scannable: [String: any ScannableParameters.Type] = [
        "io.discoverd.Resolver.ResolveHTTPS": ResolveHTTPSParameters.self,
        "io.discoverd.Resolver.ResolveAddresses": ResolveAddressesParameters.self,
        "io.discoverd.Resolver.ConnectionPlan": ConnectionPlanParameters.self,
    ]
    static let https = "io.discoverd.Resolver.ResolveHTTPS"
    static let addresses = "io.discoverd.Resolver.ResolveAddresses"
    static let plan = "io.discoverd.Resolver.ConnectionPlan"

    private static func bytes(_ text: String) -> ArraySlice<UInt8> { ArraySlice(Array(text.utf8)) }

    /// The call both ways: scanned (when it can be) and with Codable only.
    private static func both(_ text: String) throws -> (fast: VarlinkCall, codable: VarlinkCall) {
        (try VarlinkCall.decode(bytes(text), scannable: scannable), try VarlinkCall.decode(bytes(text)))
    }

    private static func parameters<P: VarlinkParameters>(_ call: VarlinkCall, _ type: P.Type) -> Result<P, VarlinkError> {
        Result { () throws(VarlinkError) -> P in try call.parameters(P.self) }
    }

    // MARK: - Accepted shapes

    static let acceptedHTTPS: [(String, ResolveHTTPSParameters)] = [
        (#"{"method":"\#(https)","parameters":{"name":"h3.lab.test"}}"#, .init(name: "h3.lab.test")),
        (#"{"parameters":{"name":"a.test","port":8443},"method":"\#(https)"}"#, .init(name: "a.test", port: 8443)),
        (#"{"method":"\#(https)","parameters":{"optimistic":false,"name":"a.test"}}"#, .init(name: "a.test", optimistic: false)),
        (#"{"method":"\#(https)","parameters":{"name":"a.test","port":null,"optimistic":null}}"#, .init(name: "a.test")),
        (#"{"method":"\#(https)","parameters":{"name":"a.test","port":-1}}"#, .init(name: "a.test", port: -1)),
        (#"{"method":"\#(https)","parameters":{"name":"a.test","port":0}}"#, .init(name: "a.test", port: 0)),
        (#"{"method":"\#(https)","parameters":{"name":""}}"#, .init(name: "")),
        (" {\n\t\"method\" : \"\(https)\" , \"parameters\" : { \"name\" : \"a.test\" , \"port\" : 443 } } \r\n",
            .init(name: "a.test", port: 443)),
        (#"{"method":"\#(https)","more":false,"oneway":null,"parameters":{"name":"a.test"}}"#, .init(name: "a.test")),
    ]

    @Test(arguments: acceptedHTTPS.indices)
    func acceptedResolveHTTPSShapesDecodeLikeCodable(index: Int) throws {
        let (text, expected) = Self.acceptedHTTPS[index]
        let (fast, codable) = try Self.both(text)
        #expect(fast.decodedParameters != nil, "the scanner read it")
        #expect(try fast.parameters(ResolveHTTPSParameters.self) == expected)
        #expect(try codable.parameters(ResolveHTTPSParameters.self) == expected)
        #expect(fast.method == codable.method && fast.more == codable.more && fast.oneway == codable.oneway)
        #expect(fast.parameterKeys.isEmpty, "read parameters need no key list")
    }

    @Test func acceptedResolveAddressesAndConnectionPlanShapes() throws {
        let cases: [(String, any VarlinkParameters & Equatable)] = [
            (#"{"method":"\#(Self.addresses)","parameters":{"name":"a.test"}}"#, ResolveAddressesParameters(name: "a.test")),
            (#"{"method":"\#(Self.addresses)","parameters":{"name":"a.test","family":"ipv6","optimistic":true}}"#,
                ResolveAddressesParameters(name: "a.test", family: .ipv6, optimistic: true)),
            (#"{"method":"\#(Self.addresses)","parameters":{"family":null,"name":"a.test"}}"#,
                ResolveAddressesParameters(name: "a.test")),
            (#"{"method":"\#(Self.plan)","parameters":{"host":"a.test"}}"#, ConnectionPlanParameters(host: "a.test")),
            (#"{"method":"\#(Self.plan)","parameters":{"host":"a.test","port":8443,"assumeH3":true,"optimistic":false}}"#,
                ConnectionPlanParameters(host: "a.test", port: 8443, optimistic: false, assumeH3: true)),
        ]
        for (text, expected) in cases {
            let (fast, codable) = try Self.both(text)
            #expect(fast.decodedParameters != nil, "\(text)")
            if let expected = expected as? ResolveAddressesParameters {
                #expect(try fast.parameters(ResolveAddressesParameters.self) == expected)
                #expect(try codable.parameters(ResolveAddressesParameters.self) == expected)
            } else if let expected = expected as? ConnectionPlanParameters {
                #expect(try fast.parameters(ConnectionPlanParameters.self) == expected)
                #expect(try codable.parameters(ConnectionPlanParameters.self) == expected)
            }
        }
    }

    @Test func moreAndOnewayAreRead() throws {
        let call = try VarlinkCall.decode(
            Self.bytes(#"{"method":"\#(Self.https)","more":true,"oneway":true,"parameters":{"name":"a.test"}}"#),
            scannable: Self.scannable)
        #expect(call.decodedParameters != nil)
        #expect(call.more && call.oneway)
    }

    // MARK: - Everything else falls back, with the Codable path's outcome

    /// Messages the scanner or the parameter initializers do not take; the reply must be what Codable says.
    static let fallbacks: [String] = [
        #"{"method":"\#(https)","parameters":{"nmae":"a.test"}}"#,  // unknown parameter
        #"{"method":"\#(https)","parameters":{"name":"a.test","extra":1}}"#,
        #"{"method":"\#(https)","parameters":{}}"#,  // missing name
        #"{"method":"\#(https)"}"#,
        #"{"method":"\#(https)","parameters":null}"#,
        #"{"method":"\#(https)","parameters":{"name":42}}"#,  // wrong types
        #"{"method":"\#(https)","parameters":{"name":null}}"#,
        #"{"method":"\#(https)","parameters":{"name":true}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","port":"443"}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","port":true}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","port":443.5}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","port":443.0}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","port":4e2}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","port":99999999999999999999}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","optimistic":1}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","optimistic":"yes"}}"#,
        #"{"method":"\#(https)","parameters":{"name":["a.test"]}}"#,  // nested values
        #"{"method":"\#(https)","parameters":{"name":{"x":1}}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a\u002etest"}}"#,  // escapes and non-ASCII text
        #"{"method":"\#(https)","parameters":{"name":"a\"b"}}"#,
        #"{"method":"\#(https)","parameters":{"name":"bücher.test"}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test","name":"b.test"}}"#,  // repeated key
        #"{"method":"\#(https)","parameters":{"name":"a.test","port":null,"port":443}}"#,
        #"{"method":"\#(https)","parameters":{"optimistic":null,"name":"a.test","optimistic":true}}"#,
        #"{"method":"\#(addresses)","parameters":{"name":"a.test","family":null,"family":"ipv4"}}"#,
        #"{"method":"\#(plan)","parameters":{"host":"a.test","assumeH3":true,"assumeH3":true}}"#,
        #"{"method":"\#(addresses)","parameters":{"name":"a.test","family":"ipv5"}}"#,
        #"{"method":"\#(addresses)","parameters":{"name":"a.test","family":4}}"#,
        #"{"method":"\#(plan)","parameters":{"name":"a.test"}}"#,
        #"{"method":"\#(plan)","parameters":{"host":"a.test","assumeH3":"true"}}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test"},"more":1}"#,  // envelope
        #"{"method":"\#(https)","parameters":{"name":"a.test"},"upgrade":true}"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test"}} x"#,
        #"{"method":"\#(https)","parameters":{"name":"a.test"}"#,
        #"{"method":"io.discoverd.Daemon.Status","parameters":{}}"#,  // cold method
        #"["method"]"#,
        "",
    ]

    @Test(arguments: fallbacks)
    func everythingElseGetsTheCodableOutcome(text: String) throws {
        let fastCall: Result<VarlinkCall, VarlinkError> = Result { () throws(VarlinkError) in
            try VarlinkCall.decode(Self.bytes(text), scannable: Self.scannable)
        }
        let codableCall: Result<VarlinkCall, VarlinkError> = Result { () throws(VarlinkError) in
            try VarlinkCall.decode(Self.bytes(text))
        }
        switch (fastCall, codableCall) {
        case (.failure(let fast), .failure(let codable)):
            #expect(fast == codable)
        case (.success(let fast), .success(let codable)):
            #expect(fast.decodedParameters == nil, "the scanner left it to Codable")
            #expect(fast.method == codable.method && fast.more == codable.more)
            for type in Self.scannable.values {
                #expect(Self.outcome(fast, type) == Self.outcome(codable, type), "\(type)")
            }
        default:
            Issue.record("one path decoded the envelope and the other did not: \(fastCall) vs \(codableCall)")
        }
    }

    /// A call's parameters as type `type`, or the error, in a comparable form.
    private static func outcome(_ call: VarlinkCall, _ type: any ScannableParameters.Type) -> String {
        func decode<P: VarlinkParameters>(_: P.Type) -> String {
            switch parameters(call, P.self) {
            case .success(let value): "\(value)"
            case .failure(let error): "\(error.name) \(error.parameters)"
            }
        }
        return decode(type)
    }

    @Test func unknownAndMistypedParametersStillNameTheParameter() throws {
        let cases = [
            (#"{"method":"\#(Self.https)","parameters":{"nmae":"a.test"}}"#, "nmae"),
            (#"{"method":"\#(Self.https)","parameters":{"name":"a.test","port":"443"}}"#, "port"),
            (#"{"method":"\#(Self.addresses)","parameters":{"name":"a.test","family":"ipv5"}}"#, "family"),
            (#"{"method":"\#(Self.plan)","parameters":{"host":"a.test","assumeH3":1}}"#, "assumeH3"),
        ]
        for (text, parameter) in cases {
            let call = try VarlinkCall.decode(Self.bytes(text), scannable: Self.scannable)
            let name = call.method
            let error: VarlinkError
            switch name {
            case Self.addresses: error = Self.failure(call, ResolveAddressesParameters.self)
            case Self.plan: error = Self.failure(call, ConnectionPlanParameters.self)
            default: error = Self.failure(call, ResolveHTTPSParameters.self)
            }
            #expect(error == .invalidParameter(parameter), "\(text)")
        }
    }

    private static func failure<P: VarlinkParameters>(_ call: VarlinkCall, _ type: P.Type) -> VarlinkError {
        if case .failure(let error) = parameters(call, type) { return error }
        return .invalidParameter("(decoded)")
    }

    /// The string scan reads eight bytes at a time: a byte that ends the string or sends the message to Codable
    /// (quote, backslash, control character, non-ASCII) is found at every position of a word, and every other
    /// byte is read as text.
    @Test func theWordAtATimeStringScanSeesEveryByteThatMatters() {
        func word(_ bytes: [UInt8]) -> UInt64 {
            bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        }
        func reference(_ bytes: [UInt8]) -> Bool {
            bytes.contains { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 || $0 >= 0x80 }
        }
        // Every byte value at every position of a word of plain text.
        for value in 0...255 {
            for position in 0..<8 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 8)
                bytes[position] = UInt8(value)
                #expect(VarlinkCallScanner.Scanner.needsAttention(word(bytes)) == reference(bytes), "\(value) at \(position)")
            }
        }
        // Random words, where borrows between bytes could hide one.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let bytes = (0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(VarlinkCallScanner.Scanner.needsAttention(word(bytes)) == reference(bytes))
        }
        // Through the scanner: a long name with one such byte anywhere is left to Codable; plain bytes are kept.
        let name = Array("abcdefghijklmnopqrstuvwxyz0123456789.test".utf8)
        for special: UInt8 in [0x22, 0x5C, 0x00, 0x0A, 0x1F, 0x80, 0xC3, 0xFF] {
            for position in name.indices {
                var bytes = name
                bytes[position] = special
                let text = Array(#"{"method":"x.Y","parameters":{"name":""#.utf8) + bytes + Array(#""}}"#.utf8)
                #expect(VarlinkCallScanner.scan(ArraySlice(text)) == nil, "\(special) at \(position)")
            }
        }
        for plain: UInt8 in [0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E, 0x7F] {
            for position in name.indices {
                var bytes = name
                bytes[position] = plain
                let text = Array(#"{"method":"x.Y","parameters":{"name":""#.utf8) + bytes + Array(#""}}"#.utf8)
                let expected = String(decoding: bytes, as: UTF8.self)
                #expect(
                    VarlinkCallScanner.scan(ArraySlice(text))?.parameters == ScannedParameters([("name", .string(expected))]),
                    "\(plain) at \(position)")
            }
        }
    }

    @Test func scannerReadsTheEnvelopeAndFlatObjectOnly() {
        #expect(
            VarlinkCallScanner.scan(#"{"method":"x.Y","parameters":{"a":"b","n":-12,"t":true,"z":null}}"#)
                == VarlinkCallScanner.Call(
                    method: "x.Y", more: false, oneway: false,
                    parameters: ScannedParameters([("a", .string("b")), ("n", .int(-12)), ("t", .bool(true)), ("z", .null)])))
        #expect(VarlinkCallScanner.scan(#"{"method":"x.Y"}"#)?.parameters == nil)
        #expect(VarlinkCallScanner.scan(#"{"method":"x.Y","parameters":{"a":truex}}"#) == nil)
        #expect(VarlinkCallScanner.scan(#"{"method":"x.Y","parameters":{"a":-0}}"#) == nil)
        #expect(VarlinkCallScanner.scan(#"{"method":"x.Y","parameters":{"a":01}}"#) == nil)
        #expect(VarlinkCallScanner.scan(#"{}"#) == nil, "no method")
    }

    @Test func theEnvelopeSaysWhereTheMethodAndParametersAre() {
        let text = #" {"parameters" : {"name":"a.test","port":8443} ,"method":"x.Y","more":true}"#
        let bytes = Array(text.utf8)
        bytes.withUnsafeBufferPointer { buffer in
            guard let envelope = VarlinkCallScanner.envelope(buffer) else {
                Issue.record("not scanned")
                return
            }
            #expect(envelope.method(in: buffer) == "x.Y" && envelope.more && !envelope.oneway)
            #expect(Array("x.Y".utf8).withUnsafeBufferPointer { envelope.isMethod($0, in: buffer) })
            #expect(!Array("x.Z".utf8).withUnsafeBufferPointer { envelope.isMethod($0, in: buffer) })
            #expect(!Array("x.Y.".utf8).withUnsafeBufferPointer { envelope.isMethod($0, in: buffer) })
            let range = envelope.parameters
            #expect(range.map { String(decoding: buffer[$0], as: UTF8.self) } == #"{"name":"a.test","port":8443}"#)
            var keys: [String] = []
            let complete = envelope.parameters(in: buffer).forEach { key, value in
                keys.append(key.string)
                #expect((key == "name") == (keys.count == 1) && (key == "port") == (keys.count == 2))
                #expect(!(key == "nam") && !(key == "names"))
                return true
            }
            #expect(complete && keys == ["name", "port"])
            #expect(ResolveHTTPSParameters(scanned: envelope.parameters(in: buffer)) == .init(name: "a.test", port: 8443))
            // A body that stops the walk makes it incomplete.
            #expect(!envelope.parameters(in: buffer).forEach { _, _ in false })
        }
    }
}
