import CloudSyncCore

/// The reads of one analysis over an ``AudioBytes``: only present bytes are ever read, and every range read is
/// remembered, so the analyzer can put each byte its parsers looked at into the start set (tags are then read
/// from the start set by construction, never from bytes outside it).
struct ByteWindow {
    let size: Int64
    let present: ByteRanges
    private let source: any AudioBytes
    /// Every range read so far.
    private(set) var touched = ByteRanges()

    init(_ source: any AudioBytes) {
        self.source = source
        size = max(0, source.size)
        present = source.present
    }

    /// Whether `range` lies within the file.
    func inFile(_ range: Range<Int64>) -> Bool { range.lowerBound >= 0 && range.upperBound <= size }

    /// Whether every byte of `range` is within the file and present (an empty range within the file always is).
    func has(_ range: Range<Int64>) -> Bool { inFile(range) && present.containsAll(range) }

    /// The present bytes of `range` from its start up to the first absent byte (empty when it starts absent).
    func presentPrefix(of range: Range<Int64>) -> Range<Int64> {
        guard inFile(range), let r = present.ranges.first(where: { $0.contains(range.lowerBound) }) else {
            return range.lowerBound..<range.lowerBound
        }
        return range.lowerBound..<min(range.upperBound, r.upperBound)
    }

    /// The bytes of `range`, or nil when the range leaves the file, any byte is absent, or the source fails.
    mutating func bytes(_ range: Range<Int64>) -> [UInt8]? {
        guard has(range) else { return nil }
        if range.isEmpty { return [] }
        guard let bytes = source.bytes(in: range), Int64(bytes.count) == range.upperBound - range.lowerBound
        else { return nil }
        touched.insert(contentsOf: range)
        return bytes
    }

    /// `count` bytes at `offset` (nil as for ``bytes(_:)``, and when the end overflows).
    mutating func bytes(at offset: Int64, count: Int64) -> [UInt8]? {
        guard count >= 0, let end = offset.adding(count) else { return nil }
        return bytes(offset..<end)
    }

    /// A view of `count` bytes at `offset` for parsing, or nil.
    mutating func view(at offset: Int64, count: Int64) -> ByteView? {
        bytes(at: offset, count: count).map { ByteView($0) }
    }

    /// The part of `[offset, offset + count)` inside the file, as a range (empty when it starts past the end).
    func clamped(at offset: Int64, count: Int64) -> Range<Int64> {
        let lower = min(max(0, offset), size)
        let upper = min(size, max(lower, offset.adding(max(0, count)) ?? size))
        return lower..<upper
    }
}

/// Bounds-checked big- and little-endian reads over an in-memory buffer: every accessor returns nil instead of
/// trapping when the read would leave the buffer.
struct ByteView {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var count: Int { bytes.count }

    /// The first index of `byte` in `from..<to` (clamped to the buffer), or nil. Eight bytes per step: a frame
    /// sync search over junk (a file that only has an audio name) passes its whole window.
    func firstIndex(of byte: UInt8, from: Int, to: Int) -> Int? {
        let end = min(to, bytes.count)
        var i = max(0, from)
        guard i < end else { return nil }
        let spread = UInt64(byte) &* 0x0101_0101_0101_0101
        return bytes.withUnsafeBytes { raw -> Int? in
            while end - i >= 8 {
                // A byte equal to `byte` is a zero byte of `w`; the test below finds whether `w` has one.
                let w = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ spread
                if (w &- 0x0101_0101_0101_0101) & ~w & 0x8080_8080_8080_8080 != 0 { break }
                i += 8
            }
            while i < end {
                if raw[i] == byte { return i }
                i += 1
            }
            return nil
        }
    }

    func contains(_ offset: Int, _ length: Int) -> Bool {
        offset >= 0 && length >= 0 && offset <= bytes.count && length <= bytes.count - offset
    }

    func u8(_ i: Int) -> UInt8? { contains(i, 1) ? bytes[i] : nil }

    func u16be(_ i: Int) -> UInt16? {
        guard contains(i, 2) else { return nil }
        return UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1])
    }

    func u16le(_ i: Int) -> UInt16? {
        guard contains(i, 2) else { return nil }
        return UInt16(bytes[i + 1]) << 8 | UInt16(bytes[i])
    }

    func u24be(_ i: Int) -> UInt32? {
        guard contains(i, 3) else { return nil }
        return UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
    }

    func u32be(_ i: Int) -> UInt32? {
        guard contains(i, 4) else { return nil }
        return (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[i + $1]) }
    }

    func u32le(_ i: Int) -> UInt32? {
        guard contains(i, 4) else { return nil }
        return (0..<4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[i + $1]) }
    }

    func u64be(_ i: Int) -> UInt64? {
        guard contains(i, 8) else { return nil }
        return (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[i + $1]) }
    }

    func u64le(_ i: Int) -> UInt64? {
        guard contains(i, 8) else { return nil }
        return (0..<8).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[i + $1]) }
    }

    /// A 28-bit ID3v2 "syncsafe" integer (four bytes of seven bits); nil when a byte has its top bit set.
    func syncsafe32(_ i: Int) -> UInt32? {
        guard contains(i, 4) else { return nil }
        var value: UInt32 = 0
        for k in 0..<4 {
            guard bytes[i + k] & 0x80 == 0 else { return nil }
            value = value << 7 | UInt32(bytes[i + k])
        }
        return value
    }

    /// `length` bytes at `i`, or nil.
    func slice(_ i: Int, _ length: Int) -> ArraySlice<UInt8>? {
        contains(i, length) ? bytes[i..<(i + length)] : nil
    }

    /// Whether the bytes at `i` are the ASCII text `tag`.
    func matches(_ i: Int, _ tag: String) -> Bool {
        let t = Array(tag.utf8)
        guard contains(i, t.count) else { return false }
        for k in 0..<t.count where bytes[i + k] != t[k] { return false }
        return true
    }

    /// Four bytes at `i` as a four-character code (bytes as Latin-1), or nil.
    func fourCC(_ i: Int) -> String? {
        slice(i, 4).map { String(String.UnicodeScalarView($0.map { Unicode.Scalar($0) })) }
    }
}

extension Int64 {
    /// `self + other`, or nil on overflow.
    func adding(_ other: Int64) -> Int64? {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? nil : sum
    }

    /// `self * other`, or nil on overflow.
    func multiplied(by other: Int64) -> Int64? {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? nil : product
    }
}

extension ByteRanges {
    /// Covers every hole between two ranges that is shorter than `length` bytes.
    mutating func fillGaps(shorterThan length: Int64) {
        guard length > 0 else { return }
        var holes: [Range<Int64>] = []
        for (a, b) in zip(ranges, ranges.dropFirst()) where b.lowerBound - a.upperBound < length {
            holes.append(a.upperBound..<b.lowerBound)
        }
        for hole in holes { insert(contentsOf: hole) }
    }
}
