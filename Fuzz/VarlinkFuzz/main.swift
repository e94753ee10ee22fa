// libFuzzer target for the varlink decoder: the framer, the call envelope and every typed parameter set.
// Built outside SwiftPM by Scripts/fuzz together with the DiscoverAPI sources.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    // Feed the same bytes whole and in chunks whose size comes from the first byte: framing must not depend
    // on how reads split the stream.
    let chunk = max(1, Int(bytes.first ?? 1) % 17)
    let whole = frame(bytes, chunk: bytes.count)
    let split = frame(bytes, chunk: chunk)
    precondition(whole == split, "framing depends on read boundaries")
    for message in whole {
        precondition(!message.contains(0), "a framed message contains NUL")
        guard let call = try? VarlinkCall.decode(message) else { continue }
        _ = call.interface
        _ = call.member
        _ = try? call.parameters(ResolveHTTPSParameters.self)
        _ = try? call.parameters(ResolveAddressesParameters.self)
        _ = try? call.parameters(ConnectionPlanParameters.self)
        _ = try? call.parameters(ReportAltSvcParameters.self)
        _ = try? call.parameters(BrowseParameters.self)
        _ = try? call.parameters(AdvertiseParameters.self)
        _ = try? call.parameters(UpdateAdvertisementParameters.self)
        _ = try? call.parameters(StatusParameters.self)
        _ = try? call.parameters(VarlinkEmpty.self)
        _ = VarlinkReply.encode(error: .invalidParameter(call.method))
    }
    _ = try? VarlinkReplyMessage.decode(bytes)
    return 0
}

/// Frames `bytes` read `chunk` bytes at a time; a size error ends the stream as the daemon does.
private func frame(_ bytes: [UInt8], chunk: Int) -> [[UInt8]] {
    var framer = VarlinkFramer(maxMessageSize: 1024)
    var messages: [[UInt8]] = []
    var index = 0
    while index < bytes.count {
        framer.append(bytes[index..<min(index + chunk, bytes.count)])
        index += chunk
        do {
            while let message = try framer.next() { messages.append(Array(message)) }
        } catch {
            messages.append([0xFF])  // marks "too large" so both runs must agree on it too
            return messages
        }
    }
    return messages
}
