import DNSCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import Resolver
import ServiceLifecycle

/// Keeps the DNS cache and the Alt-Svc knowledge on disk: loaded at start, saved periodically and at shutdown,
/// so optimistic answers work right after a restart. A missing or corrupt file is logged, never fatal.
///
/// Encoding up to `cache-size` entries, writing and the two fsyncs of a save run on `NIOThreadPool`, never on an
/// event loop: cached lookups keep being answered while the cache is saved.
final class CachePersistenceService: Service, Sendable {
    let resolver: DNSResolver
    let directory: URL
    let logger: Logger
    private let intervalSeconds: NIOLockedValueBox<Int>
    private let threadPool: NIOThreadPool

    /// - Parameter intervalSeconds: how often to save; 0 saves only at shutdown.
    init(
        resolver: DNSResolver, directory: URL, intervalSeconds: Int, threadPool: NIOThreadPool = .singleton,
        logger: Logger
    ) {
        self.resolver = resolver
        self.threadPool = threadPool
        self.directory = directory
        self.intervalSeconds = NIOLockedValueBox(intervalSeconds)
        self.logger = logger
    }

    var cacheFile: URL { directory.appendingPathComponent("cache.json") }
    var altSvcFile: URL { directory.appendingPathComponent("altsvc.json") }

    /// How often the cache is saved (`[resolver] persist-interval`; 0: only at shutdown). Takes effect after the
    /// wait in progress.
    var interval: Int {
        get { intervalSeconds.withLockedValue { $0 } }
        set { intervalSeconds.withLockedValue { $0 = newValue } }
    }

    /// Reads what the last run saved (on the thread pool).
    func load() async {
        try? await threadPool.runIfActive { [self] in loadBlocking() }
    }

    private func loadBlocking() {
        let resolver = self.resolver
        for (name, file, load) in [
            ("cache", cacheFile, { (url: URL) throws -> CacheLoadResult in 
                try resolver.cache.load(from: url, accepting: OptimisticCache.entryBelongsToKey)
            }),
            ("alt-svc", altSvcFile, { (url: URL) throws -> CacheLoadResult in try resolver.altSvc.load(from: url) }),
        ] {
            do {
                let result = try load(file)
                logger.info(
                    "loaded \(name)",
                    metadata: ["file": "\(file.path)", "entries": "\(result.loaded)", "expired": "\(result.skipped)", "invalid": "\(result.invalid)"])
            } catch let error as CachePersistenceError where error.code == .notFound {
                logger.debug("no saved \(name) yet", metadata: ["file": "\(file.path)"])
            } catch {
                logger.warning("ignoring unreadable \(name) file", metadata: ["file": "\(file.path)", "error": "\(error)"])
            }
        }
    }

    /// Saves the cache and the Alt-Svc knowledge (on the thread pool).
    func save() async {
        try? await threadPool.runIfActive { [self] in saveBlocking() }
    }

    private func saveBlocking() {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try resolver.cache.save(to: cacheFile)
            try resolver.altSvc.save(to: altSvcFile)
            logger.debug("saved cache", metadata: ["directory": "\(directory.path)", "entries": "\(resolver.cache.count)"])
        } catch {
            logger.warning("could not save the cache", metadata: ["directory": "\(directory.path)", "error": "\(error)"])
        }
    }

    func run() async throws {
        while !Task.isShuttingDownGracefully {
            // With no interval, look again now and then: a reload may set one.
            let seconds = interval
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(seconds > 0 ? seconds : 1)) }
            } catch {
                break
            }
            if seconds > 0 && !Task.isShuttingDownGracefully { await save() }
        }
        await save()
    }
}
