// Real audio files made by ffmpeg once per test process (40 s of a tone over pink noise, so codecs spend real
// bitrates), each tagged with non-ASCII values, plus a few derived by rearranging a real file's bytes. The facts a
// test checks against come from ffprobe on the complete file or from the test's own reading, never from the code
// under test.
@testable import CloudSyncAudio
import Foundation
import Synchronization
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
    static let title = "Café — Пётр 東京 🎵"
    static let artist = "Mötley Crüe & Björk"
    static let albumArtist = "Various Ärtists"
    static let album = "Ünïcode Album ½"

    /// Every field: what ID3v2, APEv2, Vorbis comments, MP4 ilst carry.
    static let all = TrackInfo(title: title, artist: artist, albumArtist: albumArtist, album: album, trackNumber: 9,
                               trackTotal: 12, discNumber: 1, discTotal: 2, date: "2019", genre: "Jazz")
    /// What ffmpeg's RIFF INFO carries (no album artist, no disc).
    static let riff = TrackInfo(title: title, artist: artist, album: album, trackNumber: 9, trackTotal: 12,
                                date: "2019", genre: "Jazz")
    /// What ID3v1.1 carries (30-byte fields: the title is exactly 30 bytes of UTF-8; track without total).
    static let id3v1 = TrackInfo(title: title, artist: artist, album: album, trackNumber: 9, date: "2019", genre: "Jazz")

    /// ffmpeg's `-metadata` arguments for every field.
    static let arguments: [String] = [
        "-metadata", "title=\(title)", "-metadata", "artist=\(artist)", "-metadata", "album_artist=\(albumArtist)",
        "-metadata", "album=\(album)", "-metadata", "track=9/12", "-metadata", "disc=1/2", "-metadata", "date=2019",
        "-metadata", "genre=Jazz",
    ]
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
    func secondsCovered(by ranges: RangeSet<Int64>) -> Double {
        var covered = 0.0
        for packet in packets.sorted(by: { $0.position < $1.position }) {
            guard ranges.covers(packet.position..<(packet.position + packet.size)) else { break }
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

    /// Makes every fixture in a directory that is removed when the test process exits.
    static func make() throws -> Library {
        guard which("ffmpeg") != nil, which("ffprobe") != nil else {
            throw TestSupportError("ffmpeg and ffprobe are needed to make the audio fixtures: apt-get install ffmpeg (scripts/install-deps.sh does)")
        }
        let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("cloudsync-audio-fixtures-\(getpid())")
        try? FileManager.default.removeItem(at: dir)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        atexit {
            let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("cloudsync-audio-fixtures-\(getpid())")
            try? FileManager.default.removeItem(at: dir)
        }
        let started = Date()
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
        func ffmpeg(_ arguments: [String]) throws { try Tool.check("ffmpeg", ["-v", "error", "-y", "-nostdin"] + arguments) }

        // 40 s: a 440 Hz tone over two independent pink noises (stereo), so encoders spend realistic bitrates.
        let graph = "sine=frequency=440:duration=40:sample_rate=44100[a];"
            + "anoisesrc=duration=40:color=pink:sample_rate=44100:amplitude=0.02:seed=1[b];"
            + "anoisesrc=duration=40:color=pink:sample_rate=44100:amplitude=0.02:seed=2[c];"
            + "[b][c]amerge=inputs=2[n];[a]pan=stereo|c0=c0|c1=c0[s];[s][n]amix=inputs=2[out0]"
        try ffmpeg(["-f", "lavfi", "-i", graph, "-c:a", "pcm_s16le", path("source.wav")])
        // A cover that does not compress: 1448² random grey pixels as PNG (~2.1 MB).
        var random = SeededRandom(seed: 0xC0FE)
        try random.bytes(1448 * 1448).write(to: dir.appendingPathComponent("cover.gray"))
        try ffmpeg(["-f", "rawvideo", "-pix_fmt", "gray", "-s", "1448x1448", "-i", path("cover.gray"), "-frames:v", "1",
                    path("cover.png")])
        let meta = Tagged.arguments
        let source = ["-i", path("source.wav")]
        let withCover = source + ["-i", path("cover.png"), "-map", "0:a", "-map", "1:v", "-c:v", "copy",
                                  "-disposition:v", "attached_pic"]
        // Encoders at their fastest settings (same formats and bitrates): the machine is shared.
        let made: [() throws -> Void] = [
            { try ffmpeg(withCover + ["-c:a", "libmp3lame", "-b:a", "128k", "-compression_level", "9", "-id3v2_version", "3",
                                      "-write_id3v1", "1"] + meta + [path("mp3-cover.mp3")]) },
            { try ffmpeg(source + ["-c:a", "libmp3lame", "-q:a", "4", "-compression_level", "9"] + meta + [path("mp3-vbr.mp3")]) },
            { try ffmpeg(withCover + ["-c:a", "flac", "-compression_level", "0"] + meta + [path("flac-cover.flac")]) },
            { try ffmpeg(source + ["-c:a", "aac", "-b:a", "128k", "-aac_coder", "fast"] + meta + [path("m4a-end.m4a")]) },
            { try ffmpeg(source + ["-c:a", "libvorbis", "-q:a", "4"] + meta + [path("vorbis.ogg")]) },
            { try ffmpeg(source + ["-c:a", "libopus", "-b:a", "96k", "-compression_level", "0"] + meta + [path("opus.opus")]) },
            {
                try writePictureMetadata(cover: dir.appendingPathComponent("cover.png"),
                                         to: dir.appendingPathComponent("picture.txt"))
                try ffmpeg(source + ["-i", path("picture.txt"), "-map", "0:a", "-map_metadata", "1", "-c:a", "libopus",
                                     "-b:a", "96k", "-compression_level", "0", path("opus-cover.opus")])
            },
            { try ffmpeg(source + ["-c:a", "pcm_s16le"] + meta + [path("wav.wav")]) },
            { try ffmpeg(source + ["-c:a", "pcm_s16le", "-rf64", "always"] + meta + [path("wav-rf64.wav")]) },
            { try ffmpeg(source + ["-c:a", "pcm_s16be", "-write_id3v2", "1"] + meta + [path("aiff.aiff")]) },
        ]
        let derived: [() throws -> Void] = [
            // ID3v1 only, and no Xing frame (a stream copy drops it): ffmpeg's ID3v1 writer takes ID3v2 frame names.
            { try ffmpeg(["-i", path("mp3-cover.mp3"), "-map", "0:a", "-c", "copy", "-map_metadata", "-1", "-id3v2_version",
                          "0", "-write_id3v1", "1", "-write_xing", "0", "-metadata", "TIT2=\(Tagged.title)",
                          "-metadata", "TPE1=\(Tagged.artist)", "-metadata", "TALB=\(Tagged.album)", "-metadata", "TRCK=9/12",
                          "-metadata", "TDRC=2019", "-metadata", "TCON=Jazz", path("mp3-id3v1.mp3")]) },
            { try ffmpeg(["-i", path("m4a-end.m4a"), "-c", "copy", "-movflags", "+faststart", path("m4a-faststart.m4a")]) },
            { try ffmpeg(["-i", path("flac-cover.flac"), "-map", "0:a", "-c", "copy", "-f", "ogg", path("ogg-flac.oga")]) },
            { try ffmpeg(["-i", path("m4a-end.m4a"), "-i", path("cover.png"), "-map", "0:a", "-map", "1:v", "-c", "copy",
                          "-disposition:v", "attached_pic", path("m4a-cover.m4a")]) },
            { try ffmpeg(["-i", path("m4a-end.m4a"), "-map", "0:a", "-c", "copy", "-f", "adts", "-write_id3v2", "1",
                          "-write_apetag", "1", path("aac-adts.aac")]) },
            { try Derived.listAfterData(from: dir.appendingPathComponent("wav.wav"),
                                        to: dir.appendingPathComponent("wav-list-after-data.wav")) },
            { try Derived.id3BeforeFLAC(tagFrom: dir.appendingPathComponent("mp3-vbr.mp3"),
                                        flac: dir.appendingPathComponent("flac-cover.flac"),
                                        to: dir.appendingPathComponent("flac-id3.flac")) },
        ]
        try inParallel(made)
        try inParallel(derived)

        var fixtures: [String: Fixture] = [:]
        for spec in Fixtures.specs {
            let url = dir.appendingPathComponent(spec.name)
            fixtures[spec.name] = Fixture(spec: spec, url: url, data: Array(try Data(contentsOf: url)), probe: try Probe.of(url))
        }
        print("audio fixtures: \(fixtures.count) files made in \(String(format: "%.1f", Date().timeIntervalSince(started))) s under \(dir.path)")
        return Library(directory: dir, fixtures: fixtures)
    }

    /// Runs the steps two at a time (the machine's cores); the first error is rethrown after all have ended.
    static func inParallel(_ steps: [() throws -> Void]) throws {
        let errors = Mutex<[any Error]>([])
        nonisolated(unsafe) let steps = steps
        DispatchQueue.concurrentPerform(iterations: steps.count) { i in
            do { try steps[i]() } catch { errors.withLock { $0.append(error) } }
        }
        if let error = errors.withLock({ $0.first }) { throw error }
    }

    /// An ffmetadata file with every tag and a METADATA_BLOCK_PICTURE comment (a base64 FLAC picture block) of
    /// the cover: ffmpeg 5.1 writes it into OpusTags as is, across as many pages as it takes.
    static func writePictureMetadata(cover: URL, to file: URL) throws {
        let png = [UInt8](try Data(contentsOf: cover))
        var block: [UInt8] = []
        func u32(_ v: Int) { block += [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        u32(3)  // front cover
        u32(9); block += Array("image/png".utf8)
        u32(0)  // no description
        u32(1448); u32(1448); u32(8); u32(0)
        u32(png.count); block += png
        func escaped(_ s: String) -> String {
            var out = ""
            for c in s {
                if "=;#\\\n".contains(c) { out.append("\\") }
                out.append(c)
            }
            return out
        }
        var text = ";FFMETADATA1\n"
        let fields = [("title", Tagged.title), ("artist", Tagged.artist), ("album_artist", Tagged.albumArtist),
                      ("album", Tagged.album), ("track", "9/12"), ("disc", "1/2"), ("date", "2019"), ("genre", "Jazz")]
        for (key, value) in fields { text += "\(key)=\(escaped(value))\n" }
        text += "METADATA_BLOCK_PICTURE=\(escaped(Data(block).base64EncodedString()))\n"
        try Data(text.utf8).write(to: file)
    }
}

/// Fixtures made by rearranging the bytes of real files (with the test's own reading of their structure).
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

    /// ffmpeg's WAV (fmt, LIST, data) rewritten as fmt, data, LIST: the INFO tags after the audio, where other
    /// writers put them and where readers (ffmpeg included) still look.
    static func listAfterData(from source: URL, to target: URL) throws {
        let b = [UInt8](try Data(contentsOf: source))
        let parts = chunks(b)
        guard let fmt = parts.first(where: { $0.id == "fmt " }), let list = parts.first(where: { $0.id == "LIST" }),
              let data = parts.first(where: { $0.id == "data" }) else { throw TestSupportError("unexpected WAV layout") }
        var body = Array("WAVE".utf8) + fmt.bytes + data.bytes + list.bytes
        body = Array("RIFF".utf8) + putLE32(body.count) + body
        try Data(body).write(to: target)
    }

    /// An ID3v2 tag taken from a real MP3 (its header's syncsafe size tells its length) before a FLAC file.
    static func id3BeforeFLAC(tagFrom mp3: URL, flac: URL, to target: URL) throws {
        let m = [UInt8](try Data(contentsOf: mp3))
        guard m.count > 10, m[0] == 0x49, m[1] == 0x44, m[2] == 0x33 else { throw TestSupportError("no ID3v2 in \(mp3.lastPathComponent)") }
        let size = (0..<4).reduce(0) { $0 << 7 | Int(m[6 + $1]) }
        let tag = m[0..<(10 + size)]
        try Data(tag + [UInt8](try Data(contentsOf: flac))).write(to: target)
    }
}
