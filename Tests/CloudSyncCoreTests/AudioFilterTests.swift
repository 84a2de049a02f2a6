import CloudSyncCore
import Testing

/// Which listed files are audio: by the last path component's extension (case-insensitive), or an `audio/` MIME
/// type whatever the name.
@Suite struct AudioFilterTests {
    static let cases: [(name: String, mimeType: String?, audio: Bool)] = [
        ("a.mp3", nil, true),
        ("b.FLAC", nil, true),
        ("Artist/Album.v2/03 Ёлка.Opus", nil, true),
        ("Artist/Album.v2/cover", nil, false),  // the dot is in a folder's name
        ("Artist/x.mp3/readme", nil, false),
        ("notes.txt", nil, false),
        ("track.mp3 ", nil, false),
        ("noextension", nil, false),
        ("trailing.", nil, false),
        ("stream", "audio/x-weird", true),
        ("stream", "AUDIO/MPEG; charset=binary", true),
        ("cover.jpg", "image/jpeg", false),
        ("東京 🎵.m4a", "application/octet-stream", true),
    ]

    @Test func fileExtensionIsReadFromTheLastComponent() {
        #expect(AudioFilter.fileExtension(of: "Album.v2/03 Song.FLAC") == "FLAC")
        #expect(AudioFilter.fileExtension(of: "Album.v2/cover") == nil)
        #expect(AudioFilter.fileExtension(of: "trailing.") == "")
        #expect(AudioFilter.fileExtension(of: "a.tar.gz") == "gz")
        #expect(AudioFilter.fileExtension(of: "noextension") == nil)
    }

    @Test(arguments: cases) func isAudio(_ example: (name: String, mimeType: String?, audio: Bool)) {
        #expect(AudioFilter().isAudio(name: example.name, mimeType: example.mimeType) == example.audio)
    }
}
