import CAvahi
import DNSSDModel
import Logging
import Synchronization

/// What the client's owners are told about the connection to avahi-daemon.
enum AvahiClientEvent {
    /// avahi-daemon is up and its host name established (`AVAHI_CLIENT_S_RUNNING`): create browsers, register.
    case running(OpaquePointer)
    /// avahi-daemon is re-registering its host name (`S_REGISTERING`, `S_COLLISION`): entry groups must be reset.
    /// Browsers stay valid.
    case registering(OpaquePointer)
    /// The connection is gone (daemon stopped, bus lost, shutdown): free every Avahi object now; the client itself
    /// is freed right after.
    case lost
}

/// Counts of live Avahi objects, for Status and benchmarks. Guarded by the poll lock.
public struct AvahiObjectCounts: Hashable, Sendable {
    /// Service browsers (`avahi_service_browser_new`).
    public var serviceBrowsers = 0
    /// Service resolvers, long-lived ones of browses and one-shot ones.
    public var serviceResolvers = 0
    /// Entry groups (one per advertisement while registered).
    public var entryGroups = 0
    /// Service type, domain and record browsers.
    public var otherBrowsers = 0

    /// All of them.
    public var total: Int { self.serviceBrowsers + self.serviceResolvers + self.entryGroups + self.otherBrowsers }
}

