import CloudSyncCore
@testable import CloudSyncAudio
import Testing
import TestSupport

/// The first-frame search of MP3: the quick search of the first `quickSpan` bytes finds the frame the search of the
/// whole span finds, and reads (so keeps in the start set) no more than its window when the frame lies within it.
@Suite struct MPEGSearchTests {
    /// Junk of `count` bytes: random, with false syncs (a valid header followed by junk) sprinkled in.
    static func junk(_ count: Int, falseSyncs: Int, using random: inout SeededRandom) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { raw in
            for i in stride(from: 0, to: count, by: 8) {
                withUnsafeBytes(of: random.next()) { word in
                    raw.baseAddress!.advanced(by: i).copyMemory(from: word.baseAddress!, byteCount: min(8, count - i))
                }
            }
        }
        let header: [UInt8] = [0xFF, 0xFB, 0x90, 0x64]
        for _ in 0..<falseSyncs where count >= header.count {
            let at = Int.random(in: 0...(count - header.count), using: &random)
            bytes.replaceSubrange(at..<(at + header.count), with: header)
        }
        return bytes
    }

    /// Seeded: junk of 0–40 KiB (dense around the quick window's edge), then CBR frames and junk to 1 MiB.
    @Test func quickSearchFindsWhatTheWholeSpanFinds() {
        let s = seed("quickSearchFindsWhatTheWholeSpanFinds")
        var random = SeededRandom(seed: s)
        let quick = Int(MPEGAudio.quickSpan)
        var quickHits = 0
        for trial in 0..<150 {
            let lead = trial % 3 == 0 ? quick + Int.random(in: -3000...3000, using: &random)
                                      : Int.random(in: 0...(40 << 10), using: &random)
            let frames = Build.mp3Frames(Int.random(in: 1...600, using: &random))
            var data = Self.junk(lead, falseSyncs: Int.random(in: 0...6, using: &random), using: &random) + frames
            if Bool.random(using: &random) { data += Self.junk((1 << 20) - min(data.count, 1 << 20), falseSyncs: 0, using: &random) }
            let label = "trial \(trial), lead \(lead), \(data.count) bytes, seed \(s)"

            // The reference: the search over the whole span, everything present.
            let span = min(data.count, Int(MPEGAudio.searchSpan) + 3 * 8192)
            let reference = MPEGAudio.firstFrame(.mp3, ByteView(Array(data[0..<span])),
                                                 limit: min(span, Int(MPEGAudio.searchSpan)), complete: true,
                                                 reachesEnd: span == data.count)
            let run = AnalysisRun(data, name: "t.mp3")
            switch reference {
            case .found(let offset, _):
                #expect(run.startSet.audioStart == Int64(offset), "\(label)")
                #expect(run.startSet.format == .mp3, "\(label)")
                if offset < quick && data.count > 600 << 10 {
                    quickHits += 1
                    // Only the quick window is read at the start (the trailing tags are read at the end).
                    let middle = ByteRanges(checked: MPEGAudio.quickSpan + MPEGAudio.quickConfirmRoom, Int64(data.count) - (256 << 10))
                    #expect(run.read.intersection(middle).isEmpty, "\(label): read \(run.read)")
                }
            case .none, .need:
                #expect(run.startSet.isFallback, "\(label): \(run.startSet)")
            }
        }
        #expect(quickHits > 15)
    }
}
