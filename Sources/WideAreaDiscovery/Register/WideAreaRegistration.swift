import DNSCore
import DNSSDModel
import Logging
import Synchronization

/// A service registered in a unicast zone by DNS UPDATE. It stays registered (refreshed before its TTL or lease
/// runs out) until ``withdraw()``, which deletes its records.
///
/// `events` says `registered` with the final name (after `Name (2)` renames on conflicts) or `failed` with an
/// error naming the server's rcode; nothing is left half-registered, because each UPDATE is atomic (RFC 2136 §3.4).
public final class WideAreaRegistration: ServiceRegistration {
    /// The id the API reports (`wa-N`, distinct from Avahi registration ids).
    public let registrationID: String
    /// `registered` first, later `failed`; ends when withdrawn or failed. Meant for one consumer.
    public let events: AsyncStream<AdvertisementEvent>

    private struct State {
        var plan: RegistrationPlan
        var registered = false
        var withdrawn = false
        var lifecycle: Task<Void, Never>?
        /// The zone and server, once located.
        var target: UpdateTarget?
    }

    private let state: Mutex<State>
    private let continuation: AsyncStream<AdvertisementEvent>.Continuation
    private let owner: UnicastDNSSD
    private let locator: UpdateServerLocator
    private let key: TSIGKey

    init(id: String, plan: RegistrationPlan, locator: UpdateServerLocator, key: TSIGKey, owner: UnicastDNSSD) {
        registrationID = id
        (events, continuation) = AsyncStream.makeStream()
        state = Mutex(State(plan: plan))
        self.owner = owner
        self.locator = locator
        self.key = key
    }

    /// The name registered (after renames).
    public var name: String { state.withLock { $0.plan.instance } }

    /// Starts registering; called once by ``UnicastDNSSD/advertise(name:type:port:txt:subtypes:domain:host:)``.
    func start() {
        let task = Task { await self.run() }
        state.withLock { $0.lifecycle = task }
    }

    /// Registers (renaming on conflicts), then refreshes until cancelled.
    private func run() async {
        var attempt = 0
        let requested = state.withLock { $0.plan.instance }
        let target: UpdateTarget
        do {
            target = try await locator.locate(domain: state.withLock { $0.plan.domain })
        } catch {
            fail(error)
            return
        }
        state.withLock {
            $0.target = target
            $0.plan.zone = target.zone
        }
        while !Task.isCancelled {
            let plan = state.withLock { $0.plan }
            do {
                // Journal first: a crash between the UPDATE and the write must not leave records nobody deletes.
                owner.journal.record(plan, id: registrationID)
                let reply = try await owner.sendUpdate(plan.registration, plan: plan, target: target, key: key)
                if reply.rcode == "YXDOMAIN" {
                    attempt += 1
                    guard attempt < 10 else {
                        owner.journal.forget(id: registrationID)
                        fail(WideAreaError(.nameConflict, "\(requested): every alternative name is taken", rcode: "YXDOMAIN"))
                        return
                    }
                    state.withLock { $0.plan.instance = RegistrationPlan.alternative(to: requested, attempt: attempt) }
                    continue
                }
                guard reply.isSuccess else {
                    owner.journal.forget(id: registrationID)
                    fail(owner.rejection(reply.rcode, plan: plan, target: target))
                    return
                }
                state.withLock { $0.registered = true }
                continuation.yield(.registered(name: plan.instance))
                await refreshLoop(lease: reply.lease, target: target)
                return
            } catch {
                owner.journal.forget(id: registrationID)
                fail(error)
                return
            }
        }
    }

    /// Refreshes before the lease (RFC 9664) or TTL runs out, at 80 % of it.
    private func refreshLoop(lease: UInt32?, target: UpdateTarget) async {
        var lease = lease
        while !Task.isCancelled {
            let plan = state.withLock { $0.plan }
            let period = Double(min(lease ?? plan.ttl, plan.ttl * 10)) * 0.8
            do { try await Task.sleep(for: .seconds(max(period, 5))) } catch { return }
            do {
                let reply = try await owner.sendUpdate(plan.refresh, plan: plan, target: target, key: key)
                if reply.rcode == "NXRRSET" {
                    fail(WideAreaError(.nameConflict, "\(plan.instance): our records were removed from \(target.zone)",
                        rcode: reply.rcode))
                    return
                }
                if reply.isSuccess { lease = reply.lease ?? lease }
            } catch {
                owner.logger.info("wide-area refresh failed; retrying later", metadata: ["error": "\(error)"])
            }
        }
    }

    private func fail(_ error: WideAreaError) {
        _ = owner.finished(id: registrationID, host: state.withLock { $0.plan.host })
        let code: DNSSDError.Code = error.code == .nameConflict ? .nameConflict : .invalidParameter
        continuation.yield(.failed(DNSSDError(code, error.message)))
        continuation.finish()
    }

    /// Replaces the TXT record (an UPDATE deleting the old TXT and adding the new, while our SRV is there).
    /// - Throws: `DNSSDError.invalidParameter` for a bad TXT; `WideAreaError` when the server refuses.
    public func updateTXT(_ txt: [String: String?]) throws {
        let validated = try TXTRecord(validating: txt)
        let (old, new, located) = state.withLock { state in
            let old = state.plan
            state.plan.txt = validated.strings
            return (old, state.plan, state.target)
        }
        guard let target = located, !state.withLock({ $0.withdrawn }) else {
            throw WideAreaError(.notFound, "\(old.instance) is not registered (yet)")
        }
        owner.journal.record(new, id: registrationID)
        let update = ([new.srv.mustExist], [old.txtRecord.deletion, new.txtRecord])
        let key = self.key
        let owner = self.owner
        Task {
            do {
                let reply = try await owner.sendUpdate(update, plan: new, target: target, key: key)
                if !reply.isSuccess { owner.logger.info("TXT update refused", metadata: ["rcode": "\(reply.rcode)"]) }
            } catch {
                owner.logger.info("TXT update failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Deletes the records and ends `events`. Idempotent; the deletion runs on after this returns.
    public func withdraw() {
        let (task, plan, wasRegistered, first, located) = state.withLock { state in
            defer { state.withdrawn = true }
            return (state.lifecycle, state.plan, state.registered, !state.withdrawn, state.target)
        }
        guard first else { return }
        task?.cancel()
        continuation.finish()
        let includeHost = owner.finished(id: registrationID, host: plan.host)
        guard wasRegistered, let target = located else {
            owner.journal.forget(id: registrationID)
            return
        }
        let key = self.key
        let owner = self.owner
        let id = registrationID
        owner.track {
            do {
                let reply = try await owner.sendUpdate(
                    plan.removal(includingHost: includeHost), plan: plan, target: target, key: key)
                owner.logger.info(
                    "wide-area registration deleted",
                    metadata: ["name": "\(plan.instance)", "zone": "\(target.zone)", "rcode": "\(reply.rcode)"])
                owner.journal.forget(id: id)
            } catch {
                // Kept in the journal: deleted at the next start.
                owner.logger.warning("deleting a wide-area registration failed", metadata: ["error": "\(error)"])
            }
        }
    }

    deinit {
        withdraw()
    }
}
