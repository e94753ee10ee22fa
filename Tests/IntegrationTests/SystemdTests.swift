import DiscoverClient
import Foundation
import LabSupport
import Testing

/// The daemon under a service manager: sd_notify (READY, STATUS, WATCHDOG, STOPPING), socket activation
/// (`systemd-socket-activate` and a hand-made `LISTEN_FDS`), journald priority prefixes, admin actions logged
/// with the peer, and the Swift runtime under `MemoryDenyWriteExecute=`.
@Suite("systemd integration")
struct SystemdTests {
    static let socketActivate = "/usr/bin/systemd-socket-activate"
    static let getInfo = #"{"method":"org.varlink.service.GetInfo"}"#

    /// Calls GetInfo on `path` and returns the vendor it names.
    static func vendor(at path: String, timeout: Double = 20) throws -> String? {
        let connection = try RawConnection(path: path)
        connection.call(getInfo)
        return (connection.readJSON(timeout: timeout)?["parameters"] as? [String: Any])?["vendor"] as? String
    }

    /// Voluntary context switches (each a wait that ended in a wake-up) of each of the stub's UDP threads, by name.
    static func udpThreadWakeUps(_ pid: pid_t) -> [String: Int] {
        var counts: [String: Int] = [:]
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            let directory = "/proc/\(pid)/task/\(task)"
            guard let name = try? String(contentsOfFile: directory + "/comm", encoding: .utf8),
                name.hasPrefix("dns-udp"), let status = try? String(contentsOfFile: directory + "/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches:") }),
                let count = Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "")
            else { continue }
            counts[name.trimmingCharacters(in: .whitespacesAndNewlines)] = count
        }
        return counts
    }

    static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }

    @Test func notifiesReadyOnlyWhenTheSocketAcceptsThenWatchdogAndStopping() throws {
        let scratch = TemporaryDirectory("sdnotify")
        let notify = try NotifyListener(address: scratch.path + "/notify")
        let daemon = try DaemonProcess(
            environment: ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "200000"], waitForSocket: false)
        #expect(notify.waitUntil { _ in !notify.indices(of: "READY").isEmpty }, "no READY=1; log:\n\(daemon.log)")
        // Right after READY=1 a client connects and is answered: the socket was bound before it was sent.
        #expect(try Self.vendor(at: daemon.socketPath) == "discoverd")
        let ready = try #require(notify.indices(of: "READY").first)
        let status = NotifyListener.fields(notify.messages[ready])["STATUS"] ?? ""
        #expect(status.contains("varlink \(daemon.socketPath)"), "STATUS=\(status)")
        // WATCHDOG_USEC=200000: a keep-alive every 100 ms, still coming after READY.
        #expect(notify.waitUntil(timeout: 10) { _ in notify.indices(of: "WATCHDOG").filter { $0 > ready }.count >= 3 })
        #expect(daemon.stop() == 0)
        #expect(notify.waitUntil(timeout: 5) { _ in !notify.indices(of: "STOPPING").isEmpty })
        #expect(notify.indices(of: "READY") == [ready], "READY=1 exactly once")
        #expect(notify.indices(of: "STOPPING").allSatisfy { $0 > ready })
        // The log says "started" after the socket is bound, never before.
        let log = daemon.log
        let listening = try #require(log.range(of: "listening"))
        let started = try #require(log.range(of: "discoverd started"))
        #expect(listening.lowerBound < started.lowerBound)
    }

    @Test func abstractNotifySocketAndAWatchdogMeantForAnotherProcess() throws {
        let notify = try NotifyListener(address: "@discoverd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        // WATCHDOG_PID names another process: the watchdog is not ours to feed.
        let daemon = try DaemonProcess(
            environment: ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "100000", "WATCHDOG_PID": "1"],
            waitForSocket: false)
        #expect(notify.waitUntil { _ in !notify.indices(of: "READY").isEmpty }, "no READY=1; log:\n\(daemon.log)")
        _ = notify.waitUntil(timeout: 1) { _ in false }
        #expect(notify.indices(of: "WATCHDOG").isEmpty, "\(notify.messages)")
        #expect(daemon.stop() == 0)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: socketActivate) || ResolverLab.isCI))
    func servesTheSocketSystemdSocketActivatePasses() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.socketActivate),
            "systemd-socket-activate is missing (Debian package systemd, in Scripts/bootstrap)")
        let scratch = TemporaryDirectory("sdactivate")
        let path = scratch.path + "/activated.sock"
        let unused = scratch.path + "/unused.sock"
        let notify = try NotifyListener(address: scratch.path + "/notify")
        let activator = try SpawnedProcess([
            Self.socketActivate, "--listen=\(path)", "--fdname=varlink", "--setenv=NOTIFY_SOCKET=\(notify.address)",
            BuiltProducts.discoverd, "--upstream", "127.0.0.1:9", "--state-dir", scratch.path + "/state",
            "--socket", unused, "--stub-listen", "none",
        ])
        defer { activator.stopBlocking() }
        #expect(await eventually(timeout: .seconds(10)) { Self.isSocket(path) }, "\(activator.stderr)")
        // The first connection makes the activator exec discoverd with the listening socket as descriptor 3.
        #expect(try Self.vendor(at: path) == "discoverd", "\(activator.stderr)")
        let status = try await DiscoverClient(socketPath: path).status()
        #expect(status.version == DiscoverdVersion.current)
        #expect(notify.waitUntil { _ in !notify.indices(of: "READY").isEmpty })
        let ready = NotifyListener.fields(notify.messages[notify.indices(of: "READY")[0]])
        #expect(ready["STATUS"]?.contains("varlink \(path)") == true)

        activator.kill(SIGTERM)
        #expect(await activator.wait(timeout: .seconds(20)) == 0, "\(activator.stderr)")
        await activator.drain()
        #expect(activator.stderr.contains("listening on an inherited socket"))
        #expect(Self.isSocket(path), "the daemon removed a socket it did not create")
        #expect(!FileManager.default.fileExists(atPath: unused), "--socket is not bound when a socket is passed")
    }

    @Test func servesDescriptorsPassedThroughListenFDs() async throws {
        let scratch = TemporaryDirectory("sdfds")
        let path = scratch.path + "/passed.sock"
        let unused = scratch.path + "/unused.sock"
        let listener = try bindUnixSocket(path, type: Int32(SOCK_STREAM.rawValue))
        defer { close(listener) }
        // The DNS stub's sockets, as Config/discoverd-dns.socket passes them (named `dns`), and one nobody serves.
        let udp = try bindLoopbackSocket(type: Int32(SOCK_DGRAM.rawValue))
        defer { close(udp.fd) }
        let tcp = try bindLoopbackSocket(type: Int32(SOCK_STREAM.rawValue))
        defer { close(tcp.fd) }
        let stray = try bindUnixSocket(scratch.path + "/stray.sock", type: Int32(SOCK_DGRAM.rawValue))
        defer { close(stray) }
        let notify = try NotifyListener(address: scratch.path + "/notify")
        // LISTEN_PID must be the daemon's own PID: the shell exports its PID, then execs in place.
        let daemon = try SpawnedProcess(
            [
                "/bin/sh", "-c", #"export LISTEN_PID=$$; exec "$0" "$@""#, BuiltProducts.discoverd,
                "--upstream", "127.0.0.1:9", "--state-dir", scratch.path + "/state", "--socket", unused,
            ],
            environment: [
                "LISTEN_FDS": "4", "LISTEN_FDNAMES": "dns:dns:varlink:stray", "NOTIFY_SOCKET": notify.address,
            ],
            passing: [udp.fd, tcp.fd, listener, stray])
        defer { daemon.stopBlocking() }
        #expect(try Self.vendor(at: path) == "discoverd", "\(daemon.stderr)")
        // READY=1 names both front doors.
        #expect(notify.waitUntil { _ in !notify.indices(of: "READY").isEmpty })
        let ready = NotifyListener.fields(notify.messages[notify.indices(of: "READY").first ?? 0])["STATUS"] ?? ""
        #expect(ready.contains("varlink \(path)") && ready.contains("udp 127.0.0.1:\(udp.port)"), "STATUS=\(ready)")
        let client = DiscoverClient(socketPath: path)
        let status = try await client.status()
        await client.close()
        #expect(status.connections >= 1)
        // The stub serves the passed sockets instead of its default 127.0.0.153:53; kdig gets an answer on both.
        for transport in ["+notcp", "+tcp"] {
            let port = transport == "+tcp" ? tcp.port : udp.port
            let dig = try await SpawnedProcess.run(
                ["/usr/bin/kdig", "@127.0.0.1", "-p", "\(port)", transport, "+time=10", "+retry=0", "nothing.invalid"])
            #expect(dig.stdout.contains("->>HEADER<<-"), "\(transport): \(dig.stdout) \(dig.stderr)")
        }
        // One query at a time on the one passed UDP socket wakes one UDP thread, not every one (each watches the
        // socket exclusively; without that, every thread woke for every query).
        let threads = Self.udpThreadWakeUps(daemon.pid)
        // A machine with one core gives the stub one UDP thread, and there is nothing to tell apart; CI's has more,
        // and there the check must run, not pass by being skipped.
        let inCI = ProcessInfo.processInfo.environment["CI"] == "true"
        #expect(threads.count > 1 || !inCI, "one UDP thread (\(threads)): the exclusive watch cannot be checked")
        if threads.count > 1 {
            for _ in 0..<20 {
                let dig = try await SpawnedProcess.run([
                    "/usr/bin/kdig", "@127.0.0.1", "-p", "\(udp.port)", "+notcp", "+time=10", "+retry=0",
                    "nothing.invalid",
                ])
                #expect(dig.stdout.contains("->>HEADER<<-"), "\(dig.stdout) \(dig.stderr)")
            }
            let after = Self.udpThreadWakeUps(daemon.pid)
            let woken = after.map { name, count in (name, count - threads[name, default: 0]) }.sorted { $0.0 < $1.0 }
            #expect(woken.filter { $0.1 >= 20 }.count == 1 && woken.filter { $0.1 > 2 }.count == 1, "\(woken)")
        }

        daemon.kill(SIGTERM)
        #expect(await daemon.wait(timeout: .seconds(20)) == 0)
        await daemon.drain()
        let log = daemon.stderr
        #expect(log.contains("closing a passed descriptor nothing serves") && log.contains("stray fd=6"), "\(log)")
        #expect(!log.contains("127.0.0.153"), "no default stub address is bound when sockets are passed: \(log)")
        #expect(Self.isSocket(path), "the daemon removed a socket it did not create")
        #expect(!FileManager.default.fileExists(atPath: unused))
    }

    @Test func ignoresDescriptorsPassedToAnotherProcess() async throws {
        let scratch = TemporaryDirectory("sdpid")
        let listener = try bindUnixSocket(scratch.path + "/passed.sock", type: Int32(SOCK_STREAM.rawValue))
        defer { close(listener) }
        let own = scratch.path + "/own.sock"
        let daemon = try SpawnedProcess(
            [
                BuiltProducts.discoverd, "--upstream", "127.0.0.1:9", "--state-dir", scratch.path + "/state",
                "--socket", own, "--stub-listen", "none",
            ],
            environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "varlink"], passing: [listener])
        defer { daemon.stopBlocking() }
        #expect(await eventually(timeout: .seconds(20)) { RawConnection.canConnect(own) }, "\(daemon.stderr)")
        #expect(try Self.vendor(at: own) == "discoverd")
        daemon.kill(SIGTERM)
        #expect(await daemon.wait(timeout: .seconds(20)) == 0)
        await daemon.drain()
        #expect(!daemon.stderr.contains("inherited socket"))
        #expect(!Self.isSocket(own), "a socket the daemon created itself is removed at exit")
    }

    /// As `Config/discoverd.service` runs it: socket-activated, unprivileged (nobody), state in
    /// `$STATE_DIRECTORY`, reaching avahi-daemon over D-Bus and DNS upstreams. Admin actions name the peer.
    @Test(.enabled(if: DiscoveryLab.shouldRun, "network lab not up (Scripts/lab up); CI=true requires it"))
    func unprivilegedSocketActivatedDaemonReachesAvahiAndDNS() async throws {
        _ = try DiscoveryLab.require()
        try #require(FileManager.default.isExecutableFile(atPath: Self.socketActivate))
        let scratch = TemporaryDirectory("sdunpriv")
        let path = scratch.path + "/io.discoverd"
        let state = scratch.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        #expect(chown(state, 65534, 65534) == 0)
        // systemd-socket-activate binds as root, then execs setpriv, which execs discoverd as nobody: one PID.
        let daemon = try SpawnedProcess([
            "/usr/sbin/ip", "netns", "exec", DiscoveryLab.namespaceA,
            Self.socketActivate, "--listen=\(path)", "--fdname=varlink",
            "--setenv=DBUS_SYSTEM_BUS_ADDRESS=\(DiscoveryLab.busA)", "--setenv=STATE_DIRECTORY=\(state)",
            "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            BuiltProducts.discoverd, "--upstream", ResolverLab.knot, "--stub-listen", "none",
        ])
        defer { daemon.stopBlocking() }
        #expect(await eventually(timeout: .seconds(10)) { Self.isSocket(path) }, "\(daemon.stderr)")
        let client = DiscoverClient(socketPath: path)
        try await DiscoveryLab.waitForAvahi(client)
        #expect(try await client.resolveHTTPS("svcb.\(ResolverLab.zone)").source == .network)

        let type = DiscoveryLab.uniqueType()
        let ad = try await client.advertise(name: DiscoveryLab.uniqueName("Unprivileged"), type: type, port: 4242)
        await DiscoveryLab.expectOnB(type, "the advertisement of an unprivileged daemon reaches b") { !$0.isEmpty }
        // Withdrawn by another connection (root may): logged with who did it.
        try await client.withdraw(id: ad.id)
        _ = try await client.flush()
        await client.close()

        daemon.kill(SIGTERM)
        #expect(await daemon.wait(timeout: .seconds(20)) == 0, "\(daemon.stderr)")
        await daemon.drain()
        let log = daemon.stderr
        let peer = "peer.pid=\(getpid()) peer.uid=\(getuid())"
        #expect(log.contains("\(peer) registration=\(ad.id)"), "\(log)")
        #expect(log.contains("registration withdrawn by another connection"), "\(log)")
        #expect(log.contains("flushed=") && log.contains("cache flushed"), "\(log)")
        var info = stat()
        #expect(stat(state + "/cache.json", &info) == 0, "the cache is persisted in $STATE_DIRECTORY")
        #expect(info.st_uid == 65534)
        #expect(Self.isSocket(path))
    }

    @Test func journalLinesCarryPrioritiesAndNoTimestamps() throws {
        let daemon = try DaemonProcess(arguments: ["--log-level", "debug"], journalStream: true)
        let connection = try RawConnection(path: daemon.socketPath)
        connection.call(#"{"method":"io.discoverd.Resolver.Flush","parameters":{}}"#)
        #expect(connection.readJSON()?["error"] == nil)
        connection.call(#"{"method":"io.discoverd.Daemon.Reload"}"#)
        #expect(connection.readJSON()?["error"] == nil)

        // A second daemon on the same socket fails before it is ready: an error line, never "started".
        let second = try DaemonProcess(socketPath: daemon.socketPath, waitForSocket: false, journalStream: true)
        #expect(second.waitForExit() == 1)
        let secondLines = second.log.split(separator: "\n")
        #expect(secondLines.contains { $0.hasPrefix("<3>discoverd: another discoverd is already listening") })
        #expect(!second.log.contains("started"), "\(second.log)")
        #expect(daemon.stop() == 0)

        let lines = daemon.log.split(separator: "\n").map(String.init)
        let timestamp = /\d{4}-\d\d-\d\dT\d\d:\d\d/
        for line in lines + secondLines.map(String.init) {
            #expect(line.wholeMatch(of: /<[2-7]>.*/) != nil, "no priority prefix: \(line)")
            #expect(line.firstMatch(of: timestamp) == nil, "a timestamp of its own: \(line)")
        }
        #expect(lines.contains { $0.hasPrefix("<6>discoverd started") })
        #expect(lines.contains { $0.hasPrefix("<7>") }, "debug lines are <7>")
        let pid = "peer.pid=\(getpid())"
        let uid = "peer.uid=\(getuid())"
        let notices = lines.filter { $0.hasPrefix("<5>") }
        #expect(notices.contains { $0.contains("cache flushed") && $0.contains(uid) && $0.contains(pid) })
        #expect(notices.contains { $0.contains("reload requested") && $0.contains(pid) })
    }

    @Test func withoutTheJournalStreamLinesStayAsTheyWere() throws {
        // JOURNAL_STREAM inherited but standard error is not that stream (here a file): plain lines.
        let daemon = try DaemonProcess(environment: ["JOURNAL_STREAM": "0:0"])
        #expect(daemon.stop() == 0)
        let lines = daemon.log.split(separator: "\n")
        #expect(!lines.isEmpty)
        // swift-log's StreamLogHandler: `2026-11-23T02:21:03+0000 info discoverd: ...`.
        let plain = #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* (trace|debug|info|notice|warning|error|critical) discoverd:/#
        for line in lines { #expect(line.prefixMatch(of: plain) != nil, "\(line)") }
    }

    @Test func runsUnderMemoryDenyWriteExecute() throws {
        // PR_SET_MDWE (65) with PR_MDWE_REFUSE_EXEC_GAIN (1) refuses writable-and-executable memory, as
        // MemoryDenyWriteExecute= in Config/discoverd.service does; inherited across exec (Linux 6.3 and later).
        let script = """
            import ctypes, os, sys
            if ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0) != 0: sys.exit(77)
            os.execv(sys.argv[1], sys.argv[1:])
            """
        let daemon = try DaemonProcess(prefix: ["/usr/bin/python3", "-c", script], waitForSocket: false)
        let deadline = Date().addingTimeInterval(20)
        while daemon.isRunning && !RawConnection.canConnect(daemon.socketPath) && Date() < deadline { usleep(20_000) }
        if !daemon.isRunning && daemon.waitForExit() == 77 {
            // The kernel has no PR_SET_MDWE: nothing to check here (systemd's seccomp filter does the same job).
            return
        }
        #expect(try Self.vendor(at: daemon.socketPath) == "discoverd", "\(daemon.log)")
        let connection = try RawConnection(path: daemon.socketPath)
        connection.call(#"{"method":"io.discoverd.Daemon.Status"}"#)
        #expect(connection.readJSON()?["parameters"] != nil)
        #expect(daemon.stop() == 0, "\(daemon.log)")
    }
}