/// Owns the process's single `AvahiClient`, created with `AVAHI_CLIENT_NO_FAIL` on the threaded poll.
///
/// With NO_FAIL the client waits in CONNECTING while avahi-daemon is absent and connects when it appears. When the
/// daemon goes away the client reports FAILURE/DISCONNECTED and is useless; this handle then tells its owners (who
/// free their browsers, resolvers and entry groups), frees the client and creates a new one, which waits in
/// CONNECTING again. If even the system bus is unreachable, creation is retried with a growing delay (up to 10 s).
final class AvahiClientHandle: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is read and written only while holding the poll lock (`withLocked` or
    // inside an Avahi callback); `poll`, `logger` and `box` are immutable.
    let poll: ThreadedPoll
    private let logger: Logger
    private var box: Unmanaged<CallbackBox<(OpaquePointer, AvahiClientState)>>?

    /// The current client, or nil while none could be created.
    private(set) var client: OpaquePointer?
    /// The public state.
    private(set) var state: AvahiState = .unavailable
    /// `state`, readable without the poll lock (Status asks from event loops).
    let publishedState = Mutex<AvahiState>(.unavailable)
    /// Live Avahi objects, maintained by the handle classes.
    var counts = AvahiObjectCounts()

    private var listeners: [(AvahiClientEvent) -> Void] = []
    private var lossObservers: [UInt64: () -> Void] = [:]
    private var nextLossObserverID: UInt64 = 0
    private var stateContinuations: [UInt64: AsyncStream<AvahiState>.Continuation] = [:]
    private var nextContinuationID: UInt64 = 0
    private var connected = false
    /// A client that reported FAILURE, freed on the next connect.
    private var deadClient: OpaquePointer?
    private var retryDelay: Duration = .milliseconds(250)
    private var reconnectScheduled = false
    private var closed = false

    init(poll: ThreadedPoll, logger: Logger) {
        self.poll = poll
        self.logger = logger
        let box = CallbackBox<(OpaquePointer, AvahiClientState)>(poll: poll) { [weak self] event in
            self?.handleState(client: event.0, state: event.1)
        }
        self.box = Unmanaged.passRetained(box)
    }

    /// Registers an owner to be told about connection changes. Call under the lock, before `start`.
    func addListener(_ listener: @escaping (AvahiClientEvent) -> Void) {
        self.listeners.append(listener)
    }

    /// Registers a short-lived owner (a one-shot lookup, a record stream) to be told, lock held, that the connection
    /// is lost: it must free its Avahi objects then, because `avahi_client_free` frees them right after and a later
    /// free would be a double free. Lock held. Returns the id for `removeLossObserver`.
    func addLossObserver(_ observer: @escaping () -> Void) -> UInt64 {
        self.nextLossObserverID += 1
        self.lossObservers[self.nextLossObserverID] = observer
        return self.nextLossObserverID
    }

    /// Forgets a loss observer. Lock held.
    func removeLossObserver(_ id: UInt64) {
        self.lossObservers[id] = nil
    }

    /// Creates the first client.
    func start() {
        self.poll.withLocked { self.connect() }
    }

    /// The client if it is usable for browsing and resolving (connected, also while the host name registers).
    func connectedClient() throws(DNSSDError) -> OpaquePointer {
        guard self.connected, let client = self.client else {
            throw DNSSDError(.avahiUnavailable, "avahi-daemon is not available (state: \(self.state.rawValue))")
        }
        return client
    }

    /// The client if avahi-daemon is running (needed to register services).
    func runningClient() throws(DNSSDError) -> OpaquePointer {
        guard self.state == .running, let client = self.client else {
            throw DNSSDError(.avahiUnavailable, "avahi-daemon is not running (state: \(self.state.rawValue))")
        }
        return client
    }

    /// A stream of states, starting with the current one. Each subscriber keeps only the newest 16 if it lags.
    func stateStream() -> AsyncStream<AvahiState> {
        let (stream, continuation) = AsyncStream.makeStream(of: AvahiState.self, bufferingPolicy: .bufferingNewest(16))
        let id: UInt64 = self.poll.withLocked {
            self.nextContinuationID += 1
            let id = self.nextContinuationID
            if self.closed {
                continuation.yield(self.state)
                continuation.finish()
                return id
            }
            self.stateContinuations[id] = continuation
            continuation.yield(self.state)
            return id
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.poll.performLocked { _ = self.stateContinuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Frees everything; the handle is unusable afterwards. Safe to call more than once.
    func close() {
        self.poll.withLocked {
            guard !self.closed else { return }
            self.closed = true
            self.dropClient()
            self.setState(.unavailable)
            for continuation in self.stateContinuations.values { continuation.finish() }
            self.stateContinuations.removeAll()
        }
    }

    deinit {
        self.close()
        self.box?.release()
    }

    // MARK: - Lock held from here on

    private func connect() {
        if let dead = self.deadClient {
            self.deadClient = nil
            avahi_client_free(dead)
        }
        guard !self.closed, self.client == nil, let box = self.box else { return }
        var error: Int32 = 0
        // The callback may run synchronously inside avahi_client_new (CONNECTING or RUNNING); handleState adopts the
        // client pointer it is given then.
        let client = avahi_client_new(
            self.poll.api,
            AVAHI_CLIENT_NO_FAIL,
            { client, state, userdata in
                guard let client, let box = CallbackBox<(OpaquePointer, AvahiClientState)>.fromCallback(userdata)
                else { return }
                box.handler((client, state))
            },
            box.toOpaque(),
            &error
        )
        guard let client else {
            let text = avahi_strerror(error).map { String(cString: $0) } ?? "\(error)"
            self.logger.info(
                "cannot create Avahi client; will retry",
                metadata: ["avahi.error": "\(text)", "retry.ms": "\(self.retryDelay.components.seconds * 1000)"]
            )
            self.setState(.unavailable)
            self.scheduleReconnect(after: self.retryDelay)
            self.retryDelay = min(self.retryDelay * 2, .seconds(10))
            return
        }
        self.client = client
        self.retryDelay = .milliseconds(250)
    }

    private func handleState(client: OpaquePointer, state: AvahiClientState) {
        // A callback from inside avahi_client_new, before it returned the pointer; never a client already dead.
        if self.client == nil && !self.closed && client != self.deadClient {
            self.client = client
        }
        guard client == self.client else { return }
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            self.logger.info("avahi-daemon running")
            self.connected = true
            self.setState(.running)
            self.notify(.running(client))
        case AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            self.connected = true
            self.setState(.connecting)
            self.notify(.registering(client))
        case AVAHI_CLIENT_CONNECTING:
            if self.connected {
                self.logger.warning("lost avahi-daemon; waiting for it to come back")
                self.connected = false
                self.notify(.lost)
            } else {
                self.logger.info("waiting for avahi-daemon")
            }
            self.setState(.connecting)
        default:
            // AVAHI_CLIENT_FAILURE: with NO_FAIL this is the daemon leaving the bus (AVAHI_ERR_DISCONNECTED) or the
            // bus itself failing. The client is dead; replace it.
            let error = avahi_client_errno(client)
            let text = avahi_strerror(error).map { String(cString: $0) } ?? "\(error)"
            // Losing avahi-daemon stops every browse and advertisement until it is back: an operator wants to know.
            self.logger.log(
                level: self.connected ? .warning : .info, "Avahi client failed; reconnecting",
                metadata: ["avahi.error": "\(text)"])
            if self.connected {
                self.connected = false
                self.notify(.lost)
            }
            // Free the dead client and create its successor outside this callback: Avahi is still unwinding the
            // dead client's D-Bus dispatch.
            self.client = nil
            self.deadClient = client
            self.setState(Int(error) == AVAHI_ERR_DISCONNECTED ? .connecting : .unavailable)
            self.scheduleReconnect(after: .zero)
        }
    }

    /// Tells owners to free their objects, then frees the client. Lock held.
    private func dropClient() {
        if self.connected {
            self.connected = false
            self.notify(.lost)
        }
        if let client = self.client {
            self.client = nil
            avahi_client_free(client)
        }
        if let client = self.deadClient {
            self.deadClient = nil
            avahi_client_free(client)
        }
    }

    private func scheduleReconnect(after delay: Duration) {
        guard !self.reconnectScheduled, !self.closed else { return }
        self.reconnectScheduled = true
        Task { [weak self] in
            if delay > .zero { try? await Task.sleep(for: delay) }
            guard let self else { return }
            self.poll.performLocked {
                self.reconnectScheduled = false
                self.connect()
            }
        }
    }

    private func notify(_ event: AvahiClientEvent) {
        for listener in self.listeners { listener(event) }
        if case .lost = event {
            // Iterates a copy: observers remove themselves.
            for observer in self.lossObservers.values { observer() }
        }
    }

    private func setState(_ state: AvahiState) {
        guard state != self.state else { return }
        self.state = state
        self.publishedState.withLock { $0 = state }
        for continuation in self.stateContinuations.values { continuation.yield(state) }
    }
}
