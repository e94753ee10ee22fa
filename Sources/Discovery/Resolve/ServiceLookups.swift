import CAvahi
import DNSSDModel

/// One-shot lookups: resolve one instance, list service types, list browse domains.
enum ServiceLookups {
    /// How long to wait for the second address family once the first answered.
    static let secondFamilyGrace: Duration = .milliseconds(250)

    struct ResolveState {
        var table = ServiceInstanceTable()
        var resolvers: [ServiceResolverHandle] = []
        var answered: Set<Int32> = []
        var errors: [DNSSDError] = []
        var graceStarted = false
    }

    static func resolve(client: AvahiClientHandle, key: InstanceKey, timeout: Duration) async throws -> DNSSDService {
        typealias Operation = OneShotOperation<DNSSDService, ResolveState>
        let operation = Operation(client: client, state: ResolveState()) { state in
            for resolver in state.resolvers { resolver.close() }
            state.resolvers.removeAll()
        }

        @Sendable func result(_ operation: Operation) -> DNSSDService? {
            operation.state.table.instances[key]?.service(includeResolved: true)
        }

        @Sendable func handle(_ operation: Operation, _ event: ServiceResolverEvent, family: Int32) {
            guard !operation.isFinished else { return }
            switch event.result {
            case .success(let found):
                let sighting = Sighting(interface: event.interface, proto: event.proto)
                _ = operation.state.table.add(
                    key,
                    on: sighting,
                    interfaceName: AvahiConversions.interfaceName(event.interface)
                )
                _ = operation.state.table.resolved(
                    key,
                    on: sighting,
                    Resolution(host: found.host, port: found.port, address: found.address, txt: found.txt)
                )
            case .failure(let error):
                operation.state.errors.append(error)
            }
            operation.state.answered.insert(family)
            if operation.state.answered.count >= operation.state.resolvers.count {
                if let service = result(operation) {
                    operation.finish(.success(service))
                } else {
                    let error = operation.state.errors.first
                    if error == nil || error?.code == .timeout || error?.code == .notFound {
                        operation.finish(
                            .failure(DNSSDError(.notFound, "no answer for \(key.name).\(key.type).\(key.domain)"))
                        )
                    } else {
                        operation.finish(.failure(error!))
                    }
                }
            } else if result(operation) != nil, !operation.state.graceStarted {
                operation.state.graceStarted = true
                Task {
                    try? await Task.sleep(for: secondFamilyGrace)
                    operation.poll.performLocked {
                        if let service = result(operation) { operation.finish(.success(service)) }
                    }
                }
            }
        }

        return try await operation.run(timeout: timeout) { operation in
            var firstError: DNSSDError?
            for family in [AvahiConversions.protocolIPv4, AvahiConversions.protocolIPv6] {
                do throws(DNSSDError) {
                    let resolver = try ServiceResolverHandle(
                        client: client,
                        interface: AvahiConversions.interfaceUnspecified,
                        proto: family,
                        name: key.name,
                        type: key.type,
                        domain: key.domain
                    ) { [weak operation] event in
                        guard let operation else { return }
                        handle(operation, event, family: family)
                    }
                    operation.state.resolvers.append(resolver)
                } catch {
                    firstError = firstError ?? error
                }
            }
            if operation.state.resolvers.isEmpty, let firstError { throw firstError }
        } onTimeout: { operation in
            if let service = result(operation) { return .success(service) }
            return .failure(
                DNSSDError(.timeout, "no answer for \(key.name).\(key.type).\(key.domain) within \(timeout)")
            )
        }
    }

    struct CollectState<Handle> {
        var handle: Handle?
        var items: Set<String> = []
    }

    static func browseTypes(client: AvahiClientHandle, domain: String?, timeout: Duration) async throws -> [String] {
        typealias Operation = OneShotOperation<[String], CollectState<ServiceTypeBrowserHandle>>
        let operation = Operation(client: client, state: CollectState()) { state in
            state.handle?.close()
            state.handle = nil
        }
        return try await operation.run(timeout: timeout) { operation in
            operation.state.handle = try ServiceTypeBrowserHandle(client: client, domain: domain) {
                [weak operation] event in
                guard let operation, !operation.isFinished else { return }
                switch event.kind {
                case .new: operation.state.items.insert(event.type)
                case .remove: operation.state.items.remove(event.type)
                case .allForNow: operation.finish(.success(operation.state.items.sorted()))
                case .cacheExhausted: break
                case .failure(let error): operation.finish(.failure(error))
                }
            }
        } onTimeout: { operation in
            .success(operation.state.items.sorted())
        }
    }

    static func browseDomains(client: AvahiClientHandle, timeout: Duration) async throws -> [String] {
        typealias Operation = OneShotOperation<[String], CollectState<DomainBrowserHandle>>
        let operation = Operation(client: client, state: CollectState(items: ["local"])) { state in
            state.handle?.close()
            state.handle = nil
        }
        return try await operation.run(timeout: timeout) { operation in
            operation.state.handle = try DomainBrowserHandle(client: client) { [weak operation] event in
                guard let operation, !operation.isFinished else { return }
                let domain = AvahiConversions.normalizedDomain(event.domain)
                switch event.kind {
                case .new where !domain.isEmpty: operation.state.items.insert(domain)
                case .remove where domain != "local": operation.state.items.remove(domain)
                case .allForNow: operation.finish(.success(operation.state.items.sorted()))
                case .failure(let error): operation.finish(.failure(error))
                default: break
                }
            }
        } onTimeout: { operation in
            .success(operation.state.items.sorted())
        }
    }
}
