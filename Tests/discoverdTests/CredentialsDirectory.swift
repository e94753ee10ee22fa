import Foundation

/// `$CREDENTIALS_DIRECTORY` is one per process and tests run in parallel: the tests that set it take turns, and
/// it is unset again afterwards.
enum CredentialsDirectory {
    private static let lock = NSLock()

    static func with<T>(_ directory: String, _ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        setenv("CREDENTIALS_DIRECTORY", directory, 1)
        defer { unsetenv("CREDENTIALS_DIRECTORY") }
        return try body()
    }
}
