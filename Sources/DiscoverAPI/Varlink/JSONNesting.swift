/// How deeply a JSON text nests, checked before Foundation's decoder sees bytes from a peer.
///
/// Foundation's JSON scanner (swift 6.3.1's FoundationEssentials) traps instead of throwing on some inputs nested
/// exactly 512 deep (512 arrays inside an object: `{"parameters":[[[...`), which a fuzzer sent the running daemon.
/// No varlink message of ours nests deeper than a few levels, so anything past ``limit`` is refused as malformed
/// before it reaches the decoder.
enum JSONNesting {
    /// The deepest nesting accepted: far above any message of the API, far below the scanner's 512.
    static let limit = 64

    /// Whether `bytes` nests arrays and objects deeper than ``limit`` (brackets inside strings do not count).
    static func exceedsLimit(_ bytes: some Collection<UInt8>) -> Bool {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > limit { return true }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
            default:
                break
            }
        }
        return false
    }
}
