import DNSCore
import Resolver

/// Domain names as text: normalising, splitting into labels, telling unicast domains from mDNS ones.
public enum WideAreaDomain {
    /// Lowercased, without trailing dot: `Sd.Lab.Test.` → `sd.lab.test`.
    public static func normalized(_ domain: String) -> String {
        var result = domain.lowercased()
        while result.hasSuffix(".") { result.removeLast() }
        return result
    }

    /// Whether `domain` is DNS-SD over unicast DNS: anything but `local` and its subdomains (RFC 6762 §3), and
    /// the link-local reverse zones mDNS also owns.
    public static func isUnicast(_ domain: String?) -> Bool {
        guard let domain else { return false }
        let name = normalized(domain)
        if name.isEmpty { return false }
        // The one definition of what mDNS owns (DNSCore's LocalZones), shared with the DNS stub.
        return !LocalZones.isLocal(name)
    }

    /// The labels of a dotted name (no escapes: types and domains we build are plain).
    static func labels(of text: String) -> [[UInt8]] {
        normalized(text).split(separator: ".").map { Array($0.utf8) }
    }
}

extension WideAreaDomain {
    /// Checks that `domain` is a DNS name usable as a unicast DNS-SD domain (for settings).
    /// - Throws: `invalidParameter` saying why not.
    public static func validate(_ domain: String) throws(WideAreaError) {
        guard isUnicast(domain) else {
            throw WideAreaError(.invalidParameter, "'\(domain)' is not a unicast domain (local is mDNS)")
        }
        do {
            _ = try DNSName(domain)
        } catch {
            throw WideAreaError(.invalidParameter, "'\(domain)': \(error.reason)")
        }
    }
}
