import CloudSyncCore

/// The index's storage form of a ``ByteRanges``.
extension ByteRanges {
    /// Compact storage form: pairs of little-endian Int64 (lower, upper).
    var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ranges.count * 16)
        for r in ranges {
            withUnsafeBytes(of: r.lowerBound.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: r.upperBound.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// Decodes ``encoded``; nil when the bytes are not a valid sorted list of non-empty ranges.
    init?(encoded bytes: [UInt8]) {
        guard bytes.count % 16 == 0 else { return nil }
        self.init()
        var previousUpper = Int64.min
        var i = 0
        while i < bytes.count {
            var lower: Int64 = 0
            var upper: Int64 = 0
            withUnsafeMutableBytes(of: &lower) { $0.copyBytes(from: bytes[i..<i + 8]) }
            withUnsafeMutableBytes(of: &upper) { $0.copyBytes(from: bytes[i + 8..<i + 16]) }
            lower = Int64(littleEndian: lower)
            upper = Int64(littleEndian: upper)
            guard lower < upper, lower >= previousUpper else { return nil }
            insert(contentsOf: lower..<upper)
            previousUpper = upper
            i += 16
        }
    }
}
