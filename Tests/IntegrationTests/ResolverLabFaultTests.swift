import DiscoverAPI
import DiscoverClient
import Foundation
import Testing

extension ResolverLabTests {
    /// Upstream faults through the lab's fault server (192.0.2.54). Each test sets rules only for its own names
    /// (unique names, or zone names no other test here sends through the fault server) and clears them.
    @Suite("Upstream faults", .enabled(if: ResolverLab.shouldRun, "network lab not up (Scripts/lab up)"))
    struct Faults {
        /// Short tries so a lost answer costs 300 ms, not 1.5 s.
        static func config(attempts: Int) -> String {
            "[resolver]\ntimeout-ms = 300\nattempts = \(attempts)\n"
        }

        /// The daemon still answers (it did not crash or wedge).
        static func expectAlive(_ client: DiscoverClient, _ daemon: DaemonProcess, _ what: String) async {
            #expect(daemon.isRunning, "daemon died after \(what); log:\n\(daemon.log)")
            let status = await discoverError { try await client.status() }
            #expect(status == nil, "Status failed after \(what): \(String(describing: status))")
        }

        @Test func droppedQueriesTimeOutInBoundedTime() async throws {
            let faults = try ResolverLab.faults
            let name = ResolverLab.uniqueName("drop")
            try faults.set(name, "drop", qtype: nil)
            defer { faults.clear(name, qtype: nil) }
            let daemon = try labDaemon(config: Self.config(attempts: 1))
            let client = DiscoverClient(socketPath: daemon.socketPath)

            _ = try await client.status()
            let (error, ms) = await measure { await discoverError { try await client.resolveHTTPS(name) } }
            #expect(error?.code == .resolverTimeout, "\(String(describing: error))")
            // 300 ms expected; the bound only catches a hang (the machine may be loaded: no benchmark here).
            #expect(ms < 5000, "timeout took \(ms) ms with timeout-ms = 300, attempts = 1")
            // attempts = 1 is obeyed: one try, not the default two.
            #expect(try faults.count(name) == 1)
            // The plan fails too (nothing answered at all), also within bounds.
            let (planError, planMs) = await measure { await discoverError { try await client.connectionPlan(host: name) } }
            #expect(planError?.code == .resolverTimeout)
            #expect(planMs < 5000)
            await Self.expectAlive(client, daemon, "drop")
            #expect(daemon.stop() == 0)
        }

        @Test(arguments: [("servfail", "SERVFAIL"), ("refused", "REFUSED")])
        func errorRcodesAreUpstreamFailures(mode: String, rcode: String) async throws {
            let faults = try ResolverLab.faults
            let name = ResolverLab.uniqueName(mode)
            try faults.set(name, mode, qtype: nil)
            defer { faults.clear(name, qtype: nil) }
            let daemon = try labDaemon(config: Self.config(attempts: 2))
            let client = DiscoverClient(socketPath: daemon.socketPath)

            let error = await discoverError { try await client.resolveHTTPS(name) }
            #expect(error?.code == .upstreamFailure, "\(String(describing: error))")
            #expect(error?.parameters["rcode"]?.stringValue == rcode, "\(String(describing: error?.parameters))")
            let addresses = await discoverError { try await client.resolveAddresses(name) }
            #expect(addresses?.code == .upstreamFailure)
            // An upstream that answered is not asked again: one query per type, not `attempts` of them.
            #expect(try faults.count(name) == 1)
            await Self.expectAlive(client, daemon, mode)
            #expect(daemon.stop() == 0)
        }

        @Test func truncatedAnswersAreRetriedOverTCP() async throws {
            let faults = try ResolverLab.faults
            // Only the fault tests send v6only.lab.test through the fault server; one truncated UDP answer.
            let name = "v6only.lab.test"
            let tcpBefore = try faults.count(name, transport: "tcp")
            try faults.set(name, "truncate", times: 1)
            defer { faults.clear(name) }
            let daemon = try labDaemon(config: Self.config(attempts: 2))
            let client = DiscoverClient(socketPath: daemon.socketPath)

            let reply = try await client.resolveHTTPS(name)
            #expect(reply.records.map(\.alpn) == [["h3"]])
            #expect(reply.h3)
            #expect(reply.timing.queries.map(\.transport) == ["udp", "tcp"], "\(reply.timing.queries)")
            #expect(reply.timing.queries.last?.rcode == "NOERROR")
            #expect(try faults.count(name, transport: "tcp") == tcpBefore + 1)
            await Self.expectAlive(client, daemon, "truncate")
            #expect(daemon.stop() == 0)
        }

        /// A garbage, wrong-ID or wrong-name answer is dropped; the retry gets the real one.
        @Test(arguments: [
            ("garbage", "doh.lab.test"), ("wrongid", "target.lab.test"), ("wrongname", "multi.lab.test"),
        ])
        func badAnswersAreDroppedAndRetried(mode: String, name: String) async throws {
            let faults = try ResolverLab.faults
            try faults.set(name, mode, times: 1, target: mode == "wrongname" ? "plain.lab.test" : nil)
            defer { faults.clear(name) }
            let daemon = try labDaemon(config: Self.config(attempts: 2))
            let client = DiscoverClient(socketPath: daemon.socketPath)

            let reply = try await client.resolveHTTPS(name)
            #expect(!reply.records.isEmpty, "\(mode): \(reply)")
            #expect(reply.records.map(BindingSummary.init) == (try kdigBindings(name)), "\(mode)")
            #expect(reply.timing.queries.count >= 2, "\(mode): the bad answer must cost a try: \(reply.timing.queries)")
            #expect(reply.timing.queries.last?.rcode == "NOERROR")
            await Self.expectAlive(client, daemon, mode)
            #expect(daemon.stop() == 0)
        }

