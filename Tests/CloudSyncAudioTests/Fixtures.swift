// Real audio files made by ffmpeg once per test process (TestSupport's AudioFixtures: 40 s of a tone over pink
// noise, so codecs spend real bitrates), each tagged with non-ASCII values, plus a few derived by rearranging a real
// file's bytes. The facts a test checks against come from ffprobe on the complete file or from the test's own
// reading, never from the code under test.
import CloudSyncCore
@testable import CloudSyncAudio
import Foundation
import Testing
import TestSupport

/// One fixture: its file name, what format it is, and the tags it carries.
struct FixtureSpec: Sendable, CustomTestStringConvertible {
    let name: String
    let format: AudioFormat
    /// A ~2 MB picture in its metadata (then the analysis may take one more round).
    let bigCover: Bool
    /// The tag fields the file carries (stream facts and duration are checked against ffprobe instead).
    let tags: TrackInfo

    var testDescription: String { name }
}

enum Tagged {
    static let title = AudioFixtureTags.title
    static let artist = AudioFixtureTags.artist
    static let albumArtist = AudioFixtureTags.albumArtist
    static let album = AudioFixtureTags.album

    /// Every field: what ID3v2, APEv2, Vorbis comments, MP4 ilst carry.
    static let all = TrackInfo(title: title, artist: artist, albumArtist: albumArtist, album: album, trackNumber: 9,
                               trackTotal: 12, discNumber: 1, discTotal: 2, date: "2019", genre: "Jazz")
    /// What ffmpeg's RIFF INFO carries (no album artist, no disc).
    static let riff = TrackInfo(title: title, artist: artist, album: album, trackNumber: 9, trackTotal: 12,
                                date: "2019", genre: "Jazz")
    /// What ID3v1.1 carries (30-byte fields: the title is exactly 30 bytes of UTF-8; track without total).
    static let id3v1 = TrackInfo(title: title, artist: artist, album: album, trackNumber: 9, date: "2019", genre: "Jazz")
}

enum Fixtures {
    static let specs: [FixtureSpec] = [
        FixtureSpec(name: "mp3-cover.mp3", format: .mp3, bigCover: true, tags: Tagged.all),
        FixtureSpec(name: "mp3-id3v1.mp3", format: .mp3, bigCover: false, tags: Tagged.id3v1),
        FixtureSpec(name: "mp3-vbr.mp3", format: .mp3, bigCover: false, tags: Tagged.all),
        FixtureSpec(name: "aac-adts.aac", format: .aac, bigCover: false, tags: Tagged.all),
        FixtureSpec(name: "flac-cover.flac", format: .flac, bigCover: true, tags: Tagged.all),
        FixtureSpec(name: "flac-id3.flac", format: .flac, bigCover: true, tags: Tagged.all),
        FixtureSpec(name: "m4a-end.m4a", format: .mp4, bigCover: false, tags: Tagged.all),
        FixtureSpec(name: "m4a-faststart.m4a", format: .mp4, bigCover: false, tags: Tagged.all),
        FixtureSpec(name: "m4a-cover.m4a", format: .mp4, bigCover: true, tags: Tagged.all),
        FixtureSpec(name: "vorbis.ogg", format: .ogg, bigCover: false, tags: Tagged.all),
        FixtureSpec(name: "opus.opus", format: .ogg, bigCover: false, tags: Tagged.all),
        FixtureSpec(name: "opus-cover.opus", format: .ogg, bigCover: true, tags: Tagged.all),
        FixtureSpec(name: "ogg-flac.oga", format: .ogg, bigCover: false, tags: Tagged.all),
        FixtureSpec(name: "wav.wav", format: .wav, bigCover: false, tags: Tagged.riff),
        FixtureSpec(name: "wav-list-after-data.wav", format: .wav, bigCover: false, tags: Tagged.riff),
        FixtureSpec(name: "wav-rf64.wav", format: .wav, bigCover: false, tags: Tagged.riff),
        FixtureSpec(name: "aiff.aiff", format: .aiff, bigCover: false, tags: Tagged.all),
    ]

    /// The library, made on first use; every test of the process shares it.
    static let shared: Result<Library, any Error> = Result { try Library.make() }

    /// The fixtures, or a clear error (ffmpeg missing, a generation step failed).
    static func library() throws -> Library { try shared.get() }

    static func fixture(_ name: String) throws -> Fixture {
        guard let fixture = try library().fixtures[name] else { throw TestSupportError("no fixture \(name)") }
        return fixture
    }
}

/// What ffprobe says about the complete file.
struct Probe: Sendable {
    struct Packet: Sendable {
        let time: Double
        let position: Int64
        let size: Int64
    }

    let duration: Double
    /// Format and audio-stream tags, keys lowercased.
    let tags: [String: String]
    let sampleRate: Int
    let channels: Int
    let packets: [Packet]
    /// The report these facts come from.
    let facts: Facts

    /// What ffprobe reports of a file or URL: format and stream facts, and its error output.
    struct Facts: Equatable {
        let duration: Double?
        let tags: [String: String]
        let sampleRate: Int?
        let channels: Int?
        let errors: String
    }

