import CloudSyncCore
@testable import CloudSyncAudio
import Foundation
import Testing
import TestSupport

/// Tags written by the test from their specifications, read back through the public analysis.
@Suite struct TagTests {
    /// The info of a hand-made MP3: `head` (tags), `frames` silent frames, then `tail` (trailing tags).
    static func info(head: [UInt8], tail: [UInt8] = [], frames: Int = 200, name: String = "t.mp3") -> (StartSet, AnalysisRun) {
        let run = AnalysisRun(head + Build.mp3Frames(frames) + tail, name: name)
        return (run.startSet, run)
    }

    struct EncodingCase: Sendable, CustomTestStringConvertible {
        let major: UInt8
        let encoding: UInt8
        let text: String
        var testDescription: String { "v2.\(major) encoding \(encoding) \(text)" }
    }

    static let encodingCases: [EncodingCase] = [UInt8(2), 3, 4].flatMap { major in
        [EncodingCase(major: major, encoding: 0, text: "Café Ægir ÿ"),
         EncodingCase(major: major, encoding: 1, text: "Пётр 東京 🎵"),
         EncodingCase(major: major, encoding: 2, text: "Пётр 東京 🎵"),
         EncodingCase(major: major, encoding: 3, text: "Café — Пётр 東京 🎵")]
    }

