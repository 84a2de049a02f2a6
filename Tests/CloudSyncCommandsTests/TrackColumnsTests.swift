@testable import CloudSyncCache
@testable import CloudSyncCommands
import CloudSyncAudio
import CloudSyncCore
import CloudSyncEngine
import CloudSyncServer
import Foundation
import Testing

/// Tags and durations in `ls` (table, JSON, selection, order) and playlists, from index rows alone.
@Suite struct TrackColumnsTests {
    /// An index row with the tags JSON the engine records (`TrackInfo`, sorted keys) and a duration.
    static func row(_ path: String, tags: String? = nil, duration: Double? = nil, added: Double = 0, remote: String = "music") -> CacheEntryInfo {
        CacheEntryInfo(remote: remote, file: RemoteFile(path: path, size: 1000, modified: Date(timeIntervalSince1970: 0)),
                       state: .missing, presentBytes: 0, localPath: "\(remote)/\(path)", tracksURL: URL(fileURLWithPath: "/tmp/tracks"),
                       pinned: false, lastAccess: Date(timeIntervalSince1970: 0), startSet: nil, headPresent: false,
                       added: Date(timeIntervalSince1970: added), lastPlayed: nil, outdatedTrackBytes: 0, tags: tags, duration: duration)
    }

    /// The state word of `ls` for each state, with and without the start set present: a partial track whose
    /// start set is not all there is `partial NN%`, not `head`.
    @Test(arguments: [(CacheEntryState.complete, true, Int64(1000), "cached"), (.partial, true, 600, "head"),
                      (.partial, false, 250, "partial 25%"), (.missing, false, 0, "missing")])
    func stateWords(_ state: CacheEntryState, _ head: Bool, _ present: Int64, _ word: String) {
        var entry = Self.row("A/t.mp3")
        entry.state = state
        entry.headPresent = head
        entry.presentBytes = present
        #expect(ListingOutput.stateText(entry) == word, "\(state), head \(head)")
    }

    /// The count after the table names the head-only tracks (they start at once too) when there are any.
    @Test func summaryCountsHeadOnlyTracks() {
        var rows = ["a", "b", "c", "d"].map { Self.row("A/\($0).mp3") }
        rows[0].state = .complete
        rows[0].presentBytes = 1000
        #expect(ListingOutput.summary(rows) == "4 tracks, 3.9 KiB; 1 cached\n")
        for i in 1 ... 2 {
            rows[i].state = .partial
            rows[i].headPresent = true
            rows[i].presentBytes = 600
        }
        #expect(ListingOutput.summary(rows) == "4 tracks, 3.9 KiB; 1 cached, 2 head only\n")
    }

    static let full = #"{"album":"Ünïcode Album ½","albumArtist":"Various Ärtists","artist":"Mötley Crüe & Björk","bitrate":128000,"channels":2,"date":"2019","discNumber":1,"discTotal":2,"durationSeconds":40.03,"genre":"Jazz","sampleRate":44100,"title":"Café — Пётр 東京 🎵","trackNumber":9,"trackTotal":12}"#

    struct LabelCase: Sendable, CustomTestStringConvertible {
        let label: String
        let path: String
        let tags: String?
        let duration: Double?
        let line: String
        let playlist: String
        let seconds: Int
        let time: String
        var testDescription: String { label }
    }

    @Test(arguments: [
        LabelCase(label: "every tag", path: "A/01 x.mp3", tags: full, duration: 40.03, line: "Mötley Crüe & Björk – Café — Пётр 東京 🎵",
                  playlist: "Mötley Crüe & Björk - Café — Пётр 東京 🎵", seconds: 40, time: "0:40"),
        LabelCase(label: "no tags: the file name", path: "A/01 Song.flac", tags: nil, duration: nil, line: "01 Song",
                  playlist: "01 Song", seconds: -1, time: "-"),
        LabelCase(label: "title only", path: "a.ogg", tags: #"{"title":"Solo"}"#, duration: 3725.6, line: "Solo", playlist: "Solo",
                  seconds: 3726, time: "1:02:06"),
        LabelCase(label: "artist only keeps the file name", path: "x/Track 3.opus", tags: #"{"artist":"Band"}"#, duration: 59.5,
                  line: "Band – Track 3", playlist: "Band - Track 3", seconds: 60, time: "1:00"),
        LabelCase(label: "control characters become spaces", path: "a.mp3", tags: #"{"artist":"A\nB","title":"x\u0007\r\ny"}"#,
                  duration: 1, line: "A B – x   y", playlist: "A B - x   y", seconds: 1, time: "0:01"),
        LabelCase(label: "JSON that does not decode: the file name", path: "d/e.wav", tags: #"{"title":5"#, duration: 2,
                  line: "e", playlist: "e", seconds: 2, time: "0:02"),
        LabelCase(label: "absurd duration", path: "e.wav", tags: nil, duration: 1e300, line: "e", playlist: "e", seconds: -1, time: "-"),
        LabelCase(label: "negative duration", path: "e.wav", tags: nil, duration: -3, line: "e", playlist: "e", seconds: -1, time: "-"),
    ])
    func labels(_ c: LabelCase) {
        let label = TrackLabel(Self.row(c.path, tags: c.tags, duration: c.duration))
        #expect(label.line == c.line)
        #expect(label.playlistLine == c.playlist)
        #expect(label.playlistSeconds == c.seconds)
        #expect(label.durationText == c.time)
    }

