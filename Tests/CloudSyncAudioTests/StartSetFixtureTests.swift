import CloudSyncCore
@testable import CloudSyncAudio
import Foundation
import Testing
import TestSupport

/// Every fixture, analysed the way the engine does it (initial ranges, then each `.need`), against facts from
/// ffprobe and the test's own reading of the files.
@Suite struct StartSetFixtureTests {
    @Test(arguments: Fixtures.specs, ["default", "tight"])
    func startSetHoldsWhatThePlayerReads(_ spec: FixtureSpec, _ policyName: String) throws {
        let fixture = try Fixtures.fixture(spec.name)
        let policy = Policies.named(policyName)
        let run = AnalysisRun(fixture.data, name: spec.name, policy: policy)
        let set = run.startSet
        let size = Int64(fixture.data.count)
        let where_ = "\(spec.name) (\(policyName))"

        #expect(!set.isFallback, "\(where_) fell back")
        #expect(set.format == spec.format, "\(where_)")
        #expect(run.calls <= (spec.bigCover ? 4 : 3), "\(where_) took \(run.calls) rounds")
        #expect(run.absentReads == 0, "\(where_) read absent bytes")
        #expect(run.emptyNeeds == 0, "\(where_) asked for bytes already present")
        #expect(set.ranges.ranges.allSatisfy { $0.lowerBound >= 0 && $0.upperBound <= size }, "\(where_)")
        #expect(set.ranges.byteCount <= policy.maxStartSetBytes)

        // Everything before the first audio byte ffmpeg reads, the audio part and the tail.
        let first = fixture.probe.firstPacket
        let audioStart = try #require(set.audioStart)
        #expect(audioStart <= first && first - audioStart <= 4096, "\(where_): audio at \(audioStart), ffprobe's first packet at \(first)")
        #expect(set.ranges.containsAll(0..<first), "\(where_): \(set.ranges) misses metadata before \(first)")
        #expect(set.ranges.containsAll(max(0, size - policy.tailBytes)..<size), "\(where_): no tail")
        #expect(set.ranges.containsAll(audioStart..<min(size, audioStart + policy.minimumAudioBytes)), "\(where_)")
        let seconds = fixture.probe.secondsCovered(by: set.ranges)
        #expect(seconds >= 0.9 * policy.headSeconds, "\(where_): only \(seconds) s of audio")

        // What players read elsewhere, by the test's own reading of the file.
        for region in Structure.regionsPlayersRead(fixture) {
            #expect(set.ranges.containsAll(region.range), "\(where_): \(region.name) \(region.range) not in \(set.ranges)")
        }

        // Tags exactly as written, the duration and stream facts as ffprobe has them.
        var tags = set.info
        tags.durationSeconds = nil
        tags.sampleRate = nil
        tags.channels = nil
        tags.bitrate = nil
        #expect(tags == spec.tags, "\(where_)")
        let duration = try #require(set.info.durationSeconds, "\(where_): no duration")
        #expect(abs(duration - fixture.trueDuration) < 0.5, "\(where_): \(duration) s, ffprobe \(fixture.trueDuration) s")
        #expect(set.info.sampleRate == fixture.probe.sampleRate, "\(where_)")
        #expect(set.info.channels == fixture.probe.channels, "\(where_)")
        let packetBytes = fixture.probe.packets.reduce(Int64(0)) { $0 + $1.size }
        let streamBitrate = Double(packetBytes) * 8 / fixture.trueDuration
        let bitrate = Double(try #require(set.info.bitrate))
        #expect(abs(bitrate - streamBitrate) / streamBitrate < 0.05, "\(where_): bitrate \(bitrate), packets say \(streamBitrate)")

        print(String(format: "start set %@ [%@]: %lld of %lld bytes (%.1f %%), %d call(s), audio at %lld, %.1f s of audio",
                     spec.name, policyName, set.ranges.byteCount, size, 100 * Double(set.ranges.byteCount) / Double(size), run.calls,
                     audioStart, seconds))
    }

    /// Analysis CPU time per track (this thread's CPU time, so other tests running meanwhile do not count):
    /// every fixture analysed in-process from its complete bytes (all present, as after a pull) and through the
    /// whole loop from the initial ranges (as on a first pull); and the share of the library's bytes the start
    /// sets keep. Reported, not asserted.
    @Test func analysisCPUTimePerTrack() throws {
        let library = try Fixtures.library()
        var lines: [String] = []
        var total = 0.0
        let repeats = 5
        for fixture in library.ordered {
            let complete = PartialFile(fixture.data, present: ByteRanges(0..<Int64(fixture.data.count)))
            var set: StartSet?
            let whole = cpuMilliseconds {
                for _ in 0..<repeats {
                    if case .done(let done) = StartSetAnalyzer.analyze(complete, name: fixture.spec.name, mimeType: nil,
                                                                        policy: StartSetPolicy(), round: 0) { set = done }
                }
            } / Double(repeats)
            let loop = cpuMilliseconds {
                for _ in 0..<repeats { _ = AnalysisRun(fixture.data, name: fixture.spec.name) }
            } / Double(repeats)
            total += whole
            #expect(set?.isFallback == false, "\(fixture.spec.name)")
            lines.append(String(format: "  %@: %.2f ms (complete file), %.2f ms (whole loop from the initial ranges)",
                                fixture.spec.name, whole, loop))
        }
        print("analysis CPU per track (debug build, thread CPU time):\n" + lines.joined(separator: "\n"))
        print(String(format: "analysis CPU mean: %.2f ms per track", total / Double(library.ordered.count)))
        for (name, policy) in [("default", Policies.standard), ("tight", Policies.tight)] {
            let sizes = library.ordered.reduce(Int64(0)) { $0 + Int64($1.data.count) }
            let kept = library.ordered.reduce(Int64(0)) { $0 + AnalysisRun($1.data, name: $1.spec.name, policy: policy).startSet.ranges.byteCount }
            print(String(format: "start sets of the whole fixture library [%@]: %lld of %lld bytes (%.1f %%)",
                         name, kept, sizes, 100 * Double(kept) / Double(sizes)))
        }
    }

    /// The CPU time this thread spent in `body`, in milliseconds.
    private func cpuMilliseconds(_ body: () -> Void) -> Double {
        var start = timespec(), end = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start)
        body()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end)
        return Double(end.tv_sec - start.tv_sec) * 1000 + Double(end.tv_nsec - start.tv_nsec) / 1e6
    }
}

