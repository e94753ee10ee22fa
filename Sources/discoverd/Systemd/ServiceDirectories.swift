import Foundation

/// The directories systemd made for the service (`RuntimeDirectory=`, `StateDirectory=`), from
/// `$RUNTIME_DIRECTORY` and `$STATE_DIRECTORY`: they win over the per-user defaults when set.
enum ServiceDirectories {
    /// `$RUNTIME_DIRECTORY`: where the socket goes when the daemon binds it itself.
    static func runtime(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        first(of: environment["RUNTIME_DIRECTORY"])
    }

    /// `$STATE_DIRECTORY`: where the cache is persisted.
    static func state(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        first(of: environment["STATE_DIRECTORY"])
    }

    /// With several directories configured systemd lists them separated by colons: the first is ours.
    private static func first(of value: String?) -> String? {
        guard let first = value?.split(separator: ":").first, first.hasPrefix("/") else { return nil }
        return String(first)
    }
}