    /// The index's tags are what StartSets writes: `TrackInfo.json`, which Foundation's JSONDecoder reads back as
    /// the same TrackInfo (and whose keys are sorted, as JSONEncoder's `.sortedKeys` would write them). TrackLabel
    /// reads them back exactly, hostile text included.
    @Test(arguments: [
        TrackInfo(title: "Café — Пётр 東京 🎵", artist: "Mötley Crüe & Björk", albumArtist: "Various Ärtists", album: "Ünïcode Album ½",
                  trackNumber: 9, trackTotal: 12, discNumber: 1, discTotal: 2, date: "2019", genre: "Jazz", durationSeconds: 40.5,
                  sampleRate: 44100, channels: 2, bitrate: 128_000),
        TrackInfo(title: "quote \" backslash \\ slash / tab \t nl \n nul \u{0} bell \u{7} del \u{7F}", artist: "\u{FFFD}\u{10FFFF}"),
        TrackInfo(album: "", trackNumber: 999_999, discNumber: 0, date: "2019-05-04"),
        TrackInfo(durationSeconds: 1e-9, sampleRate: 8000),
        TrackInfo(),
    ])
    func tagsJSONReadsWhatTheEngineWrites(_ info: TrackInfo) throws {
        let json = info.json
        #expect(try JSONDecoder().decode(TrackInfo.self, from: Data(json.utf8)) == info, "\(json)")
        // The same keys as JSONEncoder writes, in its sorted order (a quoted key followed by ':' is never inside
        // a value, whose quotes are escaped).
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let expected = ((try JSONSerialization.jsonObject(with: try encoder.encode(info))) as? [String: Any]).map { Array($0.keys).sorted() }
        let positions = (expected ?? []).map { json.range(of: "\"\($0)\":")?.lowerBound }
        #expect(positions.allSatisfy { $0 != nil } && positions.map { $0! } == positions.map { $0! }.sorted(), "\(json)")
        #expect(((try JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any])?.count == expected?.count)
        let tags = TrackLabel(Self.row("a.mp3", tags: json)).tags
        #expect(tags == TrackLabel.Tags(title: info.title, artist: info.artist, albumArtist: info.albumArtist, album: info.album,
                                        track: info.trackNumber, disc: info.discNumber, date: info.date, genre: info.genre), "\(json)")
    }

    @Test(arguments: [
        #"{"title":"a""#, #"{"title":"a",}"#, #"["title"]"#, #"{"title":"a"} x"#, #"{"title":"\x"}"#, #"{"title":"\u12"}"#,
        #"{"title":{"nested":1}}"#, #"{"title" "a"}"#, "", "{", #"{"trackNumber":1e999}"#,
    ])
    func malformedTagsJSONShowsTheFileName(_ json: String) {
        let label = TrackLabel(Self.row("Album/Song.mp3", tags: json))
        #expect(label.tags == TrackLabel.Tags() && label.title == "Song", "\(json)")
    }

    @Test func escapedSurrogatePairsAndLoneSurrogates() {
        #expect(TrackLabel(Self.row("a.mp3", tags: #"{"title":"\ud83c\udfb5 \u00e9\/"}"#)).tags.title == "🎵 é/")
        #expect(TrackLabel(Self.row("a.mp3", tags: #"{"title":"x\ud83cy"}"#)).tags.title == "x\u{FFFD}y")
    }

    @Test func jsonCarriesTagsAndDuration() throws {
        let rows = [Self.row("A/a.mp3", tags: Self.full, duration: 40.0312), Self.row("B/b.flac")]
        let text = try ListingOutput.json(rows)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        let tags = try #require(parsed[0]["tags"] as? [String: Any])
        #expect(Set(tags.keys) == ["title", "artist", "album_artist", "album", "track", "disc", "date", "genre"])
        #expect(tags["title"] as? String == "Café — Пётр 東京 🎵" && tags["album_artist"] as? String == "Various Ärtists")
        #expect((tags["track"] as? NSNumber)?.intValue == 9 && (tags["disc"] as? NSNumber)?.intValue == 1)
        #expect((parsed[0]["duration_s"] as? NSNumber)?.doubleValue == 40.031)
        #expect((parsed[1]["tags"] as? [String: Any])?.isEmpty == true)
        #expect(parsed[1]["duration_s"] is NSNull)
        // Keys stay in sorted order.
        let keys = text.split(separator: "}").first.map { String($0) } ?? ""
        #expect(keys.range(of: "\"cached_bytes\":0,\"duration_s\":40.031,\"hashes\"") != nil, "\(text)")
    }

    @Test func tableShowsDurationAndArtistTitleAndLongTheAlbum() {
        let rows = [Self.row("A/a.mp3", tags: Self.full, duration: 40.03), Self.row("B/b.flac")]
        let short = ListingOutput.table(rows, long: false, multipleRemotes: false).split(separator: "\n").map(String.init)
        #expect(short[0].hasSuffix("   0:40  A/a.mp3  Mötley Crüe & Björk – Café — Пётр 東京 🎵"), "\(short[0])")
        #expect(short[1].hasSuffix("      -  B/b.flac"), "\(short[1])")
        let long = ListingOutput.table(rows, long: true, multipleRemotes: false)
        #expect(long.contains("\n    album: Ünïcode Album ½\n") && long.contains("\n    album: -\n"), "\(long)")
    }

    @Test func playlistWritesWholeSecondsAndArtistTitle() {
        let m3u = Playlist.m3u([Self.row("A/a.mp3", tags: Self.full, duration: 40.6), Self.row("B/b.flac")], baseURL: "http://h")
        #expect(m3u == """
            #EXTM3U
            #EXTINF:41,Mötley Crüe & Björk - Café — Пётр 東京 🎵
            http://h/tracks/music/A/a.mp3
            #EXTINF:-1,b
            http://h/tracks/music/B/b.flac

            """)
    }

    static let library = [
        row("z/1.mp3", tags: #"{"album":"Blue","artist":"Miles Davis","discNumber":1,"trackNumber":2}"#, added: 10),
        row("y/2.mp3", tags: #"{"album":"Blue","artist":"Miles Davis","discNumber":1,"trackNumber":1}"#, added: 30),
        row("x/3.mp3", tags: #"{"album":"Kind of Blue","albumArtist":"MILES DAVIS","artist":"Quintet","trackNumber":1}"#, added: 20),
        row("w/4.mp3", tags: #"{"album":"Abbey Road","artist":"The Beatles"}"#, added: 40),
        row("v/5.mp3", added: 50),
    ]

    struct SelectionCase: Sendable, CustomTestStringConvertible {
        let label: String
        let artist: String?
        let album: String?
        let order: TrackColumns.Order
        let paths: [String]
        var testDescription: String { label }
    }

    @Test(arguments: [
        SelectionCase(label: "path order", artist: nil, album: nil, order: .path, paths: ["v/5.mp3", "w/4.mp3", "x/3.mp3", "y/2.mp3", "z/1.mp3"]),
        SelectionCase(label: "artist order: artist, album, disc, track; untagged last", artist: nil, album: nil, order: .artist,
                      paths: ["y/2.mp3", "z/1.mp3", "x/3.mp3", "w/4.mp3", "v/5.mp3"]),
        SelectionCase(label: "album order", artist: nil, album: nil, order: .album, paths: ["w/4.mp3", "y/2.mp3", "z/1.mp3", "x/3.mp3", "v/5.mp3"]),
        SelectionCase(label: "added: newest first", artist: nil, album: nil, order: .added, paths: ["v/5.mp3", "w/4.mp3", "y/2.mp3", "x/3.mp3", "z/1.mp3"]),
        SelectionCase(label: "artist substring, any case, album artist too", artist: "miles", album: nil, order: .path,
                      paths: ["x/3.mp3", "y/2.mp3", "z/1.mp3"]),
        SelectionCase(label: "album substring", artist: nil, album: "BLUE", order: .album, paths: ["y/2.mp3", "z/1.mp3", "x/3.mp3"]),
        SelectionCase(label: "both", artist: "davis", album: "kind", order: .path, paths: ["x/3.mp3"]),
        SelectionCase(label: "nothing matches", artist: "nobody", album: nil, order: .path, paths: []),
    ])
    func selection(_ c: SelectionCase) {
        let picked = TrackColumns(artist: c.artist, album: c.album, order: c.order).apply(Self.library)
        #expect(picked.map(\.path) == c.paths)
    }
}