/// The test's own reading of the fixtures' structure: the regions a player reads besides the head and the tail.
enum Structure {
    struct Region {
        let name: String
        let range: Range<Int64>
    }

    static func regionsPlayersRead(_ fixture: Fixture) -> [Region] {
        let b = fixture.data
        let size = Int64(b.count)
        switch fixture.spec.format {
        case .mp4:
            return atoms(b).flatMap { atom -> [Region] in
                atom.type == "moov"
                    ? [Region(name: "moov", range: atom.offset..<atom.end)]
                    : [Region(name: "\(atom.type) header", range: atom.offset..<min(atom.end, atom.offset + 8))]
            }
        case .mp3, .aac:
            var regions: [Region] = []
            if b.count > 128, b[b.count - 128] == 0x54, b[b.count - 127] == 0x41, b[b.count - 126] == 0x47 {
                regions.append(Region(name: "ID3v1", range: (size - 128)..<size))
            }
            if let ape = b.lastRange(of: Array("APETAGEX".utf8)), b.count - ape >= 32 {
                let tagSize = Int64(Derived.le32(b, ape + 12))
                let header: Int64 = b[ape + 23] & 0x80 != 0 ? 32 : 0
                let end = Int64(ape) + 32
                regions.append(Region(name: "APEv2", range: (end - tagSize - header)..<end))
            }
            return regions
        case .ogg:
            return [Region(name: "last 65307 bytes", range: max(0, size - 65_307)..<size)]
        case .wav:
            return Derived.chunks(b).flatMap { chunk -> [Region] in
                let header = Region(name: "\(chunk.id) header", range: Int64(chunk.offset)..<Int64(chunk.offset + 8))
                return chunk.id == "data" ? [header]
                    : [header, Region(name: chunk.id, range: Int64(chunk.bytes.startIndex)..<Int64(chunk.bytes.endIndex))]
            }
        case .aiff:
            return aiffChunks(b).map { Region(name: $0.id, range: $0.id == "SSND" ? $0.offset..<($0.offset + 16) : $0.offset..<$0.end) }
        case .flac, .unknown:
            return []
        }
    }

    struct Atom {
        let type: String
        let offset: Int64
        let end: Int64
    }

    /// Top-level MP4 atoms (32-bit and 64-bit sizes, 0 = to the end).
    static func atoms(_ b: [UInt8]) -> [Atom] {
        var out: [Atom] = []
        var i = 0
        while i + 8 <= b.count {
            var size = Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
            if size == 1 { size = (0..<8).reduce(0) { $0 << 8 | Int(b[i + 8 + $1]) } }
            if size == 0 { size = b.count - i }
            guard size >= 8 else { break }
            out.append(Atom(type: String(decoding: b[(i + 4)..<(i + 8)], as: UTF8.self), offset: Int64(i), end: Int64(i + size)))
            i += size
        }
        return out
    }

    /// AIFF chunks (big-endian sizes, even padding).
    static func aiffChunks(_ b: [UInt8]) -> [(id: String, offset: Int64, end: Int64)] {
        var out: [(String, Int64, Int64)] = []
        var i = 12
        while i + 8 <= b.count {
            let size = Int(b[i + 4]) << 24 | Int(b[i + 5]) << 16 | Int(b[i + 6]) << 8 | Int(b[i + 7])
            let end = min(b.count, i + 8 + size)
            out.append((String(decoding: b[i..<(i + 4)], as: UTF8.self), Int64(i), Int64(end)))
            i = end + size % 2
        }
        return out
    }
}

extension Array where Element == UInt8 {
    /// The offset of the last occurrence of `needle` within the last 64 KiB, or nil.
    func lastRange(of needle: [UInt8]) -> Int? {
        guard count >= needle.count else { return nil }
        var i = count - needle.count
        let floor = Swift.max(0, count - 65_536)
        while i >= floor {
            if self[i] == needle[0] && Array(self[i..<(i + needle.count)]) == needle { return i }
            i -= 1
        }
        return nil
    }
}
