// The hot methods' parameters built from a scanned call (``VarlinkCallScanner``), without Foundation. Each
// initializer accepts exactly what the Codable path accepts without an error and returns nil for the rest (a
// repeated key included), so the Codable path still words every InvalidParameter.

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

/// Which keys a parameter type has read, to reject a repeated one.
struct SeenKeys {
    private var bits: UInt8 = 0

    /// Marks key number `index` as read; false when it already was.
    mutating func first(_ index: Int) -> Bool {
        let bit = UInt8(1) << index
        if bits & bit != 0 { return false }
        bits |= bit
        return true
    }
}

extension ResolveHTTPSParameters: ScannableParameters {
    public init?(scanned: ScannedObject) {
        var name: String?
        var port: Int?
        var optimistic: Bool?
        var seen = SeenKeys()
        let accepted = scanned.forEach { key, value in
            if key == "name" {
                guard seen.first(0), let text = value.string else { return false }
                name = text
            } else if key == "port" {
                guard seen.first(1), let number = value.optional(\.int) else { return false }
                port = number
            } else if key == "optimistic" {
                guard seen.first(2), let flag = value.optional(\.bool) else { return false }
                optimistic = flag
            } else {
                return false
            }
            return true
        }
        guard accepted, let name else { return nil }
        self.init(name: name, port: port, optimistic: optimistic)
    }
}

extension ResolveAddressesParameters: ScannableParameters {
    public init?(scanned: ScannedObject) {
        var name: String?
        var family: AddressFamily?
        var optimistic: Bool?
        var seen = SeenKeys()
        let accepted = scanned.forEach { key, value in
            if key == "name" {
                guard seen.first(0), let text = value.string else { return false }
                name = text
            } else if key == "family" {
                guard seen.first(1),
                    let parsed = value.optional({ $0.string.flatMap(AddressFamily.init(rawValue:)) })
                else { return false }
                family = parsed
            } else if key == "optimistic" {
                guard seen.first(2), let flag = value.optional(\.bool) else { return false }
                optimistic = flag
            } else {
                return false
            }
            return true
        }
        guard accepted, let name else { return nil }
        self.init(name: name, family: family, optimistic: optimistic)
    }
}

extension ConnectionPlanParameters: ScannableParameters {
    public init?(scanned: ScannedObject) {
        var host: String?
        var port: Int?
        var optimistic: Bool?
        var assumeH3: Bool?
        var seen = SeenKeys()
        let accepted = scanned.forEach { key, value in
            if key == "host" {
                guard seen.first(0), let text = value.string else { return false }
                host = text
            } else if key == "port" {
                guard seen.first(1), let number = value.optional(\.int) else { return false }
                port = number
            } else if key == "optimistic" {
                guard seen.first(2), let flag = value.optional(\.bool) else { return false }
                optimistic = flag
            } else if key == "assumeH3" {
                guard seen.first(3), let flag = value.optional(\.bool) else { return false }
                assumeH3 = flag
            } else {
                return false
            }
            return true
        }
        guard accepted, let host else { return nil }
        self.init(host: host, port: port, optimistic: optimistic, assumeH3: assumeH3)
    }
}
