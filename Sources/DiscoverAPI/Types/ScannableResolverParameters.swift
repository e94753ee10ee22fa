// The hot methods' parameters built from a scanned call (``VarlinkCallScanner``), without Foundation. Each
// initializer accepts exactly what the Codable path accepts without an error and returns nil for the rest, so the
// Codable path still words every InvalidParameter.

extension ScannedValue {
    /// The field as a required string; nil for any other value.
    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// An optional field: `.some(nil)` when null, nil when it has another type.
    func optional<T>(_ extract: (ScannedValue) -> T?) -> T?? {
        if case .null = self { return .some(nil) }
        return extract(self).map { .some($0) }
    }

    var int: Int? {
        if case .int(let value) = self { return value }
        return nil
    }

    var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }
}

extension ResolveHTTPSParameters: ScannableParameters {
    public init?(scanned: ScannedParameters) {
        var name: String?
        var port: Int?
        var optimistic: Bool?
        for (key, value) in scanned.fields {
            switch key {
            case "name": guard let text = value.string else { return nil }; name = text
            case "port": guard let number = value.optional(\.int) else { return nil }; port = number
            case "optimistic": guard let flag = value.optional(\.bool) else { return nil }; optimistic = flag
            default: return nil
            }
        }
        guard let name else { return nil }
        self.init(name: name, port: port, optimistic: optimistic)
    }
}

extension ResolveAddressesParameters: ScannableParameters {
    public init?(scanned: ScannedParameters) {
        var name: String?
        var family: AddressFamily?
        var optimistic: Bool?
        for (key, value) in scanned.fields {
            switch key {
            case "name": guard let text = value.string else { return nil }; name = text
            case "family":
                guard let parsed = value.optional({ $0.string.flatMap(AddressFamily.init(rawValue:)) }) else {
                    return nil
                }
                family = parsed
            case "optimistic": guard let flag = value.optional(\.bool) else { return nil }; optimistic = flag
            default: return nil
            }
        }
        guard let name else { return nil }
        self.init(name: name, family: family, optimistic: optimistic)
    }
}

extension ConnectionPlanParameters: ScannableParameters {
    public init?(scanned: ScannedParameters) {
        var host: String?
        var port: Int?
        var optimistic: Bool?
        var assumeH3: Bool?
        for (key, value) in scanned.fields {
            switch key {
            case "host": guard let text = value.string else { return nil }; host = text
            case "port": guard let number = value.optional(\.int) else { return nil }; port = number
            case "optimistic": guard let flag = value.optional(\.bool) else { return nil }; optimistic = flag
            case "assumeH3": guard let flag = value.optional(\.bool) else { return nil }; assumeH3 = flag
            default: return nil
            }
        }
        guard let host else { return nil }
        self.init(host: host, port: port, optimistic: optimistic, assumeH3: assumeH3)
    }
}
