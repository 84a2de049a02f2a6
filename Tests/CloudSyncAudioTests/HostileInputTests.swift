@testable import CloudSyncAudio
import Foundation
import Testing
import TestSupport

/// Hostile and truncated input: crafted headers, and a seeded fuzz of every fixture's first and last 64 KiB. Every
/// analysis must end within `maxRounds + 1` calls, never read an absent byte, never ask for present bytes only,
/// keep its ranges within the file and `maxStartSetBytes`, and keep its tag values bounded.
@Suite struct HostileInputTests {
    /// The contract every analysis keeps, whatever it was given.
    static func checkInvariants(_ run: AnalysisRun, size: Int64, policy: StartSetPolicy, _ label: String) {
        let set = run.startSet
        #expect(run.calls <= max(0, policy.maxRounds) + 1, "\(label): \(run.calls) calls")
        #expect(set.info.title != "analysis did not terminate", "\(label)")
        #expect(run.absentReads == 0, "\(label): read absent bytes")
        #expect(run.emptyNeeds == 0, "\(label): asked for nothing new")
        #expect(set.ranges.ranges.allSatisfy { $0.lowerBound >= 0 && $0.upperBound <= size }, "\(label): \(set.ranges)")
        #expect(set.ranges.byteCount <= max(0, policy.maxStartSetBytes), "\(label): \(set.ranges.byteCount) bytes")
        if let start = set.audioStart { #expect(start >= 0 && start <= size, "\(label)") }
        let info = set.info
        for text in [info.title, info.artist, info.albumArtist, info.album, info.date, info.genre].compactMap({ $0 }) {
            #expect(text.utf8.count <= TrackInfo.maximumTextBytes && !text.isEmpty, "\(label)")
        }
        for n in [info.trackNumber, info.trackTotal, info.discNumber, info.discTotal].compactMap({ $0 }) {
            #expect(n >= 0 && n <= TrackInfo.maximumNumber, "\(label)")
        }
        for n in [info.sampleRate, info.channels, info.bitrate].compactMap({ $0 }) { #expect(n > 0, "\(label)") }
        if let d = info.durationSeconds { #expect(d.isFinite && d > 0, "\(label)") }
    }

    struct Crafted: Sendable, CustomTestStringConvertible {
        let label: String
        let name: String
        let bytes: [UInt8]
        /// Whether the analysis must give up (the fallback) rather than understand it.
        let fallback: Bool?
        var testDescription: String { label }
    }

    static let filler = [UInt8](repeating: 0x55, count: 300_000)

    static var crafted: [Crafted] {
        let frames = Build.mp3Frames(400)
        let ftyp = Build.atom("ftyp", Build.ascii("M4A ") + Build.be32(0) + Build.ascii("M4A isom"))
        let streamInfo = Build.be16(4096) + Build.be16(4096) + [0, 0, 0, 0, 0, 0]
            + Build.be64(UInt64(44100) << 44 | UInt64(1) << 41 | UInt64(15) << 36 | 441_000) + [UInt8](repeating: 0, count: 16)
        var cases: [Crafted] = [
            Crafted(label: "empty file", name: "a.mp3", bytes: [], fallback: true),
            Crafted(label: "5 bytes of ID3", name: "a.mp3", bytes: Build.ascii("ID3") + [4, 0], fallback: true),
            Crafted(label: "ID3v2 size past the end", name: "a.mp3",
                    bytes: Build.ascii("ID3") + [4, 0, 0] + [0x7F, 0x7F, 0x7F, 0x7F] + frames, fallback: true),
            Crafted(label: "ID3v2 size byte with its top bit", name: "a.mp3",
                    bytes: Build.ascii("ID3") + [3, 0, 0] + [0x80, 0, 0, 10] + frames, fallback: true),
            Crafted(label: "ID3v2 frame size past the tag", name: "a.mp3",
                    bytes: Build.id3v2(3, [Build.ascii("TIT2") + Build.be32(0x7FFF_FFFF) + [0, 0, 0]]) + frames, fallback: false),
            Crafted(label: "ID3v2 extended header larger than the tag", name: "a.mp3",
                    bytes: Build.id3v2(3, flags: 0x40, [], prefix: Build.be32(0xFFFF_FFF0)) + frames, fallback: false),
            Crafted(label: "64 chained ID3v2 tags", name: "a.mp3",
                    bytes: Array([[UInt8]](repeating: Build.id3v2(4, [], padding: 1), count: 64).joined()) + frames, fallback: nil),
            Crafted(label: "MP3 free-format frames only", name: "a.mp3",
                    bytes: Array([[UInt8]](repeating: [0xFF, 0xFB, 0x00, 0x64] + [UInt8](repeating: 0, count: 400), count: 300).joined()),
                    fallback: true),
            Crafted(label: "sync bytes everywhere", name: "a.mp3",
                    bytes: Array([[UInt8]](repeating: [0xFF, 0xFB], count: 200_000).joined()), fallback: nil),
            Crafted(label: "Xing frame count 0xFFFFFFFF", name: "a.mp3",
                    bytes: { var f = frames; f.replaceSubrange(36..<48, with: Build.ascii("Xing") + Build.be32(3) + Build.be32(-1 & 0xFFFF_FFFF)); return f }(),
                    fallback: false),
            Crafted(label: "APE footer size 0xFFFFFFFF", name: "a.mp3",
                    bytes: frames + Build.ascii("APETAGEX") + Build.le32(2000) + Build.le32(0xFFFF_FFFF) + Build.le32(5)
                        + Build.le32(0) + [UInt8](repeating: 0, count: 8), fallback: false),
            Crafted(label: "APE with 1,000,000 items claimed", name: "a.mp3",
                    bytes: frames + { var t = Build.ape([("Title", Build.ascii("x"), 0)]); t.replaceSubrange((t.count - 16)..<(t.count - 12), with: Build.le32(1_000_000)); return t }(),
                    fallback: false),
            Crafted(label: "Lyrics3 size past the start", name: "a.mp3",
                    bytes: frames + Build.ascii("999999LYRICS200") + Build.id3v1(title: "t"), fallback: false),
            Crafted(label: "FLAC block length past the end", name: "a.flac",
                    bytes: Build.ascii("fLaC") + [0x00, 0xFF, 0xFF, 0xFF] + filler, fallback: true),
            Crafted(label: "FLAC STREAMINFO shorter than 34", name: "a.flac",
                    bytes: Build.ascii("fLaC") + [0x80, 0, 0, 10] + filler, fallback: true),
            Crafted(label: "FLAC 100,000 empty padding blocks", name: "a.flac",
                    bytes: Build.ascii("fLaC") + [0x00, 0, 0, 34] + streamInfo
                        + Array([[UInt8]](repeating: [0x01, 0, 0, 0], count: 100_000).joined()) + filler, fallback: true),
            Crafted(label: "FLAC VORBIS_COMMENT with huge counts", name: "a.flac",
                    bytes: Build.ascii("fLaC") + [0x00, 0, 0, 34] + streamInfo + [0x84, 0, 0, 12] + Build.le32(0x7FFF_FFFF)
                        + Build.le32(0xFFFF_FFFF) + Build.le32(0xFFFF_FFFF) + filler, fallback: false),
            Crafted(label: "MP4 atom size below its header", name: "a.m4a",
                    bytes: ftyp + Build.be32(4) + Build.ascii("mdat") + filler, fallback: true),
            Crafted(label: "MP4 largesize 2^64-1", name: "a.m4a",
                    bytes: ftyp + Build.be32(1) + Build.ascii("mdat") + Build.be64(UInt64.max) + filler, fallback: true),
            Crafted(label: "MP4 largesize 2^63", name: "a.m4a",
                    bytes: ftyp + Build.be32(1) + Build.ascii("mdat") + Build.be64(1 << 63) + filler, fallback: true),
            Crafted(label: "MP4 moov size past the end", name: "a.m4a",
                    bytes: ftyp + Build.be32(0x7FFF_0000) + Build.ascii("moov") + filler, fallback: true),
            Crafted(label: "MP4 100,000 free atoms", name: "a.m4a",
                    bytes: ftyp + Array([[UInt8]](repeating: Build.atom("free", []), count: 100_000).joined()), fallback: true),
            Crafted(label: "MP4 moov nested 2,000 deep", name: "a.m4a",
                    bytes: ftyp + (0..<2_000).reduce(Build.atom("mdhd", [])) { inner, _ in Build.atom("trak", inner) }
                        .withMoov() + Build.atom("mdat", filler), fallback: nil),
            Crafted(label: "MP4 atoms of size 0 (to the end of their parent) nested", name: "a.m4a",
                    bytes: ftyp + Build.atom("moov", Array([[UInt8]](repeating: Build.be32(0) + Build.ascii("trak"), count: 5000).joined()))
                        + Build.atom("mdat", filler), fallback: nil),
            Crafted(label: "ADTS frames of length 0", name: "a.aac",
                    bytes: Array([[UInt8]](repeating: [0xFF, 0xF1, 0x50, 0x80, 0x00, 0x1F, 0xFC], count: 50_000).joined()),
                    fallback: true),
            Crafted(label: "MP4 moov without an audio track", name: "a.m4a",
                    bytes: ftyp + Build.atom("moov", Build.atom("udta", [])) + Build.atom("mdat", filler), fallback: true),
            Crafted(label: "Ogg page past the end", name: "a.ogg",
                    bytes: Build.ascii("OggS") + [0, 2] + [UInt8](repeating: 0, count: 20) + [255] + [UInt8](repeating: 255, count: 255),
                    fallback: true),
            Crafted(label: "Ogg stream of unknown codec", name: "a.ogg",
                    bytes: Build.oggPage(sequence: 0, flags: 2, packets: [Build.ascii("Speex   ") + [UInt8](repeating: 0, count: 72)]) + filler,
                    fallback: true),
            Crafted(label: "RIFF fmt size past the end", name: "a.wav",
                    bytes: Build.ascii("RIFF") + Build.le32(100) + Build.ascii("WAVE") + Build.ascii("fmt ") + Build.le32(0x7FFF_FFFF) + filler,
                    fallback: true),
            Crafted(label: "RIFF without fmt", name: "a.wav",
                    bytes: Build.ascii("RIFF") + Build.le32(0) + Build.ascii("WAVE") + Build.ascii("data") + Build.le32(0xFFFF_FFFF) + filler,
                    fallback: true),
            Crafted(label: "RIFF fmt with a zero byte rate", name: "a.wav",
                    bytes: Build.ascii("RIFF") + Build.le32(0) + Build.ascii("WAVE") + Build.ascii("fmt ") + Build.le32(16)
                        + [UInt8](repeating: 0, count: 16) + Build.ascii("data") + Build.le32(0) + filler, fallback: false),
            Crafted(label: "AIFF sample rate infinity", name: "a.aiff",
                    bytes: Build.ascii("FORM") + Build.be32(0) + Build.ascii("AIFF") + Build.ascii("COMM") + Build.be32(18)
                        + Build.be16(2) + Build.be32(1000) + Build.be16(16) + [0x7F, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0]
                        + Build.ascii("SSND") + Build.be32(8 + filler.count) + Build.be32(0) + Build.be32(0) + filler, fallback: true),
            Crafted(label: "AIFF SSND offset past its chunk", name: "a.aiff",
                    bytes: Build.ascii("FORM") + Build.be32(0) + Build.ascii("AIFF") + Build.ascii("COMM") + Build.be32(18)
                        + Build.be16(2) + Build.be32(1000) + Build.be16(16) + [0x40, 0x0E, 0xAC, 0x44, 0, 0, 0, 0, 0, 0]
                        + Build.ascii("SSND") + Build.be32(16) + Build.be32(0xFFFF_FFF0) + Build.be32(0) + filler, fallback: true),
        ]
        // Endless Ogg pages: a Vorbis comment packet that never ends, page after page.
        var endless = Build.oggPage(sequence: 0, flags: 2, packets: [[1] + Build.ascii("vorbis") + [UInt8](repeating: 1, count: 23)])
        let piece = [UInt8](repeating: 3, count: 255 * 255)
        for k in 0..<120 { endless += Build.oggPage(sequence: UInt32(k + 1), packets: [piece], continues: true) }
        cases.append(Crafted(label: "endless Ogg header pages", name: "a.ogg", bytes: endless, fallback: true))
        return cases
    }

    @Test(arguments: crafted)
    func craftedHeaders(_ c: Crafted) {
        for policy in [StartSetPolicy(), Policies.tight] {
            let run = AnalysisRun(c.bytes, name: c.name, policy: policy)
            Self.checkInvariants(run, size: Int64(c.bytes.count), policy: policy, c.label)
            if let fallback = c.fallback { #expect(run.startSet.isFallback == fallback, "\(c.label)") }
        }
    }

    struct BigCase: Sendable, CustomTestStringConvertible {
        let label: String
        let name: String
        let size: Int64
        let pieces: [(offset: Int64, bytes: [UInt8])]
        var testDescription: String { label }
    }

    /// Files of gigabytes with headers whose numbers multiply out past any integer (byte rates from a huge
    /// `mdat` over a tiny duration, sizes near 2^32 and 2^63): no trap, bounded facts.
    static var bigCases: [BigCase] {
        let gib: Int64 = 1 << 30
        let ftyp = Build.atom("ftyp", Build.ascii("M4A ") + Build.be32(0) + Build.ascii("M4A isom"))
        let mdhd = Build.atom("mdhd", [0, 0, 0, 0] + Build.be32(0) + Build.be32(0) + Build.be32(0xFFFF_FFFF) + Build.be32(1) + [0, 0, 0, 0])
        let hdlr = Build.atom("hdlr", [0, 0, 0, 0] + Build.be32(0) + Build.ascii("soun") + [UInt8](repeating: 0, count: 13))
        let moov = Build.atom("moov", Build.atom("trak", Build.atom("mdia", mdhd + hdlr)))
        let mdatHeader = Build.be32(1) + Build.ascii("mdat") + Build.be64(UInt64(6 * gib))
        let flacInfo = Build.be16(16) + Build.be16(16) + [0, 0, 0, 0, 0, 0]
            + Build.be64(UInt64(655_350) << 44 | UInt64(7) << 41 | UInt64(31) << 36 | 1) + [UInt8](repeating: 0, count: 16)
        let riff = Build.ascii("RF64") + Build.le32(-1 & 0xFFFF_FFFF) + Build.ascii("WAVE") + Build.ascii("ds64") + Build.le32(28)
            + Build.be64(0).reversed() + Build.be64(UInt64.max - 7).reversed() + Build.be64(0) + Build.le32(0)
            + Build.ascii("fmt ") + Build.le32(16) + Build.le16(1) + Build.le16(2) + Build.le32(1) + Build.le32(1)
            + Build.le16(4) + Build.le16(16) + Build.ascii("data") + Build.le32(-1 & 0xFFFF_FFFF)
        return [
            BigCase(label: "MP4: 6 GiB mdat over 1/(2^32-1) s", name: "a.m4a", size: 6 * gib + 600,
                    pieces: [(0, ftyp + moov + mdatHeader)]),
            BigCase(label: "FLAC: 655350 Hz, one sample, 5 GiB of frames", name: "a.flac", size: 5 * gib,
                    pieces: [(0, Build.ascii("fLaC") + [0x80, 0, 0, 34] + flacInfo + [0xFF, 0xF8])]),
            BigCase(label: "RF64: data size 2^64-8, 1 byte/s", name: "a.wav", size: 3 * gib, pieces: [(0, riff)]),
            BigCase(label: "MP3: ID3v2 of 256 MiB in a 4 GiB file", name: "a.mp3", size: 4 * gib,
                    pieces: [(0, Build.ascii("ID3") + [4, 0, 0, 0x7F, 0x7F, 0x7F, 0x7F])]),
        ]
    }

    @Test(arguments: bigCases)
    func hugeNumbersInHugeFiles(_ c: BigCase) {
        for policy in [StartSetPolicy(), Policies.tight] {
            let run = AnalysisRun(size: c.size, name: c.name, policy: policy) {
                SyntheticFile(size: c.size, pieces: c.pieces, present: $0, log: $1)
            }
            Self.checkInvariants(run, size: c.size, policy: policy, c.label)
        }
    }

    struct PolicyCase: Sendable, CustomTestStringConvertible {
        let label: String
        let policy: StartSetPolicy
        var testDescription: String { label }
    }

    /// Policies from a hostile configuration still give terminating, bounded analyses.
    @Test(arguments: [
        PolicyCase(label: "no rounds", policy: StartSetPolicy(maxRounds: 0)),
        PolicyCase(label: "negative everything", policy: StartSetPolicy(headSeconds: -5, minimumAudioBytes: -1, tailBytes: -1,
                                                                        probeBytes: -1, maxRounds: -3, maxStartSetBytes: -1)),
        PolicyCase(label: "NaN seconds", policy: StartSetPolicy(headSeconds: .nan)),
        PolicyCase(label: "infinite seconds", policy: StartSetPolicy(headSeconds: .infinity)),
        PolicyCase(label: "huge sizes", policy: StartSetPolicy(minimumAudioBytes: .max, tailBytes: .max, maxStartSetBytes: .max)),
        PolicyCase(label: "tiny maximum", policy: StartSetPolicy(maxStartSetBytes: 1000)),
        PolicyCase(label: "tiny probe", policy: StartSetPolicy(minimumAudioBytes: 1, tailBytes: 1, probeBytes: 1)),
    ])
    func hostilePolicies(_ c: PolicyCase) throws {
        for name in ["mp3-cover.mp3", "m4a-cover.m4a", "opus-cover.opus", "wav.wav"] {
            let data = try Fixtures.fixture(name).data
            Self.checkInvariants(AnalysisRun(data, name: name, policy: c.policy), size: Int64(data.count), policy: c.policy,
                                 "\(c.label) on \(name)")
        }
    }

    /// Every fixture with its first and last 64 KiB mutated (bit flips, 32-bit fields set to 0, 1, huge or just
    /// past the end, truncation), analysed to completion under the default and the tight policy.
    @Test func fuzzedFixtures() throws {
        let s = seed("fuzzedFixtures")
        var random = SeededRandom(seed: s)
        let library = try Fixtures.library()
        let mutantsPerFixture = 12
        var runs = 0
        for fixture in library.ordered {
            for k in 0..<mutantsPerFixture {
                var bytes = fixture.data
                let size = bytes.count
                for _ in 0..<Int.random(in: 1...8, using: &random) {
                    let head = Bool.random(using: &random)
                    let window = min(65_536, size)
                    let at = head ? Int.random(in: 0..<window, using: &random) : size - 1 - Int.random(in: 0..<window, using: &random)
                    switch Int.random(in: 0..<6, using: &random) {
                    case 0: bytes[at] ^= UInt8(1) << UInt8(Int.random(in: 0..<8, using: &random))
                    case 1: bytes[at] = UInt8.random(in: 0...255, using: &random)
                    default:
                        guard at + 4 <= size else { continue }
                        let values: [Int] = [0, 1, 0xFFFF_FFFF, 0x7FFF_FFFF, size - at + 1, Int.random(in: 0...0xFFFF_FFFF, using: &random)]
                        let v = values[Int.random(in: 0..<values.count, using: &random)] & 0xFFFF_FFFF
                        bytes.replaceSubrange(at..<(at + 4), with: Bool.random(using: &random) ? Build.be32(v) : Build.le32(v))
                    }
                }
                if Int.random(in: 0..<4, using: &random) == 0 {
                    bytes.removeSubrange(Int.random(in: 0..<size, using: &random)...)
                }
                let policy = k % 2 == 0 ? StartSetPolicy() : Policies.tight
                let run = AnalysisRun(bytes, name: fixture.spec.name, policy: policy)
                Self.checkInvariants(run, size: Int64(bytes.count), policy: policy, "\(fixture.spec.name) mutant \(k), seed \(s)")
                runs += 1
            }
        }
        print("fuzzedFixtures: \(runs) mutants analysed, seed \(s)")
    }
}

extension Array where Element == UInt8 {
    /// These bytes as the body of a `moov` atom.
    func withMoov() -> [UInt8] { Build.atom("moov", self) }
}
