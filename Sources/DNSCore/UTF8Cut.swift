/// Cutting UTF-8 text to a bound in bytes without splitting a character, for the texts that travel on to clients
/// and log lines: an upstream's EDE EXTRA-TEXT, kept at 512 bytes, and the one the stub sends, at 400.
enum UTF8Cut {
    /// What a cut text ends in, to say it was cut: "…", 3 bytes.
    static let ellipsis: [UInt8] = Array("…".utf8)

    /// Where to cut `text` so that what is kept and ``ellipsis`` after it take at most `limit` bytes; nil when the
    /// whole text fits in `limit`. The cut moves back from the bound over continuation bytes (`10xxxxxx`) to the
    /// first byte of the character it would split, at most three of them (a character is at most four bytes), so
    /// the kept part of valid UTF-8 stays valid; invalid bytes are cut where they are.
    static func end<Text: RandomAccessCollection>(of text: Text, limit: Int) -> Int?
    where Text.Element == UInt8, Text.Index == Int {
        guard text.count > limit else { return nil }
        var end = text.startIndex + max(0, limit - ellipsis.count)
        var steps = 0
        while steps < 3, end > text.startIndex, text[end] & 0xC0 == 0x80 {
            end -= 1
            steps += 1
        }
        return end
    }
}
