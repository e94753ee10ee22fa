import DNSCore
import DNSSDModel
import Logging
import Resolver

/// Browses one service type in one unicast domain (RFC 6763 §4): PTR `_type._proto.DOMAIN` (or the subtype's
/// `_sub` name, §7.1), and with `resolve` each instance's SRV, TXT and addresses.
///
/// The first look answers from the optimistic cache when it can; after that the browser looks again when the
/// TTLs run out (``PollSchedule``) and reports the difference as added, removed and changed.
struct UnicastBrowser: Sendable {
    let type: String
    let domain: String
    let subtype: String?
    let resolve: Bool
    let source: any RecordSource
    let schedule: PollSchedule
    let logger: Logger

    /// The PTR name browsed.
    var ptrName: String {
        ([subtype.map { "\($0)._sub" }, type, domain].compactMap { $0 }.joined(separator: ".") + ".").lowercased()
    }

    /// One look: the instances present now, and the smallest TTL involved.
    /// - Throws: `timeout` or `lookupFailed` when the PTR query itself fails.
    func snapshot(fresh: Bool) async throws(WideAreaError) -> (services: [String: DNSSDService], ttl: UInt32?) {
        let ptr = try await source.records(ptrName, type: .ptr, fresh: fresh)
        var ttl: UInt32? = ptr.ttl
        var services: [String: DNSSDService] = [:]
        for record in ptr.records {
            // A PTR into another type or domain, or one that is not a name, is skipped (RFC 6763 §4.1).
            guard let instance = ServiceInstanceName.fromPTR(record.rdata, type: type, domain: domain) else {
                logger.debug("skipping malformed PTR", metadata: ["dns.name": "\(ptrName)"])
                continue
            }
            let key = instance.instance.lowercased()
            guard resolve else {
                services[key] = DNSSDService(name: instance.instance, type: type, domain: instance.domain)
                continue
            }
            do {
                let resolved = try await InstanceResolver.resolve(instance, source: source, fresh: fresh)
                services[key] = resolved.service
                ttl = min(ttl ?? resolved.ttl, resolved.ttl)
            } catch {
                // One broken instance (bad SRV target, no SRV) must not break the browse of the others.
                logger.debug(
                    "instance not resolvable", metadata: ["dns.name": "\(instance.queryNameText)", "error": "\(error)"])
            }
        }
        return (services, ttl)
    }

    /// The events of the browse: everything present, `allForNow`, then changes until the task is cancelled.
    func events() -> AsyncThrowingStream<BrowseEvent, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var known: [String: DNSSDService] = [:]
                var first = true
                while !Task.isCancelled {
                    var ttl: UInt32?
                    do {
                        let look = try await snapshot(fresh: !first)
                        for event in ServiceChanges.events(from: known, to: look.services) {
                            continuation.yield(event)
                        }
                        known = look.services
                        ttl = look.ttl
                    } catch {
                        // The first look failing is the caller's error; later ones keep what we know and retry.
                        if first {
                            continuation.finish(throwing: error)
                            return
                        }
                        logger.info("unicast browse: look failed", metadata: ["dns.name": "\(ptrName)", "error": "\(error)"])
                    }
                    if first {
                        continuation.yield(.allForNow)
                        first = false
                    }
                    do { try await Task.sleep(for: schedule.delay(afterTTL: ttl)) } catch { break }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

extension ServiceInstanceName {
    /// The name for logs.
    var queryNameText: String { (try? queryName()) ?? "\(instance).\(type).\(domain)" }
}
