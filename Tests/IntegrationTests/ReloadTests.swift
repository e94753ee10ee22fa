import DiscoverAPI
import DiscoverClient
import Foundation
import LabSupport
import Testing

/// Reload (SIGHUP and `io.discoverd.Daemon.Reload`) puts the file's settings into the running daemon; `Status`
/// shows what is in effect.
@Suite("Reload", .serialized)
struct ReloadTests {
    static func reload(_ client: DiscoverClient) async throws {
        _ = try await client.call(Methods.reload, VarlinkEmpty())
    }

    @Test func reloadPutsEveryLiveSettingIntoEffect() async throws {
        // The socket comes from the file (a flag would override the file, on reload too).
        let run = TemporaryDirectory("run")
        let socket = run.path + "/io.discoverd"
        let daemon = try DaemonProcess(
            config: "[daemon]\nlog-level = info\nsocket = \(socket)\n", socketPath: socket, passSocketFlag: false)
        let client = DiscoverClient(socketPath: daemon.socketPath)
        let before = try #require(try await client.status().settings)
        #expect(before.logLevel == "info")
        #expect(before.maxConnections == 16384)
        #expect(before.timeoutMs == 1500)

        try """
            [daemon]
            log-level = debug
            socket = /tmp/elsewhere/io.discoverd
            [limits]
            max-connections = 77
            max-send-buffer = 65536
            max-queued-calls = 9
            max-message-size = 4096
            [resolver]
            timeout-ms = 250
            attempts = 3
            optimistic = no
            stale-ttl = 7
            max-stale = 600
            refresh-retry = 11
            no-optimistic-domain = bank.example
            cache-size = 500
            persist-interval = 60
            """.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try await Self.reload(client)
        let after = try #require(try await client.status().settings)
        #expect(after.logLevel == "debug")
        #expect(after.maxConnections == 77)
        #expect(after.maxSendBuffer == 65536)
        #expect(after.maxQueuedCalls == 9)
        #expect(after.maxMessageSize == 4096)
        #expect(after.timeoutMs == 250)
        #expect(after.attempts == 3)
        #expect(after.optimistic == false)
        #expect(after.staleTtl == 7)
        #expect(after.maxStale == 600)
        #expect(after.refreshRetry == 11)
        #expect(after.noOptimisticDomains == ["bank.example"])
        #expect(after.cacheSize == 500)
        #expect(after.persistInterval == 60)
        // The flag still wins over the file: the upstream stays the one given on the command line.
        #expect(try await client.status().upstreams == ["127.0.0.1:9"])
        // The socket needs a restart: named in the log, and the daemon still serves where it was.
        #expect(daemon.log.contains("needs a restart"))
        #expect(daemon.log.contains("[daemon] socket"))
        #expect(FileManager.default.fileExists(atPath: daemon.socketPath))

        // The new message-size limit holds for a new connection.
        let connection = try RawConnection(path: daemon.socketPath)
        connection.write([UInt8](repeating: UInt8(ascii: "x"), count: 5000))
        #expect(connection.readJSON()?["error"] as? String == "io.discoverd.Daemon.MessageTooLarge")
        // Debug lines appear from now on.
        _ = await discoverError { try await client.resolveAddresses("debug-probe.lab.test.") }
        #expect(await eventually { daemon.log.contains("upstream try ended") }, "no debug line after log-level = debug")
        await client.close()
        #expect(daemon.stop() == 0)
    }

    @Test func anInvalidFileIsRefusedByNameAndChangesNothing() async throws {
        let daemon = try DaemonProcess(config: "[resolver]\ntimeout-ms = 400\n")
        let client = DiscoverClient(socketPath: daemon.socketPath)
        try "[resolver]\ntimeout-ms = 300\nattempts = many\n".write(
            toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let error = await discoverError { try await Self.reload(client) }
        #expect(error?.code == .invalidConfiguration, "\(String(describing: error))")
        let reason = error?.parameters["reason"]?.stringValue ?? ""
        #expect(reason.contains("discoverd.conf:3"), "file and line in \(reason)")
        #expect(reason.contains("attempts"), "key in \(reason)")
        // Nothing changed, not even the valid line before the bad one; the daemon keeps serving.
        #expect(try await client.status().settings?.timeoutMs == 400)
        // SIGHUP with the same file logs the same reason.
        kill(daemon.pid, SIGHUP)
        #expect(await eventually { daemon.log.contains("reload failed") && daemon.log.contains("attempts") })
        #expect(try await client.status().version == DiscoverdVersion.current)
        await client.close()
        #expect(daemon.stop() == 0)
    }

    @Test func withoutAConfigurationFileThereIsNothingToReload() async throws {
        let daemon = try DaemonProcess()
        kill(daemon.pid, SIGHUP)
        #expect(await eventually { daemon.log.contains("nothing to reload") })
        let client = DiscoverClient(socketPath: daemon.socketPath)
        try await Self.reload(client)
        #expect(try await client.status().version == DiscoverdVersion.current)
        await client.close()
        #expect(daemon.stop() == 0)
    }

    /// `systemctl reload` can come as soon as the socket exists. SIGHUP is trapped before anything is bound, so a
    /// hangup sent the moment the socket file appears is a reload, never SIGHUP's default action (terminate), which
    /// it was while the service group was still starting its SIGHUP service (seen once in CI).
    @Test func aHangupAsSoonAsTheSocketAppearsIsAReload() async throws {
        for _ in 0..<8 {
            let daemon = try DaemonProcess(waitForSocket: false)
            let deadline = Date().addingTimeInterval(20)
            var info = stat()
            while stat(daemon.socketPath, &info) != 0 && daemon.isRunning && Date() < deadline { usleep(200) }
            kill(daemon.pid, SIGHUP)
            try daemon.waitForSocket()
            #expect(await eventually { daemon.log.contains("nothing to reload") }, "\(daemon.log)")
            #expect(daemon.stop() == 0)
        }
    }

    /// A dead upstream replaced by a live one (Knot on the lab) through SIGHUP: the next lookup succeeds, no restart.
    @Test(.enabled(if: ResolverLab.shouldRun, "network lab not up (Scripts/lab up)"))
    func aDeadUpstreamIsReplacedBySIGHUP() async throws {
        // Port 9 on the namespace's loopback: nothing answers.
        let daemon = try labDaemon(
            config: "[resolver]\nupstream = 127.0.0.1:9\ntimeout-ms = 300\nattempts = 1\n", upstreamFromConfig: true)
        let client = DiscoverClient(socketPath: daemon.socketPath)
        let failed = await discoverError { try await client.resolveHTTPS("h3.lab.test") }
        #expect(failed?.code == .resolverTimeout, "\(String(describing: failed))")
        let pid = daemon.pid

        try "[resolver]\nupstream = \(ResolverLab.knot)\ntimeout-ms = 1000\nattempts = 2\n".write(
            toFile: daemon.configPath, atomically: true, encoding: .utf8)
        kill(pid, SIGHUP)
        #expect(await eventually { daemon.log.contains("configuration reloaded") }, "log:\n\(daemon.log)")
        let status = try await client.status()
        #expect(status.upstreams == ["\(ResolverLab.knot):53"])
        #expect(status.settings?.timeoutMs == 1000)

        let reply = try await client.resolveHTTPS("h3.lab.test")
        #expect(reply.h3, "\(reply)")
        #expect(reply.timing.queries.allSatisfy { $0.server == "\(ResolverLab.knot):53" }, "\(reply.timing.queries)")
        #expect(daemon.pid == pid && daemon.isRunning, "same process, no restart")
        await client.close()
        #expect(daemon.stop() == 0)
    }
}
