import Foundation
import Logging
import NIOConcurrencyHelpers

/// Log lines for journald on standard error: each starts with its syslog priority as sd-daemon(3) defines
/// (`<3>` error, `<4>` warning, ...), so `journalctl -p warning` filters them, and carries no timestamp (the
/// journal stamps every line itself).
///
/// Used when standard error is the journal stream systemd named in `$JOURNAL_STREAM`; elsewhere the daemon
/// logs with swift-log's `StreamLogHandler`, timestamps included.
struct JournalLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    /// Lines of concurrent loggers must not interleave.
    private static let lock = NIOLock()

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        if let error = event.error { merged["error"] = "\(error)" }
        let source = event.source == label ? "" : "[\(event.source)] "
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\(Self.quoted("\($0.value)"))" }
        let text = "\(source)\(event.message)" + (fields.isEmpty ? "" : " " + fields.joined(separator: " "))
        Self.write(text, level: event.level)
    }

    /// Writes `text` to standard error with the priority of `level` in front of every line (journald reads each
    /// line as its own entry).
    static func write(_ text: String, level: Logger.Level) {
        let prefix = "<\(priority(level))>"
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { prefix + $0 + "\n" }
        let bytes = Array(lines.joined().utf8)
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    /// The syslog priority of sd-daemon(3) for a swift-log level.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7  // SD_DEBUG
        case .info: 6  // SD_INFO
        case .notice: 5  // SD_NOTICE
        case .warning: 4  // SD_WARNING
        case .error: 3  // SD_ERR
        case .critical: 2  // SD_CRIT
        }
    }

    /// Whether standard error is the journal stream `$JOURNAL_STREAM` names (`DEVICE:INODE`), as
    /// systemd.exec(5) asks: a child whose output was redirected elsewhere inherits the variable too.
    static func standardErrorIsJournal(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Bool {
        guard let stream = environment["JOURNAL_STREAM"] else { return false }
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    private static func quoted(_ value: String) -> String {
        value.contains(where: { $0 == " " || $0 == "\"" || $0 == "\n" })
            ? "\"" + value.replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: " ") + "\""
            : value
    }
}