    /// ffprobe's format and stream facts of `url` (a path or a URL), as JSON; throws when ffprobe fails.
    static func tagsAndDuration(_ url: String, options: [String] = []) throws -> Facts {
        let output = try Tool.run("ffprobe", options + ["-v", "error", "-select_streams", "a:0", "-show_entries",
                                             "format=duration:format_tags:stream=sample_rate,channels:stream_tags",
                                             "-of", "json", url])
        guard output.status == 0 else { throw TestSupportError("ffprobe \(url) exited \(output.status): \(output.stderr)") }
        let object = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any] ?? [:]
        let format = object["format"] as? [String: Any] ?? [:]
        let stream = (object["streams"] as? [[String: Any]])?.first ?? [:]
        var tags: [String: String] = [:]
        for source in [stream["tags"], format["tags"]] {
            for (key, value) in source as? [String: String] ?? [:] { tags[key.lowercased()] = value }
        }
        tags["encoder"] = nil
        return Facts(duration: (format["duration"] as? String).flatMap(Double.init), tags: tags,
                     sampleRate: (stream["sample_rate"] as? String).flatMap { Int($0) },
                     channels: stream["channels"] as? Int, errors: output.stderr)
    }

    static func of(_ url: URL) throws -> Probe {
        let facts = try tagsAndDuration(url.path)
        let csv = try Tool.check("ffprobe", ["-v", "error", "-select_streams", "a:0", "-show_entries",
                                            "packet=pts_time,pos,size", "-of", "csv=p=0", url.path])
        // Fields come in ffprobe's order: pts_time, size, pos.
        let packets = csv.split(separator: "\n").compactMap { line -> Packet? in
            let f = line.split(separator: ",", omittingEmptySubsequences: false)
            guard f.count >= 3, let t = Double(f[0]), let size = Int64(f[1]), let pos = Int64(f[2]) else { return nil }
            return Packet(time: t, position: pos, size: size)
        }
        guard let duration = facts.duration, let rate = facts.sampleRate, let channels = facts.channels, !packets.isEmpty
        else { throw TestSupportError("ffprobe told too little about \(url.lastPathComponent)") }
        return Probe(duration: duration, tags: facts.tags, sampleRate: rate, channels: channels, packets: packets, facts: facts)
    }

    /// The first audio byte ffmpeg reads a packet from.
    var firstPacket: Int64 { packets.map(\.position).min() ?? 0 }

    /// The end of the last packet that starts before `seconds` (the audio of the first `seconds`, in file order).
    func endOfAudio(before seconds: Double) -> Int64 {
        packets.filter { $0.time < seconds }.map { $0.position + $0.size }.max() ?? firstPacket
    }

    /// Seconds of audio whose packets lie wholly within `ranges` from the first packet on, in file order.
    func secondsCovered(by ranges: ByteRanges) -> Double {
        var covered = 0.0
        for packet in packets.sorted(by: { $0.position < $1.position }) {
            guard ranges.containsAll(packet.position..<(packet.position + packet.size)) else { break }
            covered = max(covered, packet.time)
        }
        return covered
    }
}

struct Fixture: Sendable {
    let spec: FixtureSpec
    let url: URL
    let data: [UInt8]
    let probe: Probe

    /// The duration to compare with: ffprobe's, except for ADTS, where ffprobe only estimates it from a bitrate
    /// (1.4 s off on these files) and the packet count × 1024 samples is the truth.
    var trueDuration: Double {
        spec.format == .aac ? Double(probe.packets.count) * 1024 / Double(probe.sampleRate) : probe.duration
    }
}

final class Library: Sendable {
    let directory: URL
    let fixtures: [String: Fixture]

    var ordered: [Fixture] { Fixtures.specs.compactMap { fixtures[$0.name] } }

    private init(directory: URL, fixtures: [String: Fixture]) {
        self.directory = directory
        self.fixtures = fixtures
    }

    /// The shared fixtures (TestSupport's generator), each read and probed.
    static func make() throws -> Library {
        let made = try AudioFixtures.shared()
        var fixtures: [String: Fixture] = [:]
        for spec in Fixtures.specs {
            let url = made.url(spec.name)
            fixtures[spec.name] = Fixture(spec: spec, url: url, data: Array(try Data(contentsOf: url)), probe: try Probe.of(url))
        }
        return Library(directory: made.directory, fixtures: fixtures)
    }
}

/// The test's own reading of RIFF structure (to check the analysis against).
enum Derived {
    static func le32(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 | Int(b[i + 2]) << 16 | Int(b[i + 3]) << 24 }
    static func putLE32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }

    /// The RIFF chunks of a WAV file: (id, offset of the header, whole chunk with padding).
    static func chunks(_ b: [UInt8]) -> [(id: String, offset: Int, bytes: ArraySlice<UInt8>)] {
        var out: [(String, Int, ArraySlice<UInt8>)] = []
        var i = 12
        while i + 8 <= b.count {
            let size = le32(b, i + 4)
            let end = min(b.count, i + 8 + size + size % 2)
            out.append((String(decoding: b[i..<i + 4], as: UTF8.self), i, b[i..<end]))
            i = end
        }
        return out
    }
}
