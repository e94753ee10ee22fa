extension Array where Element == UInt8 {
    /// Appends `count` zero octets, copied from a zeroed template: room to write a name's wire form into, or EDNS
    /// padding. `append(contentsOf: repeatElement(0, count:))` goes the generic sequence way, about ten
    /// instructions an octet.
    package mutating func appendZeroes(_ count: Int) {
        var left = count
        while left > 0 {
            let chunk = Swift.min(left, zeroOctets.count)
            append(contentsOf: zeroOctets[0..<chunk])
            left -= chunk
        }
    }
}

private let zeroOctets = [UInt8](repeating: 0, count: 512)
