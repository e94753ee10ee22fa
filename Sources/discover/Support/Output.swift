import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Line-oriented output that is flushed at once, also when piped.
enum Output {
    static func line(_ text: String) {
        write(1, text + "\n")
    }

    static func error(_ text: String) {
        write(2, text + "\n")
    }

    /// Writes all bytes; when the reader has gone (`discover browse ... | head`), exits quietly like other tools.
    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                exit(0)
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// One compact JSON object on one line.
    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        line(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// `value`'s JSON object with a `timestamp` (ISO 8601, UTC, milliseconds) added: for stream events.
    static func timedJSON<T: Encodable>(_ value: T, at date: Date = Date()) throws {
        let timestamp = date.ISO8601Format(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        try json(Extended(value: value, extra: ["timestamp": timestamp]))
    }

    /// `value`'s JSON object with string fields added.
    struct Extended<T: Encodable>: Encodable {
        var value: T
        var extra: [String: String]

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            try value.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            for (key, text) in extra { try container.encode(text, forKey: Key(stringValue: key)) }
        }
    }

    /// Local wall-clock time of day with milliseconds, like dns-sd's first column.
    static func clock(_ date: Date = Date()) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss.SSS"
        return formatter.string(from: date)
    }

    /// `text` padded with spaces to `width` (never cut).
    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
