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

    /// The label of an index row: its tags JSON read (a row whose JSON does not parse shows its file name, as
    /// one never analysed does) and its duration.
    public init(_ entry: CacheEntryInfo) {
        self.init(path: entry.path, tags: entry.tags.flatMap(TagsJSON.parse) ?? Tags(), duration: entry.duration)
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
}

/// Reads the tag fields of the JSON ``StartSets`` records (a flat object: `TrackInfo`'s keys, string and number
/// values) in one pass over its UTF-8, without building the whole value. Written by hand because JSONDecoder
/// doubled the CPU time of `ls --offline` over 100,000 tagged tracks (bench/scale.sh); `TrackColumnsTests`
/// checks it against JSONEncoder's output of `TrackInfo`. Anything but a flat object of strings, numbers, booleans
/// and nulls is refused (nil).
enum TagsJSON {
    static func parse(_ json: String) -> TrackLabel.Tags? {
        var json = json
        return json.withUTF8 { bytes in
            var scanner = Scanner(bytes: bytes)
            return scanner.object()
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard i < bytes.count, bytes[i] == byte else { return false }
            i += 1
            return true
        }

        mutating func object() -> TrackLabel.Tags? {
            var tags = TrackLabel.Tags()
            guard take(0x7B) else { return nil }  // {
            if take(0x7D) { return end(tags) }  // }
            repeat {
                skipSpace()
                guard let key = string(), take(0x3A) else { return nil }  // :
                skipSpace()
                guard i < bytes.count else { return nil }
                switch bytes[i] {
                case 0x22:  // a string
                    guard let text = string() else { return nil }
                    switch key {
                    case "title": tags.title = text
                    case "artist": tags.artist = text
                    case "albumArtist": tags.albumArtist = text
                    case "album": tags.album = text
                    case "date": tags.date = text
                    case "genre": tags.genre = text
                    default: break
                    }
                default:
                    guard let number = scalar() else { return nil }
                    if key == "trackNumber" { tags.track = number }
                    if key == "discNumber" { tags.disc = number }
                }
            } while take(0x2C)  // ,
            return take(0x7D) ? end(tags) : nil
        }

        mutating func end(_ tags: TrackLabel.Tags) -> TrackLabel.Tags? {
            skipSpace()
            return i == bytes.count ? tags : nil
        }

        /// A number, `true`, `false` or `null`: the number's value when it is an integer that fits, else nil
        /// inside; the outer nil means malformed.
        mutating func scalar() -> Int?? {
            let start = i
            while i < bytes.count, !(bytes[i] == 0x2C || bytes[i] == 0x7D || bytes[i] == 0x20 || bytes[i] == 0x0A
                                     || bytes[i] == 0x0D || bytes[i] == 0x09) { i += 1 }
            let token = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
            if token == "true" || token == "false" || token == "null" { return .some(nil) }
            if let value = Int(token) { return .some(value) }
            guard let value = Double(token), value.isFinite else { return nil }
            return .some(nil)
        }

        /// A string literal at `i` (RFC 8259 escapes, surrogate pairs; a lone surrogate becomes U+FFFD).
        mutating func string() -> String? {
            guard i < bytes.count, bytes[i] == 0x22 else { return nil }
            i += 1
            let start = i
            while i < bytes.count, bytes[i] != 0x22, bytes[i] != 0x5C { i += 1 }
            guard i < bytes.count else { return nil }
            if bytes[i] == 0x22 {  // no escapes: the common case
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
                i += 1
                return text
            }
            var out = Array(bytes[start..<i])
            while i < bytes.count {
                let byte = bytes[i]
                i += 1
                switch byte {
                case 0x22: return String(decoding: out, as: UTF8.self)
                case 0x5C:
                    guard i < bytes.count else { return nil }
                    let escape = bytes[i]
                    i += 1
                    switch escape {
                    case 0x22, 0x5C, 0x2F: out.append(escape)
                    case 0x62: out.append(0x08)
                    case 0x66: out.append(0x0C)
                    case 0x6E: out.append(0x0A)
                    case 0x72: out.append(0x0D)
                    case 0x74: out.append(0x09)
                    case 0x75:
                        guard var unit = hex4() else { return nil }
                        var scalar: Unicode.Scalar?
                        if unit >= 0xD800 && unit < 0xDC00, i + 1 < bytes.count, bytes[i] == 0x5C, bytes[i + 1] == 0x75 {
                            let save = i
                            i += 2
                            if let low = hex4(), low >= 0xDC00 && low < 0xE000 {
                                unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                            } else {
                                i = save
                            }
                        }
                        scalar = Unicode.Scalar(unit)
                        out.append(contentsOf: Array(String(Character(scalar ?? "\u{FFFD}")).utf8))
                    default: return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    out.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard i + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[i]
                let digit: UInt32
                switch b {
                case 0x30...0x39: digit = UInt32(b - 0x30)
                case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
                default: return nil
                }
                value = value << 4 | digit
                i += 1
            }
            return value
        }
    }
}
