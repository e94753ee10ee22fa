#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The parameters of a varlink method: a JSON object whose keys are listed by `CodingKeys`.
///
/// Listing the keys lets the daemon reject a misspelt parameter (`optimstic`) with
/// `org.varlink.service.InvalidParameter` instead of silently ignoring it, as systemd's varlink does.
public protocol VarlinkParameters: Codable, Sendable {
    associatedtype CodingKeys: CodingKey & CaseIterable
}

extension VarlinkParameters {
    /// Every parameter name the method accepts.
    public static var parameterNames: Set<String> { Set(CodingKeys.allCases.map(\.stringValue)) }
}

/// A method with no parameters or no reply fields.
public struct VarlinkEmpty: VarlinkParameters, Equatable {
    /// No keys at all: every parameter name is unknown.
    public enum CodingKeys: CodingKey, CaseIterable {
        public init?(stringValue: String) { nil }
        public init?(intValue: Int) { nil }
        public var stringValue: String { switch self {} }
        public var intValue: Int? { nil }
        public static var allCases: [CodingKeys] { [] }
    }
    public init() {}
    public init(from decoder: any Decoder) throws {}
    public func encode(to encoder: any Encoder) throws { _ = encoder.container(keyedBy: CodingKeys.self) }
}

/// A typed method: its fully qualified name, parameter type and reply type.
public struct VarlinkMethod<Parameters: VarlinkParameters, Reply: Codable & Sendable>: Sendable {
    /// Fully qualified name, e.g. `io.discoverd.Daemon.Status`.
    public let name: String
    public init(_ name: String) { self.name = name }
}

/// A decoded call: the envelope fields plus the raw message, from which typed parameters are decoded.
public struct VarlinkCall: Sendable {
    /// Fully qualified method name.
    public var method: String
    /// The client asked for a stream of replies.
    public var more: Bool
    /// The client wants no reply.
    public var oneway: Bool
    /// The keys of the parameters object (empty when it is missing or null, or when the scanner read the
    /// parameters: ``decodedParameters`` holds them then).
    public var parameterKeys: Set<String>
    /// The raw message, kept to decode typed parameters without re-encoding (empty when the scanner read them).
    public var raw: Data
    /// The typed parameters when ``VarlinkCallScanner`` already read them: ``parameters(_:)`` returns them as is.
    public var decodedParameters: (any VarlinkParameters)?

    /// The interface part of `method` (everything before the last dot).
    public var interface: Substring {
        guard let dot = method.lastIndex(of: ".") else { return "" }
        return method[..<dot]
    }

    /// The member part of `method` (after the last dot).
    public var member: Substring {
        guard let dot = method.lastIndex(of: ".") else { return Substring(method) }
        return method[method.index(after: dot)...]
    }

    private struct Envelope: Decodable {
        var method: String
        var more: Bool?
        var oneway: Bool?
        var parameters: [String: SkippedValue]?
    }

    /// Any JSON value, parsed but not materialised: the envelope only needs the parameter names, the typed
    /// decode reads the values.
    private struct SkippedValue: Decodable {
        init(from decoder: any Decoder) throws {}
    }

    private struct ParametersBox<P: Decodable>: Decodable {
        var parameters: P?
    }

