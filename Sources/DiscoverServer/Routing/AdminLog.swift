import Logging

extension CallContext {
    /// Logs, at notice, an action that changes the daemon for every client (Flush, Reload, withdrawing another
    /// connection's registration), with who asked: `peer.uid` and `peer.pid`.
    func logAdminAction(_ message: Logger.Message, _ metadata: Logger.Metadata = [:]) {
        var metadata = metadata
        metadata["peer.uid"] = "\(peer.uid)"
        metadata["peer.pid"] = "\(peer.pid)"
        AdminLog.logger.notice(message, metadata: metadata)
    }
}

/// The logger of admin actions; created on first use, after the daemon bootstrapped logging.
enum AdminLog {
    static let logger = Logger(label: "discoverd")
}
