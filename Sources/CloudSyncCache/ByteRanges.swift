/// Byte-range bookkeeping on the standard library's `RangeSet<Int64>` (sorted, coalesced, half-open).
extension RangeSet where Bound == Int64 {
    /// Total bytes covered.
    public var byteCount: Int64 { ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) } }

    /// Whether every byte of `range` is covered (an empty range always is).
    public func containsAll(_ range: Range<Int64>) -> Bool {
        if range.isEmpty { return true }
        return ranges.contains { $0.lowerBound <= range.lowerBound && range.upperBound <= $0.upperBound }
    }

    /// The parts of `bounds` not covered, in order.
    public func gaps(within bounds: Range<Int64>) -> RangeSet<Int64> {
        var result = RangeSet<Int64>()
        var cursor = bounds.lowerBound
        for r in ranges where r.upperBound > bounds.lowerBound && r.lowerBound < bounds.upperBound {
            if r.lowerBound > cursor { result.insert(contentsOf: cursor..<r.lowerBound) }
            cursor = Swift.max(cursor, r.upperBound)
        }
        if cursor < bounds.upperBound { result.insert(contentsOf: cursor..<bounds.upperBound) }
        return result
    }

    /// The covered prefix of `range`: from `range.lowerBound` up to the first hole (empty if it starts in one).
    public func presentPrefix(of range: Range<Int64>) -> Range<Int64> {
        guard let r = ranges.first(where: { $0.lowerBound <= range.lowerBound && range.lowerBound < $0.upperBound })
        else { return range.lowerBound..<range.lowerBound }
        return range.lowerBound..<Swift.min(range.upperBound, r.upperBound)
    }

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
