import DNSStub
import Testing

@testable import discoverd

/// `[stub] max-tcp` and `tcp-idle-timeout`: defaults, values within their ranges, and errors naming file, line and key.
@Suite("[stub] max-tcp and tcp-idle-timeout in the configuration")
struct StubLimitConfigurationTests {
    func apply(_ text: String) throws(ConfigurationError) -> DaemonConfiguration {
        var config = DaemonConfiguration()
        try config.apply(text: "[stub]\n" + text, source: "test.conf")
        return config
    }

    @Test func theDefaultsAre1024ConnectionsAnd10Seconds() {
        let settings = DaemonConfiguration().stubSettings
        #expect(settings.maxTCPConnections == 1024)
        #expect(settings.tcpIdleTimeout == .seconds(10))
        #expect(settings.maxTCPConnectionsPerAddress == 32)
    }

    @Test(arguments: [("max-tcp = 1", 1, 10), ("max-tcp = 65536", 65536, 10), ("tcp-idle-timeout = 1", 1024, 1),
        ("tcp-idle-timeout = 3600", 1024, 3600), ("max-tcp = 8\ntcp-idle-timeout = 2", 8, 2)])
    func valuesInRangeReachTheStubSettings(_ text: String, _ maxTCP: Int, _ idle: Int) throws {
        let settings = try apply(text).stubSettings
        #expect(settings.maxTCPConnections == maxTCP)
        #expect(settings.tcpIdleTimeout == .seconds(idle))
    }

    @Test(arguments: [
        ("max-tcp = 0", "test.conf:2: [stub] max-tcp", "out of range 1...65536"),
        ("max-tcp = 65537", "test.conf:2: [stub] max-tcp", "out of range 1...65536"),
        ("max-tcp = lots", "test.conf:2: [stub] max-tcp", "not a whole number"),
        ("tcp-idle-timeout = 0", "test.conf:2: [stub] tcp-idle-timeout", "out of range 1...3600"),
        ("tcp-idle-timeout = 3601", "test.conf:2: [stub] tcp-idle-timeout", "out of range 1...3600"),
        ("tcp-idle-timeout = 10s", "test.conf:2: [stub] tcp-idle-timeout", "not a whole number"),
    ])
    func badValuesNameTheFileLineAndKey(_ text: String, _ location: String, _ reason: String) {
        do {
            _ = try apply(text)
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.description.contains(location), "\(error.description)")
            #expect(error.description.contains(reason), "\(error.description)")
        }
    }
}
