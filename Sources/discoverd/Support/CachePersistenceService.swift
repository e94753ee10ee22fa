import Foundation
import Logging
import Resolver
import ServiceLifecycle

/// Keeps the DNS cache and the Alt-Svc knowledge on disk: loaded at start, saved periodically and at shutdown,
/// so optimistic answers work right after a restart. A missing or corrupt file is logged, never fatal.
struct CachePersistenceService: ServiceLifecycle.Service {
    let resolver: DNSResolver
    let directory: URL
    let interval: Duration?
    let logger: Logger

    var cacheFile: URL { directory.appendingPathComponent("cache.json") }
    var altSvcFile: URL { directory.appendingPathComponent("altsvc.json") }

    /// Reads what the last run saved.
    func load() {
        for (name, file, load) in [
            ("cache", cacheFile, { (url: URL) throws -> CacheLoadResult in try resolver.cache.load(from: url) }),
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

    func save() {
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
        if let interval {
            while !Task.isShuttingDownGracefully {
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
                } catch {
                    break
                }
                if !Task.isShuttingDownGracefully { save() }
            }
        } else {
            try? await gracefulShutdown()
        }
        save()
    }
}
