import CloudSyncAudio
import CloudSyncCache
import Foundation

/// What `ls`, playlists and serve's index show of a track: the tags read from its start set (``StartSets``
/// records them as JSON of `TrackInfo`) and its duration, or its file name as title when it has no title tag.
/// Pure and offline: made from an index row alone.
///
/// Display strings (``title``, ``artist``, ``album``, ``line``, ``playlistLine``) have control characters
/// replaced by spaces, so a hostile tag cannot break a line of output; the raw ``tags`` are as read.
public struct TrackLabel: Sendable, Hashable {
    /// The tag fields of the start set (no stream facts); empty when none were read or the row's JSON is unusable.
    public let tags: Tags
    /// The duration in seconds, nil when unknown.
    public let duration: Double?
    /// The title tag, else the file name without its extension.
    public let title: String
    public var artist: String? { tags.artist.map(Self.printable) }
    public var album: String? { tags.album.map(Self.printable) }

    /// The tag fields `ls --json` prints, nil when absent.
    public struct Tags: Sendable, Hashable {
        public var title, artist, albumArtist, album: String?
        public var track, disc: Int?
        /// As tagged: "2019" or "2019-05-04".
        public var date: String?
        public var genre: String?

        public init(title: String? = nil, artist: String? = nil, albumArtist: String? = nil, album: String? = nil,
                    track: Int? = nil, disc: Int? = nil, date: String? = nil, genre: String? = nil) {
            self.title = title
            self.artist = artist
            self.albumArtist = albumArtist
            self.album = album
            self.track = track
            self.disc = disc
            self.date = date
            self.genre = genre
        }
    }

    public init(path: String, tags: Tags, duration: Double?) {
        self.tags = tags
        self.duration = duration.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
        title = Self.printable(tags.title ?? Self.fileTitle(of: path))
    }

    /// The label of an index row: its tags JSON decoded (a row whose JSON does not decode shows its file name,
    /// as one never analysed does) and its duration.
    public init(_ entry: CacheEntryInfo) {
        var tags = Tags()
        if let json = entry.tags, let info = try? Self.decoder.decode(TrackInfo.self, from: Data(json.utf8)) {
            tags = Tags(title: info.title, artist: info.artist, albumArtist: info.albumArtist, album: info.album,
                        track: info.trackNumber, disc: info.discNumber, date: info.date, genre: info.genre)
        }
        self.init(path: entry.path, tags: tags, duration: entry.duration)
    }

    /// "Artist – Title" (en dash), or the title alone without an artist tag.
    public var line: String { artist.map { "\($0) – \(title)" } ?? title }

    /// What an extended M3U `#EXTINF` line carries after the comma: "Artist - Title", or the title alone.
    public var playlistLine: String { artist.map { "\($0) - \(title)" } ?? title }

    /// Whole seconds for `#EXTINF` (rounded), -1 when unknown (the M3U convention).
    public var playlistSeconds: Int {
        guard let duration, duration < 1e9 else { return -1 }
        return Int(duration.rounded())
    }

    /// "3:05", "1:02:03", or "-" when unknown.
    public var durationText: String {
        guard let duration, duration < 1e9 else { return "-" }
        let whole = Int(duration.rounded())
        let h = whole / 3600, m = whole / 60 % 60, s = whole % 60
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return h > 0 ? "\(h):\(two(m)):\(two(s))" : "\(m):\(two(s))"
    }

    /// The display title of a remote path: its last component without the extension.
    public static func fileTitle(of path: String) -> String {
        let leaf = path.split(separator: "/").last.map(String.init) ?? path
        let ext = (leaf as NSString).pathExtension
        return ext.isEmpty || ext.count == leaf.count - 1 ? leaf : String(leaf.dropLast(ext.count + 1))
    }

    /// `text` with control characters (C0, DEL, C1) replaced by spaces.
    public static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { isControl($0) ? " " : $0 }))
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value < 0xA0)
    }

    private static let decoder = JSONDecoder()
}
