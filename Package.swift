// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "discoverd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "discoverd", targets: ["discoverd"]),
        .executable(name: "discover", targets: ["discover"]),
        .library(name: "DiscoverClient", targets: ["DiscoverClient"]),
        .library(name: "DiscoverAPI", targets: ["DiscoverAPI"]),
        .library(name: "DNSCore", targets: ["DNSCore"]),
        .library(name: "Resolver", targets: ["Resolver"]),
        .library(name: "DNSSDModel", targets: ["DNSSDModel"]),
        .library(name: "Discovery", targets: ["Discovery"]),
        .library(name: "DNSStub", targets: ["DNSStub"]),
        .library(name: "DiscoverServer", targets: ["DiscoverServer"]),
        .library(name: "WideAreaDiscovery", targets: ["WideAreaDiscovery"]),
        .library(name: "DNSSD", targets: ["DNSSD"]),
    ],
    dependencies: [

        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // DNS over HTTPS upstreams: HTTP/2 (TLS is system OpenSSL through CTLSShim, README "Encrypted upstreams").
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        // C shims: system libraries found with pkg-config.
        .systemLibrary(name: "CAvahi", pkgConfig: "avahi-client", providers: [.apt(["libavahi-client-dev"])]),
        .target(name: "CStubIO"),
        // epoll and eventfd for Resolver's IOLoop.
        .target(name: "CIOLoop"),
        .target(name: "CBenchIO"),
        .systemLibrary(name: "CLDNS", pkgConfig: "ldns", providers: [.apt(["libldns-dev"])]),
        // TLS client of the DoT and DoH upstreams over system OpenSSL (libssl-dev) with memory BIOs and session
        // resumption.
        .target(name: "CTLSShim", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),

        // Wire types and varlink framing: no C, no NIO, usable by any client.
        .target(name: "DiscoverAPI", dependencies: ["DNSSDModel"], swiftSettings: strict),

        // DNS wire types without C: names, record types, messages, the stub's query/reply codec, local zones.
        .target(name: "DNSCore", swiftSettings: strict),

        // DNS: ldns codec, async I/O, cache, optimistic DNS, RFC 9460, connection plans.
        .target(
            name: "Resolver",
            dependencies: [
                "CIOLoop", "CLDNS", "CTLSShim", "DNSCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // The DNS stub listener: DNS on UDP and TCP from the resolver's cache, `.local` through a LocalRecordSource.
        .target(
            name: "DNSStub",
            dependencies: [
                "DNSCore", "Resolver",
                "CStubIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),

        // The DNS-SD model, no C: service instances, types and subtypes, TXT, validation, browse and advertisement
        // events, the registration protocol, the error type. Discovery (mDNS) and WideAreaDiscovery (unicast) implement it.
        .target(name: "DNSSDModel", swiftSettings: strict),

        // DNS-SD over one Avahi client.
        .target(
            name: "Discovery",
            dependencies: ["CAvahi", "DNSCore", "DNSSDModel", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // DNS-SD over unicast DNS: browse through the resolver's cache, registration by DNS UPDATE with TSIG (ldns).
        .target(
            name: "WideAreaDiscovery",
            dependencies: [
                "CLDNS", "DNSCore", "DNSSDModel", "Resolver",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // DNS-SD for a program, as the daemon does it: one facade over mDNS (Discovery) and unicast DNS
        // (WideAreaDiscovery) that picks the side per domain, merges the browse of every browse domain and keeps
        // Avahi's thread rule.
        .target(
            name: "DNSSD", dependencies: ["DNSSDModel", "Discovery", "WideAreaDiscovery"], swiftSettings: strict),

        // Async Swift client of the daemon.
        .target(
            name: "DiscoverClient",
            dependencies: [
                "DiscoverAPI", "DNSSDModel",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),

        // The varlink server (framing, ordering, back-pressure, limits) and one adapter per interface.
        .target(
            name: "DiscoverServer",
            dependencies: [
                "DiscoverAPI", "DNSCore", "DNSSD", "DNSSDModel", "Resolver", "Discovery", "WideAreaDiscovery",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),

        .executableTarget(
            name: "discoverd",
            dependencies: [
                "DiscoverAPI", "DiscoverServer", "DNSCore", "DNSSD", "DNSSDModel", "Resolver", "Discovery", "DNSStub",
                "WideAreaDiscovery",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "discover",
            dependencies: [
                "DiscoverAPI", "DiscoverClient", "DNSSDModel", "DNSCore", "Resolver",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // Browse fan-out benchmark (BENCHMARKS-discovery.md, Scripts/bench-discovery).
        .executableTarget(
            name: "discovery-bench",
            dependencies: ["DNSSDModel", "Discovery", "DiscoverClient", "DiscoverAPI", "CBenchIO"],
            exclude: ["adlatency.py"],
            swiftSettings: strict
        ),

        .testTarget(name: "DiscoverAPITests", dependencies: ["DiscoverAPI", "DNSSDModel"], swiftSettings: strict),
        .testTarget(name: "DNSCoreTests", dependencies: ["DNSCore"], swiftSettings: strict),
        // DNSStub too: the DNSSEC suite checks AD, CD and EDE through the stub with the same signed test zones.
        .testTarget(
            name: "ResolverTests",
            dependencies: [
                "CLDNS", "DNSCore", "DNSStub", "Resolver",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .testTarget(name: "DNSStubTests", dependencies: ["DNSCore", "DNSStub", "Resolver"], swiftSettings: strict),
        .testTarget(name: "DNSSDModelTests", dependencies: ["DNSSDModel"], swiftSettings: strict),
        .testTarget(name: "DNSSDTests", dependencies: ["DNSSD", "DNSSDModel"], swiftSettings: strict),
        .testTarget(
            name: "DiscoveryTests", dependencies: ["Discovery", "DNSCore", "DNSSDModel", "LabSupport"], swiftSettings: strict),
        .testTarget(
            name: "WideAreaDiscoveryTests", dependencies: ["WideAreaDiscovery", "DNSCore", "DNSSDModel", "Resolver"],
            swiftSettings: strict),
        .testTarget(
            name: "DiscoverServerTests",
            dependencies: [
                "DiscoverServer", "DiscoverAPI", "DNSCore", "DNSSDModel", "Resolver", "Discovery", "WideAreaDiscovery",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "DiscoverClientTests", dependencies: ["DiscoverClient", "DiscoverAPI", "DNSSDModel"],
            swiftSettings: strict),
        .testTarget(name: "discoverdTests", dependencies: ["discoverd"], swiftSettings: strict),
        // Helpers every lab test shares: the lab's environment, one posix_spawn process type, peers, polling,
        // stream logs, the lock over host a's avahi-daemon.
        .target(name: "LabSupport", dependencies: ["DNSSDModel"], path: "Tests/LabSupport", swiftSettings: strict),
        // Integration tests: start the built daemon binary on the network lab.
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["DiscoverClient", "DiscoverAPI", "DNSSDModel", "LabSupport"],
            swiftSettings: strict
        ),
    ]
)