    @Test(arguments: encodingCases)
    func id3v2TextInEveryEncoding(_ c: EncodingCase) {
        let ids = c.major == 2 ? ["TT2", "TP1", "TP2", "TAL"] : ["TIT2", "TPE1", "TPE2", "TALB"]
        let frames = ids.map { Build.frame(c.major, $0, Build.text(c.text, encoding: c.encoding)) }
        let (set, run) = Self.info(head: Build.id3v2(c.major, frames, padding: 100))
        #expect(!set.isFallback)
        #expect(set.info.title == c.text && set.info.artist == c.text && set.info.albumArtist == c.text
                && set.info.album == c.text, "\(set.info)")
        #expect(run.calls == 1)
    }

    struct NumberCase: Sendable, CustomTestStringConvertible {
        let text: String
        let number: Int?
        let total: Int?
        var testDescription: String { "\"\(text)\"" }
    }

    @Test(arguments: [
        NumberCase(text: "9/12", number: 9, total: 12), NumberCase(text: "09", number: 9, total: nil),
        NumberCase(text: " 3 / 4 ", number: 3, total: 4), NumberCase(text: "7/", number: 7, total: nil),
        NumberCase(text: "abc", number: nil, total: nil), NumberCase(text: "1234567/2", number: nil, total: 2),
        NumberCase(text: "-1", number: nil, total: nil), NumberCase(text: "", number: nil, total: nil),
    ])
    func trackAndDiscNumbers(_ c: NumberCase) {
        let frames = [Build.frame(4, "TRCK", Build.text(c.text, encoding: 3)), Build.frame(4, "TPOS", Build.text(c.text, encoding: 3))]
        let (set, _) = Self.info(head: Build.id3v2(4, frames))
        #expect(set.info.trackNumber == c.number && set.info.trackTotal == c.total, "\(set.info)")
        #expect(set.info.discNumber == c.number && set.info.discTotal == c.total, "\(set.info)")
    }

    struct GenreCase: Sendable, CustomTestStringConvertible {
        let tagged: String
        let genre: String?
        var testDescription: String { "\"\(tagged)\"" }
    }

    @Test(arguments: [
        GenreCase(tagged: "(13)", genre: "Pop"), GenreCase(tagged: "13", genre: "Pop"), GenreCase(tagged: "(8)", genre: "Jazz"),
        GenreCase(tagged: "(13)Indie Pop", genre: "Indie Pop"), GenreCase(tagged: "(RX)", genre: "Remix"),
        GenreCase(tagged: "(CR)", genre: "Cover"), GenreCase(tagged: "Jazz", genre: "Jazz"),
        GenreCase(tagged: "(191)", genre: "Psybient"), GenreCase(tagged: "(999)", genre: "(999)"),
        GenreCase(tagged: "(13)(17)", genre: "Pop"), GenreCase(tagged: "80s", genre: "80s"),
    ])
    func id3v2GenreReferences(_ c: GenreCase) {
        let (set, _) = Self.info(head: Build.id3v2(3, [Build.frame(3, "TCON", Build.text(c.tagged, encoding: 0))]))
        #expect(set.info.genre == c.genre)
    }

    @Test func id3v22FramesAndGenre() {
        let frames = [Build.frame(2, "TT2", Build.text("Title", encoding: 0)), Build.frame(2, "TRK", Build.text("3/9", encoding: 0)),
                      Build.frame(2, "TPA", Build.text("2", encoding: 0)), Build.frame(2, "TYE", Build.text("1999", encoding: 0)),
                      Build.frame(2, "TCO", Build.text("(17)", encoding: 0)), Build.frame(2, "PIC", [UInt8](repeating: 0xAB, count: 5000))]
        let (set, _) = Self.info(head: Build.id3v2(2, frames))
        #expect(set.info == TrackInfo(title: "Title", trackNumber: 3, trackTotal: 9, discNumber: 2, date: "1999", genre: "Rock",
                                      durationSeconds: set.info.durationSeconds, sampleRate: 44100, channels: 2, bitrate: 128000))
    }

    @Test func id3v23YearAndDayMonthMakeADate() {
        let frames = [Build.frame(3, "TYER", Build.text("2019", encoding: 0)), Build.frame(3, "TDAT", Build.text("0405", encoding: 0))]
        let (set, _) = Self.info(head: Build.id3v2(3, frames))
        #expect(set.info.date == "2019-05-04")
    }

    /// v2.3: unsynchronisation over the whole tag (frame sizes count the bytes after it is undone).
    @Test func id3v23WholeTagUnsynchronisation() {
        let title = "ÿÿ ÿ\u{E9} ÿ"  // Latin-1 0xFF bytes followed by bytes that would read as a sync
        let frames = [Build.frame(3, "TIT2", Build.text(title, encoding: 0)), Build.frame(3, "TPE1", Build.text("ÿArtist", encoding: 0))]
        let body = Build.unsynchronise(Array(frames.joined()))
        let tag = Build.ascii("ID3") + [3, 0, 0x80] + Build.syncsafe(body.count) + body
        let (set, _) = Self.info(head: tag)
        #expect(set.info.title == title && set.info.artist == "ÿArtist", "\(set.info)")
    }

    /// v2.4: unsynchronisation per frame, with a data length indicator; sizes count the stored bytes.
    @Test func id3v24FrameUnsynchronisationWithDataLength() {
        let text = Build.text("ÿÿ Пётр", encoding: 0x03)
        let original = Build.text("ÿ\u{FF}x", encoding: 0)
        let stored = Build.unsynchronise(original)
        let frame = Build.ascii("TPE1") + Build.syncsafe(stored.count + 4) + [0, 0x03] + Build.syncsafe(original.count) + stored
        let (set, _) = Self.info(head: Build.id3v2(4, [Build.frame(4, "TIT2", text), frame]))
        #expect(set.info.title == "ÿÿ Пётр" && set.info.artist == "ÿ\u{FF}x", "\(set.info)")
    }

    @Test(arguments: [UInt8(3), 4])
    func extendedHeaderIsSkipped(_ major: UInt8) {
        // v2.3: size excludes itself (6 bytes of flags and padding size follow); v2.4: syncsafe size includes itself.
        let extended = major == 3 ? Build.be32(6) + [0, 0, 0, 0, 0, 0] : Build.syncsafe(6) + [1, 0]
        let tag = Build.id3v2(major, flags: 0x40, [Build.frame(major, "TIT2", Build.text("After", encoding: 0))], prefix: extended)
        let (set, _) = Self.info(head: tag)
        #expect(set.info.title == "After")
    }

    /// Pictures are skipped by size: a 200 KB APIC before the text frames is never read.
    @Test func pictureFramesAreNeverRead() {
        let picture = [UInt8](repeating: 0x54, count: 200_000)  // "TTTT…": would parse as frames if read
        let apic = Build.frame(3, "APIC", [0] + Build.ascii("image/png") + [0, 3, 0] + picture)
        let tag = Build.id3v2(3, [apic, Build.frame(3, "TIT2", Build.text("Behind the cover", encoding: 0))])
        let (set, run) = Self.info(head: tag)
        #expect(set.info.title == "Behind the cover")
        let pictureBytes = ByteRanges(Int64(10 + 10 + 13)..<Int64(10 + 10 + 13 + picture.count))
        #expect(run.read.intersection(pictureBytes).isEmpty, "read \(run.read)")
    }

    /// Several ID3v2 tags in a row: both are skipped, the first wins field by field.
    @Test func severalLeadingTags() {
        let first = Build.id3v2(4, [Build.frame(4, "TIT2", Build.text("First", encoding: 3))])
        let second = Build.id3v2(3, [Build.frame(3, "TIT2", Build.text("Second", encoding: 0)),
                                     Build.frame(3, "TALB", Build.text("Album", encoding: 0))])
        let (set, _) = Self.info(head: first + second)
        #expect(set.audioStart == Int64(first.count + second.count))
        #expect(set.info.title == "First" && set.info.album == "Album")
    }

    /// v2.4 footer: the tag is 10 bytes longer than its size says.
    @Test func id3v24FooterCountsTowardsTheTag() {
        var tag = Build.id3v2(4, flags: 0x10, [Build.frame(4, "TIT2", Build.text("Footed", encoding: 3))])
        tag += Build.ascii("3DI") + [4, 0, 0x10] + Array(tag[6..<10])
        let (set, _) = Self.info(head: tag)
        #expect(set.audioStart == Int64(tag.count) && set.info.title == "Footed")
    }

    /// ID3v2 wins over APEv2, which wins over ID3v1, field by field; every trailing tag is in the start set.
    @Test func trailingTagsAndPrecedence() {
        let head = Build.id3v2(4, [Build.frame(4, "TIT2", Build.text("v2 title", encoding: 3))])
        let cover = [UInt8](repeating: 0xEE, count: 300_000)
        let ape = Build.ape([("Cover Art (Front)", cover, 2), ("Title", Build.ascii("ape title"), 0),
                             ("Artist", Build.ascii("ape artist"), 0), ("Track", Build.ascii("4/10"), 0)])
        let lyrics = Build.lyrics3v2("la la la")
        let v1 = Build.id3v1(title: "v1 title", artist: "v1 artist", album: "v1 album", year: "1987", track: 2, genre: 8)
        let (set, run) = Self.info(head: head, tail: ape + lyrics + v1, frames: 2000)
        #expect(set.info.title == "v2 title" && set.info.artist == "ape artist" && set.info.album == "v1 album")
        #expect(set.info.trackNumber == 4 && set.info.trackTotal == 10 && set.info.date == "1987" && set.info.genre == "Jazz")
        let size = Int64(run.fetched.ranges.last?.upperBound ?? 0)
        let trailing = Int64(ape.count + lyrics.count + v1.count)
        #expect(set.ranges.containsAll((size - trailing)..<size), "\(set.ranges)")
        #expect(run.calls == 2, "the APE tag begins before the tail: one more round; needs \(run.needs)")
        // The MP3 duration is the audio between the tags at 128 kbps, not the whole file.
        #expect(abs((set.info.durationSeconds ?? 0) - Double(2000 * 417) * 8 / 128_000) < 0.001)
    }

    /// ID3v1 text: UTF-8 when it is (ffmpeg writes UTF-8, cut at 30 bytes), else ISO-8859-1.
    @Test(arguments: [("Caf\u{E9} — \u{41F}\u{451}\u{442}\u{440}", "utf8"), ("Caf\u{E9}", "latin1")])
    func id3v1Text(_ text: String, _ kind: String) {
        var tag = Build.id3v1(genre: 8)
        let bytes = kind == "utf8" ? Array(text.utf8) : text.unicodeScalars.map { UInt8($0.value) }
        tag.replaceSubrange(3..<(3 + bytes.count), with: bytes)
        let (set, _) = Self.info(head: [], tail: tag)
        #expect(set.info.title == text)
    }

    @Test func textValuesAreBoundedTrimmedAndRepaired() {
        let long = String(repeating: "é", count: 3000)  // 6000 bytes of UTF-8
        let frames = [Build.frame(4, "TIT2", Build.text(long, encoding: 3)),
                      Build.frame(4, "TPE1", Build.text("Artist  \u{0}\u{0}", encoding: 3)),
                      Build.frame(4, "TALB", [3] + Build.ascii("ab") + [0xC3, 0x28] + Build.ascii("cd"))]
        let (set, _) = Self.info(head: Build.id3v2(4, frames))
        let title = set.info.title ?? ""
        #expect(title.utf8.count <= TrackInfo.maximumTextBytes && title.utf8.count >= TrackInfo.maximumTextBytes - 1)
        #expect(title.allSatisfy { $0 == "é" })
        #expect(set.info.artist == "Artist")
        #expect(set.info.album == "ab\u{FFFD}(cd")
    }

    /// WAV with an `id3 ` chunk after the audio (where other writers put it): it wins over LIST/INFO field by
    /// field, and the start set keeps it.
    @Test func wavID3ChunkAfterTheAudio() throws {
        var b = try Fixtures.fixture("wav.wav").data
        let tag = Build.id3v2(3, [Build.frame(3, "TIT2", Build.text("From ID3", encoding: 0)),
                                  Build.frame(3, "TPE2", Build.text("Band", encoding: 0))], padding: 1)
        var chunk = Build.ascii("id3 ") + Build.le32(tag.count) + tag
        if tag.count % 2 == 1 { chunk.append(0) }
        b += chunk
        b.replaceSubrange(4..<8, with: Build.le32(b.count - 8))
        let run = AnalysisRun(b, name: "x.wav", policy: Policies.tight)
        let info = run.startSet.info
        #expect(info.title == "From ID3" && info.albumArtist == "Band" && info.artist == Tagged.artist, "\(info)")
        let size = Int64(b.count)
        #expect(run.startSet.ranges.containsAll((size - Int64(chunk.count))..<size))
    }

    @Test(arguments: [(TrackInfo(), true), (TrackInfo(sampleRate: 44100, channels: 2, bitrate: 128_000), true),
                      (TrackInfo(durationSeconds: 1), false), (TrackInfo(genre: "Jazz"), false), (TrackInfo(discTotal: 2), false)])
    func infoIsEmptyWithoutTagsAndDuration(_ info: TrackInfo, _ empty: Bool) {
        #expect(info.isEmpty == empty)
    }

    /// A LIST that is not INFO (an `adtl` of cue labels) before LIST/INFO: the INFO list still gives the tags.
    @Test func wavInfoListAfterAnotherList() throws {
        let b = try Fixtures.fixture("wav.wav").data
        let parts = Derived.chunks(b)
        let labels = Build.ascii("adtl") + Build.ascii("labl") + Build.le32(8) + Build.le32(1) + Build.ascii("cue\u{0}")
        let adtl = Build.ascii("LIST") + Build.le32(labels.count) + labels
        var body = Build.ascii("WAVE")
        for part in parts {
            if part.id == "LIST" { body += adtl }
            body += part.bytes
        }
        let file = Build.ascii("RIFF") + Build.le32(body.count) + body
        let run = AnalysisRun(file, name: "x.wav")
        #expect(run.startSet.info.title == Tagged.title && run.startSet.info.trackTotal == 12, "\(run.startSet.info)")
    }

    @Test(arguments: [(44100.0, [UInt8]([0x40, 0x0E, 0xAC, 0x44, 0, 0, 0, 0, 0, 0])),
                      (48000.0, [UInt8]([0x40, 0x0E, 0xBB, 0x80, 0, 0, 0, 0, 0, 0])),
                      (96000.0, [UInt8]([0x40, 0x0F, 0xBB, 0x80, 0, 0, 0, 0, 0, 0]))])
    func aiffSampleRateIsAn80BitFloat(_ rate: Double, _ bytes: [UInt8]) {
        #expect(AIFF.extended80(ByteView(bytes), 0) == rate)
    }

    @Test(arguments: [[UInt8]([0x7F, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0]), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                      [0xC0, 0x0E, 0xAC, 0x44, 0, 0, 0, 0, 0, 0], [0x40, 0x40, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]])
    func aiffRejectsSampleRatesNoFileHas(_ bytes: [UInt8]) {
        #expect(AIFF.extended80(ByteView(bytes), 0) == nil)
    }

    /// The eight-bytes-a-step search finds what a byte-by-byte one finds: seeded buffers with the byte at
    /// every alignment, never, or often (junk has a 0xFF every ~256 bytes), and bounds inside, at and past the ends.
    @Test func byteSearchMatchesTheByteByByteOne() {
        var random = SeededRandom(seed: 0x5EED_FF)
        for round in 0 ..< 400 {
            let count = Int(random.next() % 300)
            var bytes = (0 ..< count).map { _ in UInt8(truncatingIfNeeded: random.next() % 255) }  // never 0xFF
            let hits = round % 4 == 0 ? 0 : Int(random.next() % 4)
            for _ in 0 ..< hits where count > 0 { bytes[Int(random.next() % UInt64(count))] = 0xFF }
            let view = ByteView(bytes)
            let from = Int(random.next() % UInt64(count + 12)) - 4
            let to = Int(random.next() % UInt64(count + 12)) - 4
            let lower = max(0, from), upper = min(to, count)
            let expected = lower < upper ? bytes[lower ..< upper].firstIndex(of: 0xFF) : nil
            #expect(view.firstIndex(of: 0xFF, from: from, to: to) == expected, "round \(round): \(from)..<\(to) of \(count)")
            if let first = bytes.firstIndex(where: { $0 != 0xFF }) {
                let other = bytes[first]
                #expect(view.firstIndex(of: other, from: 0, to: count) == first, "round \(round): byte \(other)")
            }
        }
    }

    /// The page CRC of a real Ogg file (libogg's) is what the analyzer computes.
    @Test func oggCRCMatchesARealFile() throws {
        let data = try Fixtures.fixture("vorbis.ogg").data
        let segments = Int(data[26])
        let length = 27 + segments + data[27..<(27 + segments)].reduce(0) { $0 + Int($1) }
        let stored = UInt32(data[22]) | UInt32(data[23]) << 8 | UInt32(data[24]) << 16 | UInt32(data[25]) << 24
        #expect(Ogg.crc(data[0..<length]) == stored)
    }

    /// A Vorbis comment block read incrementally in random pieces gives the same tags as read at once.
    @Test func vorbisCommentsReadInPiecesEqualReadAtOnce() {
        let s = seed("vorbisCommentsReadInPiecesEqualReadAtOnce")
        var random = SeededRandom(seed: s)
        let fields = ["TITLE=Café", "ARTIST=Пётр", "ALBUMARTIST=Various", "ALBUM=東京", "TRACKNUMBER=9", "TRACKTOTAL=12",
                      "DISCNUMBER=1/2", "DATE=2019-05-04", "GENRE=Jazz", "METADATA_BLOCK_PICTURE=" + String(repeating: "A", count: 70_000)]
        for _ in 0..<20 {
            let shuffled = fields.shuffled(using: &random)
            var block = Build.le32(6) + Build.ascii("vendor") + Build.le32(shuffled.count)
            for f in shuffled { block += Build.le32(f.utf8.count) + Build.ascii(f) }
            var stream = VorbisCommentStream()
            var i = 0
            while i < block.count {
                let n = Int.random(in: 1...5000, using: &random)
                stream.feed(block[i..<min(block.count, i + n)])
                i += n
            }
            let whole = VorbisComment.parse(ByteView(block), at: 0)
            #expect(stream.fields.tags == whole, "seed \(s)")
            #expect(whole.title == "Café" && whole.trackNumber == 9 && whole.trackTotal == 12 && whole.discTotal == 2, "seed \(s)")
        }
    }

    /// Names and MIME types are hints: magic bytes decide.
    @Test(arguments: [("flac-cover.flac", "song.mp3", AudioFormat.flac), ("mp3-vbr.mp3", "song.ogg", .mp3),
                      ("m4a-end.m4a", "song", .mp4), ("opus.opus", "track.wav", .ogg), ("aiff.aiff", "x.m4a", .aiff)])
    func magicBytesWinOverTheName(_ fixture: String, _ name: String, _ format: AudioFormat) throws {
        let run = AnalysisRun(try Fixtures.fixture(fixture).data, name: name, mimeType: "application/octet-stream")
        #expect(run.startSet.format == format && !run.startSet.isFallback)
    }

    /// An MP3 that starts with junk is found by its extension (or MIME type); unnamed, it is a fallback.
    @Test(arguments: [("junk.mp3", nil, false), ("junk", "audio/mpeg", false), ("junk.bin", nil, true)] as [(String, String?, Bool)])
    func junkBeforeTheFirstFrame(_ name: String, _ mime: String?, _ fallback: Bool) {
        let junk = [UInt8](repeating: 0x11, count: 3000)
        let run = AnalysisRun(junk + Build.mp3Frames(300), name: name, mimeType: mime)
        #expect(run.startSet.isFallback == fallback)
        if !fallback { #expect(run.startSet.audioStart == 3000) }
    }

    /// Formats without a walker fall back to the probe and the tail, and still show their APEv2 tags.
    @Test func unknownFormatsFallBackWithTheirTrailingTags() {
        var monkey = Build.ascii("MAC ") + [UInt8](repeating: 0x42, count: 2_000_000)
        monkey += Build.ape([("Title", Build.ascii("Monkey"), 0), ("Album Artist", Build.ascii("Apes"), 0)])
        let policy = StartSetPolicy()
        let run = AnalysisRun(monkey, name: "x.ape", policy: policy)
        let size = Int64(monkey.count)
        var expected = ByteRanges(0..<policy.probeBytes)
        expected.insert(contentsOf: (size - policy.tailBytes)..<size)
        #expect(run.startSet.isFallback && run.startSet.format == .unknown && run.startSet.ranges == expected)
        #expect(run.startSet.info.title == "Monkey" && run.startSet.info.albumArtist == "Apes")
        #expect(run.calls == 1)
    }

    @Test(arguments: [("a.mp3", Int64(10 << 20)), ("a.flac", 30 << 20), ("a.wav", 50 << 20), ("a.xyz", 10 << 20),
                      ("a.m4a", 100 << 10), ("a.opus", 0)])
    func estimatesNeverExceedTheFile(_ name: String, _ size: Int64) {
        let policy = StartSetPolicy()
        let estimate = StartSetAnalyzer.estimatedBytes(size: size, name: name, mimeType: nil, policy: policy)
        #expect(estimate >= 0 && estimate <= size && estimate <= policy.maxStartSetBytes)
        if size >= 10 << 20 { #expect(estimate >= policy.minimumAudioBytes + policy.tailBytes) }
    }

    @Test func estimatesFollowTheTypicalByteRate() {
        let policy = StartSetPolicy(headSeconds: 10)
        let flac = StartSetAnalyzer.estimatedBytes(size: 30 << 20, name: "a.FLAC", mimeType: nil, policy: policy)
        #expect(flac == (64 << 10) + 1_125_000 + (128 << 10))  // 900 kbit/s × 10 s, metadata, tail
        let mp3 = StartSetAnalyzer.estimatedBytes(size: 30 << 20, name: "a", mimeType: "audio/mpeg", policy: policy)
        #expect(mp3 == (64 << 10) + (512 << 10) + (128 << 10))  // 10 s at 256 kbit/s < 512 KiB
    }

    @Test(arguments: [(Int64(0), "empty"), (100, "smaller than the tail"), (600 << 10, "probe and tail overlap"), (10 << 20, "apart")])
    func initialRangesAreTheProbeAndTheTail(_ size: Int64, _ label: String) {
        let policy = StartSetPolicy()
        let ranges = StartSetAnalyzer.initialRanges(size: size, policy: policy)
        var expected = ByteRanges()
        if size > 0 {
            expected.insert(contentsOf: 0..<min(size, policy.probeBytes))
            expected.insert(contentsOf: max(0, size - policy.tailBytes)..<size)
        }
        #expect(ranges == expected, "\(label)")
        #expect(policy.probeBytes == policy.minimumAudioBytes + (64 << 10))
    }
}
