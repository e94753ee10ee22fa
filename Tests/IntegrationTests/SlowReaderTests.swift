import DiscoverAPI
import DiscoverClient
import Foundation
import LabSupport
import Testing

/// The one slow-reader rule, seen by a socket client: a Browse stream whose reader lets more than max-send-buffer
/// bytes pile up ends with `io.discoverd.Discovery.SubscriberTooSlow`; another subscriber of the same type gets
/// every event meanwhile.
@Suite(
    "Slow Browse readers",
    .enabled(if: DiscoveryLab.shouldRun, "network lab not up (Scripts/lab up); CI=true requires it"))
struct SlowReaderTests {
    @Test func aBrowseReaderThatStopsReadingGetsSubscriberTooSlowAndOthersGetEverything() async throws {
        // Exclusive: the burst of 300 announcements would slow the other lab tests' expectations down.
        let hold = await AvahiGate.shared.enterExclusive()
        defer { hold.release() }
        _ = try DiscoveryLab.require()
        let daemon = try DiscoveryLab.daemon(config: "[limits]\nmax-send-buffer = 4096\n")
        let client = DiscoverClient(socketPath: daemon.socketPath)
        try await DiscoveryLab.waitForAvahi(client)
        let type = DiscoveryLab.uniqueType()
        let name = DiscoveryLab.uniqueName("Burst")
        let count = 300

        // The slow reader asks and then reads nothing; the fast one reads as events come.
        let slow = try RawConnection(path: daemon.socketPath)
        slow.call(
            #"{"method":"io.discoverd.Discovery.Browse","parameters":{"type":"\#(type)","resolve":true},"more":true}"#)
        let fast = BrowseRecorder(client.browse(type, resolve: true))
        defer { fast.cancel() }
        #expect(await eventually { (try? await client.status().subscriptions) == 2 }, "both streams are open")

        // About 1 KiB of TXT per instance: the events outgrow the kernel's socket buffer and then the limit.
        let txt = (0..<4).flatMap { ["--txt", "k\($0)=" + String(repeating: "v", count: 240)] }
        let peer = try LabPeer(
            host: "b",
            [DiscoveryLab.python, DiscoveryLab.zcpeer, "publish", "--name", name, "--type", type, "--port", "7",
             "--count", String(count)] + txt)
        #expect(await peer.waitForOutput(containing: "ready \(count)", timeout: .seconds(60)), "peer: \(peer.output)")

        // Everyone else is served in full while the slow reader's replies pile up.
        let everyone = await eventually(timeout: .seconds(60)) {
            Set(fast.all.filter { !$0.isRemoved }.compactMap { $0.service?.name }).count == count
        }
        let seen = Set(fast.all.compactMap { $0.service?.name }).count
        #expect(everyone, "the reading subscriber saw \(seen) of \(count)")
        #expect(fast.failure == nil)
        #expect(await eventually(timeout: .seconds(30)) { (try? await client.status().subscriptions) == 1 },
                "the slow stream ended in the daemon")
        #expect(daemon.log.contains("reader too slow for its stream, ending the stream"))

        // The slow client reads at last: the events that fit, then the error as the stream's final reply.
        var events = 0
        var final: [String: Any]?
        while let reply = slow.readJSON(timeout: 10) {
            if reply["continues"] as? Bool == true {
                events += 1
            } else {
                final = reply
                break
            }
        }
        #expect(
            final?["error"] as? String == "io.discoverd.Discovery.SubscriberTooSlow",
            "final reply \(String(describing: final))")
        #expect(events > 0, "the events sent before the limit are delivered")
        // The connection stays usable.
        slow.call(#"{"method":"io.discoverd.Daemon.Status"}"#)
        #expect(slow.readJSON()?["parameters"] != nil)

        await peer.stop()
        await client.close()
        #expect(daemon.stop() == 0, "log:\n\(daemon.log)")
    }
}
