#if canImport(Glibc)
    import Glibc
#endif
import Foundation

/// A shared/exclusive lock over host a's avahi-daemon: ordinary lab tests hold it shared, tests that stop
/// avahi-daemon on a hold it exclusively, so they never pull Avahi from under each other.
///
/// It is an `flock` on `/run/lock/discoverd-lab-avahi-a.lock`, so it also works between test targets and test
/// processes: any other lab test that stops a's avahi-daemon should take the same lock with `LOCK_EX`.
///
/// ```swift
/// let hold = await AvahiGate.shared.enterShared()
/// defer { hold.release() }
/// ```
public final class AvahiGate: Sendable {
    public static let shared = AvahiGate()
    public static let path = "/run/lock/discoverd-lab-avahi-a.lock"

    /// One holder's claim (its own open file description); `release()` once.
    public struct Hold: Sendable {
        fileprivate let fd: Int32
        public func release() {
            guard fd >= 0 else { return }
            flock(fd, LOCK_UN)
            close(fd)
        }
    }

    /// Waits while a test holds the lock exclusively.
    public func enterShared() async -> Hold { await enter(LOCK_SH) }

    /// Waits until no other test holds the lock.
    public func enterExclusive() async -> Hold { await enter(LOCK_EX) }

    private func enter(_ operation: Int32) async -> Hold {
        let fd = open(Self.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
        guard fd >= 0 else { return Hold(fd: -1) }
        // flock blocks: wait on a thread of its own, never on the cooperative pool.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                while flock(fd, operation) != 0 && errno == EINTR {}
                continuation.resume()
            }.start()
        }
        return Hold(fd: fd)
    }
}