        /// Always bad: the call times out (never a wrong answer, never a crash).
        @Test(arguments: ["garbage", "wrongid", "wrongname"])
        func persistentBadAnswersTimeOut(mode: String) async throws {
            let faults = try ResolverLab.faults
            let name = ResolverLab.uniqueName(mode)
            try faults.set(name, mode, target: mode == "wrongname" ? "h3.lab.test" : nil)
            defer { faults.clear(name) }
            let daemon = try labDaemon(config: Self.config(attempts: 2))
            let client = DiscoverClient(socketPath: daemon.socketPath)

            _ = try await client.status()
            let (error, ms) = await measure { await discoverError { try await client.resolveHTTPS(name) } }
            #expect(error?.code == .resolverTimeout, "\(mode): \(String(describing: error))")
            #expect(ms < 6000, "\(mode): \(ms) ms for two 300 ms tries")
            #expect(try faults.count(name) == 2, "\(mode): exactly two tries (attempts = 2), each ignored the bad answer")
            await Self.expectAlive(client, daemon, mode)
            #expect(daemon.stop() == 0)
        }

        /// The daemon orders bindings by SvcPriority whatever order the upstream sends them in (Knot sorts its
        /// answers canonically, so the fault server sends them 3, 1, 2 here).
        @Test func bindingsAreSortedByPriority() async throws {
            let faults = try ResolverLab.faults
            let name = ResolverLab.uniqueName("unsortedrrset")
            try faults.raw(name, [
                SVCBWire.rdata(priority: 3, target: "prio-3.lab.test", params: [.alpn(["h2"])]),
                SVCBWire.rdata(priority: 1, target: "prio-1.lab.test", params: [.alpn(["h3", "h2"])]),
                SVCBWire.rdata(priority: 2, target: "prio-2.lab.test", params: [.alpn(["h3"])]),
            ], ttl: 300)
            defer { faults.clear(name) }
            let daemon = try labDaemon()
            let client = DiscoverClient(socketPath: daemon.socketPath)
            let reply = try await client.resolveHTTPS(name)
            #expect(reply.records.map(\.priority) == [1, 2, 3])
            #expect(reply.records.map(\.target) == ["prio-1.lab.test.", "prio-2.lab.test.", "prio-3.lab.test."])
            let plan = try await client.connectionPlan(host: name)
            #expect(plan.endpoints.first.map { "\($0.transport) \($0.address)" } == "quic 2001:db8::21")
            #expect(plan.endpoints.last.map { "\($0.transport) \($0.address)" } == "tcp 192.0.2.23")
            #expect(daemon.stop() == 0)
        }

        /// RFC 9460 §2.2: a malformed record makes the client ignore the whole RRset (no records, no error).
        @Test func malformedSvcParamsRejectTheRRset() async throws {
            typealias P = SVCBWire.Param
            let cases: [(String, [String])] = [
                ("control", [SVCBWire.h3]),
                ("unsorted", [SVCBWire.rdata(params: [.port(443), .alpn(["h3"])])]),
                ("duplicate", [SVCBWire.rdata(params: [.alpn(["h3"]), .alpn(["h2"])])]),
                ("emptyalpn", [SVCBWire.rdata(params: [P(key: 1, value: [2, 0x68, 0x33, 0])])]),
                ("alpnoverrun", [SVCBWire.rdata(params: [P(key: 1, value: [5, 0x68, 0x33])])]),
                ("trailing", [SVCBWire.rdata(params: [.alpn(["h3"])], trailing: [0xFF])]),
                ("shortparam", [SVCBWire.rdata(params: [.alpn(["h3"])], trailing: [0x00, 0x03, 0x00, 0x02, 0x01])]),
                ("badport", [SVCBWire.rdata(params: [.alpn(["h3"]), P(key: 3, value: [1])])]),
                ("badhint", [SVCBWire.rdata(params: [.alpn(["h3"]), P(key: 4, value: [192, 0, 2])])]),
                ("onebad", [SVCBWire.h3, SVCBWire.rdata(priority: 2, params: [.port(443), .alpn(["h2"])])]),
            ]
            let faults = try ResolverLab.faults
            var names: [String: String] = [:]
            for (label, rdata) in cases {
                let name = ResolverLab.uniqueName("svcb-" + label)
                names[label] = name
                try faults.raw(name, rdata, ttl: 300)
            }
            defer { for name in names.values { faults.clear(name) } }
            let daemon = try labDaemon(config: Self.config(attempts: 2))
            let client = DiscoverClient(socketPath: daemon.socketPath)

            for (label, _) in cases {
                let name = try #require(names[label])
                let result: ResolveHTTPSReply
                do {
                    result = try await client.resolveHTTPS(name)
                } catch {
                    Issue.record("\(label): expected records [], got error \(error)")
                    await Self.expectAlive(client, daemon, label)
                    continue
                }
                if label == "control" {
                    #expect(result.records.map(\.alpn) == [["h3"]], "the raw rule must work: \(result)")
                    #expect(result.h3)
                } else {
                    #expect(result.records.isEmpty, "\(label): malformed RRset must be ignored: \(result.records)")
                    #expect(!result.h3, "\(label)")
                }
                await Self.expectAlive(client, daemon, label)
            }
            // The plan still works without the HTTPS records (they have no A/AAAA: NXDOMAIN from Knot means
            // no addresses, so a plan error is fine; what matters is the daemon).
            _ = await discoverError { try await client.connectionPlan(host: names["unsorted"]!) }
            await Self.expectAlive(client, daemon, "plans")
            #expect(daemon.stop() == 0)
        }
    }
}
