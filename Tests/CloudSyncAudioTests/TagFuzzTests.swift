@testable import CloudSyncAudio
import Foundation
import Testing
import TestSupport

/// Hostile tags: a seeded mutation fuzz aimed at the bytes around every tag value of every fixture (the title's
/// UTF-8 and UTF-16 occurrences: ID3v2 frames, ID3v1, APEv2, Vorbis comments, ilst, RIFF INFO), where the length
/// fields and encodings that tag readers trust are. The fuzz of `HostileInputTests` mutates the first and last
/// 64 KiB at random and rarely lands in the few hundred bytes of a tag; this one always does.
struct TagFuzzTests {
    /// Offsets of `needle` in `haystack` (at most `limit`).
    static func occurrences(of needle: [UInt8], in haystack: [UInt8], limit: Int = 8) -> [Int] {
        guard let first = needle.first, needle.count <= haystack.count else { return [] }
        var out: [Int] = []
        var i = 0
        while i + needle.count <= haystack.count, out.count < limit {
            if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { out.append(i) }
            i += 1
        }
        return out
    }

    /// Mutants with oversized frame and field lengths (the 4, 8 or 16 bytes before a value: ID3v2 frame sizes,
    /// Vorbis comment lengths, atom sizes), sizes past the end, bytes that make encodings invalid (lone UTF-16
    /// surrogates, bad UTF-8 leads, encoding bytes out of range) and bit flips, around every tag value. Every
    /// analysis keeps the contract (no trap, bounded, reads only what it puts in the start set) and every text
    /// and number it returns is within bounds.
    @Test func fuzzedTags() throws {
        let s = seed("fuzzedTags")
        var random = SeededRandom(seed: s)
        let library = try Fixtures.library()
        let needles: [[UInt8]] = [Array(Tagged.title.utf8), Array(Tagged.artist.utf8), Array(Tagged.album.utf8),
                                  Array(Tagged.title.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }),
                                  Array(Tagged.title.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] })]
        var runs = 0
        for fixture in library.ordered {
            let spots = needles.flatMap { Self.occurrences(of: $0, in: fixture.data) }
            #expect(!spots.isEmpty, "\(fixture.spec.name): no tag value found to aim at")
            for k in 0..<8 {
                var bytes = fixture.data
                let size = bytes.count
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    guard let spot = spots.randomElement(using: &random) else { break }
                    let at = max(0, min(size - 1, spot + Int.random(in: -16...24, using: &random)))
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0: bytes[at] ^= UInt8(1) << UInt8(Int.random(in: 0..<8, using: &random))
                    case 1:
                        // An invalid sequence: a lone surrogate, a bad UTF-8 lead, an unknown encoding byte.
                        let bad: [[UInt8]] = [[0x00, 0xD8], [0xDF, 0xFF], [0xC0], [0xFE, 0xFF, 0x00], [0x04], [0xFF]]
                        let piece = bad[Int.random(in: 0..<bad.count, using: &random)]
                        let end = min(size, at + piece.count)
                        bytes.replaceSubrange(at..<end, with: piece.prefix(end - at))
                    default:
                        // A length field before the value: huge, past the end, zero, or one byte short.
                        let field = max(0, spot - [4, 8, 16][Int.random(in: 0..<3, using: &random)])
                        guard field + 4 <= size else { continue }
                        let values = [0xFFFF_FFFF, 0x7FFF_FFFF, size - field + 1, 0, 1, 0x0FFF_FFFF, 0x7F7F_7F7F]
                        let v = values[Int.random(in: 0..<values.count, using: &random)]
                        bytes.replaceSubrange(field..<(field + 4), with: Bool.random(using: &random) ? Build.be32(v) : Build.le32(v))
                    }
                }
                let policy = k % 2 == 0 ? StartSetPolicy() : Policies.tight
                let run = AnalysisRun(bytes, name: fixture.spec.name, policy: policy)
                let label = "\(fixture.spec.name) tag mutant \(k), seed \(s)"
                HostileInputTests.checkInvariants(run, size: Int64(bytes.count), policy: policy, label)
                // A fallback (the walk gave up) is a fixed head and tail whatever was read, so that it does not
                // depend on which bytes happened to be present (the budget's plans converge); its tags are read
                // through a view restricted to those ranges, which is what the rule below protects.
                var outside = run.read
                outside.subtract(run.startSet.ranges)
                #expect(run.startSet.isFallback || outside.isEmpty, "\(label): read \(outside) outside its start set")
                runs += 1
            }
        }
        print("fuzzedTags: \(runs) mutants analysed, seed \(s)")
    }
}
