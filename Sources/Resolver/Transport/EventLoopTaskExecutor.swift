import NIOCore

/// One event loop as a Swift task executor: a task that prefers it (`Task(executorPreference:)`) runs its jobs on
/// that loop's thread, and so do its resumptions after a future of that loop completes.
///
/// Why not just NIO's global-executor hook (`Discoverd.swift` installs it too): the hook runs a job *isolated to
/// the event loop* (as a serial executor), so every call into a nonisolated async function, which asks for the
/// generic executor, is an executor switch: the task is enqueued again, goes through the loop's task queue and
/// comes back (`swift_task_switch` and `flagAsAndEnqueueOnExecutor` were 27 000 of a DoT miss's instructions). A
/// job run here runs on the generic executor with this task executor, which is exactly what a task that
/// prefers it asks for at every such call, so those calls continue in place.
public final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: one immutable reference to a loop, which is itself thread-safe.
    public let loop: any EventLoop

    public init(loop: any EventLoop) {
        self.loop = loop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
