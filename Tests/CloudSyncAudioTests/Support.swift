// Test support for CloudSyncAudio: an in-memory file that exposes only the bytes an analysis asked for, the
// analysis loop the engine runs, and a bounded runner for ffmpeg/ffprobe.
import CloudSyncCore
@testable import CloudSyncAudio
import Foundation
import Synchronization
import TestSupport

/// A file held in memory of which only `present` is available; every read is logged, and so is every read of
/// bytes that are not present.
struct PartialFile: AudioBytes {
    let data: [UInt8]
    var present: ByteRanges
    let log: ReadLog

    init(_ data: [UInt8], present: ByteRanges, log: ReadLog = ReadLog()) {
        self.data = data
        self.present = present
        self.log = log
    }

    var size: Int64 { Int64(data.count) }

    func bytes(in range: Range<Int64>) -> [UInt8]? {
        guard range.lowerBound >= 0, range.upperBound <= size, present.containsAll(range) else {
            log.absent()
            return nil
        }
        log.read(range)
        return Array(data[Int(range.lowerBound)..<Int(range.upperBound)])
    }
}

/// A file of any size made of a few pieces of bytes at given offsets and zeros elsewhere, of which only `present`
/// is available: big hostile files without the memory.
struct SyntheticFile: AudioBytes {
    let size: Int64
    let pieces: [(offset: Int64, bytes: [UInt8])]
    var present: ByteRanges
    let log: ReadLog

    func bytes(in range: Range<Int64>) -> [UInt8]? {
        guard range.lowerBound >= 0, range.upperBound <= size, present.containsAll(range) else {
            log.absent()
            return nil
        }
        log.read(range)
        var out = [UInt8](repeating: 0, count: Int(range.upperBound - range.lowerBound))
        for piece in pieces {
            let lower = max(range.lowerBound, piece.offset), upper = min(range.upperBound, piece.offset + Int64(piece.bytes.count))
            guard lower < upper else { continue }
            out.replaceSubrange(Int(lower - range.lowerBound)..<Int(upper - range.lowerBound),
                                with: piece.bytes[Int(lower - piece.offset)..<Int(upper - piece.offset)])
        }
        return out
    }
}

/// What an analysis read (thread-safe).
final class ReadLog: Sendable {
    private let state = Mutex((read: ByteRanges(), absent: 0))
    func read(_ range: Range<Int64>) { state.withLock { $0.read.insert(contentsOf: range) } }
    func absent() { state.withLock { $0.absent += 1 } }
    /// Every byte read.
    var read: ByteRanges { state.withLock { $0.read } }
    /// Reads of bytes that were not present.
    var absentReads: Int { state.withLock { $0.absent } }
}

/// One analysis run to completion the way the engine runs it: the initial ranges, then every `.need`.
struct AnalysisRun {
    let startSet: StartSet
    /// `analyze` calls made (1 when the initial ranges were enough).
    let calls: Int
    /// Everything fetched: the initial ranges and every need.
    let fetched: ByteRanges
    /// Reads of absent bytes (must be 0) and needs that named only present bytes (must be 0).
    let absentReads: Int
    let emptyNeeds: Int
    /// Every byte the analysis read, over all calls.
    let read: ByteRanges
    /// The needs, in order.
    let needs: [ByteRanges]

    /// Runs the loop over `data`; at most `policy.maxRounds + 1` calls, which the contract guarantees suffice.
    init(_ data: [UInt8], name: String, mimeType: String? = nil, policy: StartSetPolicy = StartSetPolicy()) {
        self.init(size: Int64(data.count), name: name, mimeType: mimeType, policy: policy) {
            PartialFile(data, present: $0, log: $1)
        }
    }

    /// Runs the loop over a file of `size` bytes whose view with some bytes present `file` makes.
    init(size: Int64, name: String, mimeType: String? = nil, policy: StartSetPolicy,
         file: (ByteRanges, ReadLog) -> any AudioBytes) {
        var present = StartSetAnalyzer.initialRanges(size: size, policy: policy)
        let log = ReadLog()
        var calls = 0
        var emptyNeeds = 0
        var needs: [ByteRanges] = []
        var result: StartSet?
        for round in 0...max(0, policy.maxRounds) {
            calls += 1
            let step = StartSetAnalyzer.analyze(file(present, log), name: name,
                                                mimeType: mimeType, policy: policy, round: round)
            switch step {
            case .done(let set):
                result = set
            case .need(let ranges):
                if ranges.isEmpty || ranges.intersection(present) == ranges { emptyNeeds += 1 }
                needs.append(ranges)
                present.formUnion(ranges)
            }
            if result != nil { break }
        }
        // A loop that did not end within maxRounds + 1 calls breaks the contract; report it as a fallback-less
        // empty set so the caller's expectations fail visibly.
        startSet = result ?? StartSet(format: .unknown, ranges: ByteRanges(), audioStart: nil, isFallback: false,
                                      info: TrackInfo(title: "analysis did not terminate"))
        self.calls = result == nil ? calls + 1 : calls
        fetched = present
        absentReads = log.absentReads
        read = log.read
        self.emptyNeeds = emptyNeeds
        self.needs = needs
    }
}

/// The policies the fixture tests run: the defaults, and a tight one whose start sets leave real holes in these
/// 40-second files (with the defaults, 512 KiB of audio plus the 128 KiB tail is most of a compressed file).
enum Policies {
    static let standard = StartSetPolicy()
    static let tight = StartSetPolicy(headSeconds: 10, minimumAudioBytes: 16 << 10, tailBytes: 8 << 10)

    static func named(_ name: String) -> StartSetPolicy { name == "tight" ? tight : standard }
}
