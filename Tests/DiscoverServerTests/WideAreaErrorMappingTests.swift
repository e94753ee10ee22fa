import DiscoverAPI
import Testing
import WideAreaDiscovery

@testable import DiscoverServer

@Suite("Wide-area errors on the wire")
struct WideAreaErrorMappingTests {
    @Test func everyWideAreaErrorCodeHasAVarlinkErrorAndRcodesAreNamed() {
        let subject = DiscoverySubject(type: "_x._tcp", name: "Printer", parameter: "txt")
        let expected: [WideAreaError.Code: VarlinkError] = [
            .notFound: .notFound("Printer"),
            .timeout: .discoveryTimeout,
            .lookupFailed: .upstreamFailure(rcode: "REFUSED"),
            .nameConflict: .nameConflict("Printer"),
            .updateRejected: .upstreamFailure(rcode: "REFUSED"),
            .noKey: .invalidParameter("domain"),
            .noUpdateServer: .notFound("Printer"),
            .badReplySignature: .upstreamFailure(rcode: "REFUSED"),
            .invalidParameter: .invalidParameter("txt"),
        ]
        #expect(Set(WideAreaError.Code.allCases) == Set(expected.keys))
        for code in WideAreaError.Code.allCases {
            let mapped = WideAreaCallError(error: WideAreaError(code, "why", rcode: "REFUSED"), subject: subject)
            #expect(mapped.varlinkError == expected[code], "\(code)")
        }
        let unsigned = WideAreaCallError(error: WideAreaError(.badReplySignature, "why"), subject: subject)
        #expect(unsigned.varlinkError == .upstreamFailure(rcode: "BADSIG"))
    }
}