    /// Decodes a call message (without its NUL).
    /// - Throws: ``VarlinkError`` `io.discoverd.Daemon.InvalidMessage` when it is not a varlink call.
    public static func decode(_ bytes: some Collection<UInt8>) throws(VarlinkError) -> VarlinkCall {
        let data = Data(bytes)
        guard !JSONNesting.exceedsLimit(data) else {
            throw VarlinkError.invalidMessage(reason: "JSON nested deeper than \(JSONNesting.limit) levels")
        }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: data)
        } catch {
            throw VarlinkError.invalidMessage(reason: Self.describe(error))
        }
        return VarlinkCall(
            method: envelope.method, more: envelope.more ?? false, oneway: envelope.oneway ?? false,
            parameterKeys: envelope.parameters.map { Set($0.keys) } ?? [], raw: data)
    }

    /// Decodes a call in one pass when its method's parameters are in `scannable` and the scanner understands the
    /// message; otherwise (and for every other method) exactly as ``decode(_:)``.
    public static func decode(
        _ bytes: ArraySlice<UInt8>, scannable: [String: any ScannableParameters.Type]
    ) throws(VarlinkError) -> VarlinkCall {
        if !scannable.isEmpty {
            let scanned = bytes.withUnsafeBufferPointer { buffer -> VarlinkCall? in
                guard let envelope = VarlinkCallScanner.envelope(buffer) else { return nil }
                let method = envelope.method(in: buffer)
                guard let type = scannable[method], let parameters = type.init(scanned: envelope.parameters(in: buffer))
                else { return nil }
                return VarlinkCall(
                    method: method, more: envelope.more, oneway: envelope.oneway, parameterKeys: [], raw: Data(),
                    decodedParameters: parameters)
            }
            if let scanned { return scanned }
        }
        return try decode(bytes)
    }

    /// Decodes the typed parameters.
    /// - Throws: `org.varlink.service.InvalidParameter` naming the first missing, unknown or mistyped parameter.
    public func parameters<P: VarlinkParameters>(_ type: P.Type = P.self) throws(VarlinkError) -> P {
        if let decodedParameters {
            // The scanner read them as the method's type: any other type is not this method's.
            guard let parameters = decodedParameters as? P else { throw .invalidParameter("parameters") }
            return parameters
        }
        // CodingKeys(stringValue:) is a switch: no set is built per call.
        if let unknown = parameterKeys.sorted().first(where: { P.CodingKeys(stringValue: $0) == nil }) {
            throw .invalidParameter(unknown)
        }
        do {
            if parameterKeys.isEmpty {
                return try JSONDecoder().decode(P.self, from: Data("{}".utf8))
            }
            if let value = try JSONDecoder().decode(ParametersBox<P>.self, from: raw).parameters {
                return value
            }
            return try JSONDecoder().decode(P.self, from: Data("{}".utf8))
        } catch let error as DecodingError {
            throw .invalidParameter(Self.parameterName(error) ?? "parameters")
        } catch {
            throw .invalidParameter("parameters")
        }
    }

    /// Encodes a call message including its terminating NUL.
    public static func encode<P: Encodable>(
        method: String, parameters: P, more: Bool = false, oneway: Bool = false
    ) throws -> [UInt8] {
        let envelope = CallEnvelope(method: method, parameters: parameters, more: more ? true : nil, oneway: oneway ? true : nil)
        var bytes = [UInt8](try JSONEncoder().encode(envelope))
        bytes.append(0)
        return bytes
    }

    /// The parameter a decoding error is about: the first coding-path element below `parameters`.
    static func parameterName(_ error: DecodingError) -> String? {
        func first(_ path: [any CodingKey]) -> String? {
            let names = path.map(\.stringValue).filter { $0 != "parameters" }
            return names.first
        }
        switch error {
        case .keyNotFound(let key, let context): return first(context.codingPath) ?? key.stringValue
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return first(context.codingPath)
        @unknown default: return nil
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing field '\(key.stringValue)'"
        case DecodingError.typeMismatch(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return "wrong type for '\(path)'"
        case DecodingError.dataCorrupted: return "not valid JSON"
        default: return "not a varlink call object"
        }
    }
}

private struct CallEnvelope<Q: Encodable>: Encodable {
    var method: String
    var parameters: Q
    var more: Bool?
    var oneway: Bool?
}

/// Encodes replies: one JSON object and a NUL.
public enum VarlinkReply {
    private struct Envelope<P: Encodable>: Encodable {
        var parameters: P
        var continues: Bool?
    }

    private struct ErrorEnvelope: Encodable {
        var error: String
        var parameters: [String: JSONValue]
    }

    /// Encodes a successful reply, with `continues: true` when more replies follow.
    public static func encode<P: Encodable>(_ parameters: P, continues: Bool = false) throws -> [UInt8] {
        if let writable = parameters as? any JSONWritable {
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("parameters")
            writable.write(to: &writer)
            if continues { writer.field("continues", true) }
            writer.endObject()
            return writer.bytes + [0]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        var bytes = [UInt8](try encoder.encode(Envelope(parameters: parameters, continues: continues ? true : nil)))
        bytes.append(0)
        return bytes
    }

    /// Encodes an error reply.
    public static func encode(error: VarlinkError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        // Encoding [String: JSONValue] cannot fail; fall back to a fixed text rather than crash.
        var bytes = (try? [UInt8](encoder.encode(ErrorEnvelope(error: error.name, parameters: error.parameters))))
            ?? Array(#"{"error":"io.discoverd.Daemon.InvalidMessage","parameters":{}}"#.utf8)
        bytes.append(0)
        return bytes
    }
}

/// A decoded reply, as seen by a client.
public struct VarlinkReplyMessage: Sendable {
    /// The error name, when the call failed.
    public var error: String?
    /// More replies follow.
    public var continues: Bool
    /// The raw message, to decode typed parameters.
    public var raw: Data

    private struct Envelope: Decodable {
        var error: String?
        var continues: Bool?
    }

    private struct ParametersBox<P: Decodable>: Decodable {
        var parameters: P?
    }

    /// Decodes a reply message (without its NUL).
    public static func decode(_ bytes: some Collection<UInt8>) throws -> VarlinkReplyMessage {
        let data = Data(bytes)
        guard !JSONNesting.exceedsLimit(data) else {
            throw VarlinkError.invalidMessage(reason: "JSON nested deeper than \(JSONNesting.limit) levels")
        }
        let envelope = try JSONDecoder().decode(Envelope.self, from: data)
        return VarlinkReplyMessage(error: envelope.error, continues: envelope.continues ?? false, raw: data)
    }

    /// The typed parameters of a successful reply.
    public func parameters<P: Decodable>(_ type: P.Type = P.self) throws -> P {
        if let value = try JSONDecoder().decode(ParametersBox<P>.self, from: raw).parameters { return value }
        return try JSONDecoder().decode(P.self, from: Data("{}".utf8))
    }

    /// The error carried by this reply, if any.
    public var varlinkError: VarlinkError? {
        guard let error else { return nil }
        let parameters = (try? parameters([String: JSONValue].self)) ?? [:]
        return VarlinkError(name: error, parameters: parameters)
    }
}
