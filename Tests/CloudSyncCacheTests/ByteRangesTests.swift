import CloudSyncCore
import TestSupport
@testable import CloudSyncCache
import Testing

@Suite struct ByteRangesTests {
    /// Thousands of random inserts and removes, checked after each against a plain bitmap.
    @Test func rangeBookkeepingMatchesBitmap() {
        let s = seed("rangeBookkeepingMatchesBitmap")
        var random = SeededRandom(seed: s)
        let size = 512
        for _ in 0..<20 {
            var set = ByteRanges()
            var bitmap = [Bool](repeating: false, count: size)
            for _ in 0..<300 {
                let a = Int.random(in: 0..<size, using: &random)
                let b = Int.random(in: a...min(size, a + Int.random(in: 0...64, using: &random)), using: &random)
                if Bool.random(using: &random) || Int.random(in: 0..<4, using: &random) == 0 {
                    set.insert(contentsOf: Int64(a)..<Int64(b))
                    for i in a..<b { bitmap[i] = true }
                } else {
                    set.remove(contentsOf: Int64(a)..<Int64(b))
                    for i in a..<b { bitmap[i] = false }
                }
                check(set, against: bitmap, seed: s)
            }
        }
    }

    /// The writer's pending ranges: mostly in-order appends (as downloads write, the fast path), with jumps,
    /// subtracts and removes mixed in, checked after each step against a plain bitmap.
    @Test func appendingRangesMatchBitmap() {
        let s = seed("appendingRangesMatchBitmap")
        var random = SeededRandom(seed: s)
        let size = 512
        for _ in 0..<20 {
            var ranges = ByteRanges()
            var bitmap = [Bool](repeating: false, count: size)
            var cursor = 0
            for _ in 0..<300 {
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<6:  // continue the last write, or start elsewhere
                    if Int.random(in: 0..<5, using: &random) == 0 { cursor = Int.random(in: 0..<size, using: &random) }
                    let end = min(size, cursor + Int.random(in: 0...40, using: &random))
                    ranges.insert(contentsOf: Int64(cursor)..<Int64(end))
                    for i in cursor..<end { bitmap[i] = true }
                    cursor = end
                case 6..<8:  // a checkpoint committed some of them
                    let a = Int.random(in: 0..<size, using: &random), b = min(size, a + Int.random(in: 0...100, using: &random))
                    ranges.subtract(ByteRanges(Int64(a)..<Int64(b)))
                    for i in a..<b { bitmap[i] = false }
                default:
                    let a = Int.random(in: 0..<size, using: &random), b = min(size, a + Int.random(in: 0...30, using: &random))
                    ranges.remove(contentsOf: Int64(a)..<Int64(b))
                    for i in a..<b { bitmap[i] = false }
                }
                check(ranges, against: bitmap, seed: s)
                #expect(ranges.isEmpty == !bitmap.contains(true), "seed \(s)")
            }
        }
    }

    /// Union, intersection, subtraction and superset of random sets, each checked against bitmaps; building a
    /// set from ranges in any order gives the same set.
    @Test func setAlgebraMatchesBitmaps() {
        let s = seed("setAlgebraMatchesBitmaps")
        var random = SeededRandom(seed: s)
        let size = 256
        func randomSet() -> (ByteRanges, [Bool]) {
            var pieces: [Range<Int64>] = []
            var bitmap = [Bool](repeating: false, count: size)
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                let a = Int.random(in: 0..<size, using: &random), b = min(size, a + Int.random(in: 0...40, using: &random))
                pieces.append(Int64(a)..<Int64(b))
                for i in a..<b { bitmap[i] = true }
            }
            let set = ByteRanges(pieces)
            #expect(ByteRanges(pieces.shuffled(using: &random)) == set, "seed \(s)")
            return (set, bitmap)
        }
        for _ in 0..<500 {
            let (a, bitsA) = randomSet(), (b, bitsB) = randomSet()
            check(a.union(b), against: zip(bitsA, bitsB).map { $0 || $1 }, seed: s)
            check(a.intersection(b), against: zip(bitsA, bitsB).map { $0 && $1 }, seed: s)
            check(a.subtracting(b), against: zip(bitsA, bitsB).map { $0 && !$1 }, seed: s)
            check(a.clamped(to: 100), against: bitsA.enumerated().map { $0.element && $0.offset < 100 }, seed: s)
            #expect(a.isSuperset(of: b) == zip(bitsA, bitsB).allSatisfy { $0 || !$1 }, "seed \(s)")
        }
    }

    @Test func edgeCases() {
        #expect(ByteRanges(5..<5).isEmpty)
        #expect(ByteRanges(checked: 9, 5).isEmpty)
        #expect(ByteRanges(checked: 5, 9).ranges == [5..<9])
        var set = ByteRanges([0..<4, 8..<12])
        set.insert(contentsOf: 4..<8)  // touching both sides: one range
        #expect(set.ranges == [0..<12])
        set.remove(contentsOf: 12..<20)  // touching, not overlapping: nothing removed
        #expect(set.ranges == [0..<12])
        set.remove(contentsOf: 4..<6)
        #expect(set.ranges == [0..<4, 6..<12])
        #expect(!set.contains(4) && set.contains(6) && !set.contains(12) && set.contains(0))
        #expect(set.containsAll(6..<12) && !set.containsAll(3..<7) && set.containsAll(20..<20))
        #expect(set.presentPrefix(of: 2..<10) == 2..<4)
        #expect(set.description == "[0..<4, 6..<12]")
        let extremes = ByteRanges([Int64.min..<0, 0..<Int64.max])
        #expect(extremes.ranges == [Int64.min..<Int64.max])
        #expect(extremes.byteCount == Int64.max)
        #expect(ByteRanges([Int64.min..<(-10), 0..<Int64.max]).byteCount == Int64.max)
    }

    private func check(_ set: ByteRanges, against bitmap: [Bool], seed: UInt64) {
        let size = Int64(bitmap.count)
        #expect(set.byteCount == Int64(bitmap.filter { $0 }.count), "seed \(seed)")
        // Sorted, coalesced, non-empty.
        for (a, b) in zip(set.ranges, set.ranges.dropFirst()) { #expect(a.upperBound < b.lowerBound, "seed \(seed)") }
        for r in set.ranges { #expect(!r.isEmpty) }
        // Gaps are the exact complement.
        let gaps = set.gaps(within: 0..<size)
        for i in 0..<size { #expect(gaps.contains(i) == !bitmap[Int(i)], "seed \(seed) at \(i)") }
        #expect(gaps.byteCount + set.byteCount == size)
        // Round trip through the stored form.
        #expect(ByteRanges(encoded: set.encoded) == set, "seed \(seed)")
        // containsAll and presentPrefix on a few probes.
        for start in stride(from: Int64(0), to: size, by: 37) {
            let end = min(size, start + 20)
            let all = (start..<end).allSatisfy { bitmap[Int($0)] }
            #expect(set.containsAll(start..<end) == all, "seed \(seed) \(start)..<\(end)")
            var prefixEnd = start
            while prefixEnd < end && bitmap[Int(prefixEnd)] { prefixEnd += 1 }
            #expect(set.presentPrefix(of: start..<end) == start..<prefixEnd, "seed \(seed)")
        }
    }

    @Test func gapsWithinSubrange() {
        var set = ByteRanges()
        set.insert(contentsOf: 10..<20)
        set.insert(contentsOf: 30..<40)
        #expect(set.gaps(within: 15..<35).ranges.map { $0 } == [20..<30])
        #expect(set.gaps(within: 0..<50).ranges.map { $0 } == [0..<10, 20..<30, 40..<50])
        #expect(set.gaps(within: 12..<18).isEmpty)
    }

    @Test func rejectsDamagedEncoding() {
        #expect(ByteRanges(encoded: [1, 2, 3]) == nil)
        var backwards = ByteRanges()
        backwards.insert(contentsOf: 5..<9)
        var bytes = backwards.encoded
        bytes.swapAt(0, 8)  // lower 9, upper 5
        #expect(ByteRanges(encoded: bytes) == nil)
        #expect(ByteRanges(encoded: []) == ByteRanges())
    }
}
