import Foundation
import Testing

@testable import DiscoverAPI

/// Deep nesting is refused before Foundation's JSON scanner sees it: that scanner traps (it does not throw) on
/// 512 arrays inside an object, which a fuzzer sent the running daemon.
@Suite struct JSONNestingTests {
    @Test(arguments: [65, 511, 512, 513, 5000])
    func aCallNestedPastTheLimitIsAnInvalidMessageNotACrash(depth: Int) {
        let text = #"{"method":"io.discoverd.Resolver.ResolveHTTPS","parameters":"# + String(repeating: "[", count: depth)
        #expect {
            try VarlinkCall.decode(Array(text.utf8))
        } throws: { error in
            (error as? VarlinkError)?.name == "io.discoverd.Daemon.InvalidMessage"
        }
        #expect(throws: (any Error).self) { try VarlinkReplyMessage.decode(Array(text.utf8)) }
    }

    @Test func nestingInsideStringsDoesNotCountAndOrdinaryCallsPass() throws {
        let brackets = String(repeating: "[", count: 600)
        let call = try VarlinkCall.decode(
            Array(#"{"method":"io.discoverd.Resolver.ResolveHTTPS","parameters":{"name":"\#(brackets)\"]"}}"#.utf8))
        #expect(call.method == "io.discoverd.Resolver.ResolveHTTPS")
        #expect(!JSONNesting.exceedsLimit(Array(#"{"a":[[[{"b":[1,2,{"c":[]}]}]]]}"#.utf8)))
        #expect(JSONNesting.exceedsLimit(Array((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8)))
    }
}
