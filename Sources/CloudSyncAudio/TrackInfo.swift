import CloudSyncCore

/// Tags and stream facts read from a start set (never from bytes outside it). Absent values are nil.
///
/// Text values have trailing NULs and spaces trimmed, are at most ``TrackInfo/maximumTextBytes`` bytes of UTF-8
/// (cut at a character boundary), and invalid UTF-8 is replaced (U+FFFD), not rejected. Numbers are at most
/// ``TrackInfo/maximumNumber``; a field that does not parse as one is nil.
public struct TrackInfo: Sendable, Hashable, Codable {
    public var title, artist, albumArtist, album: String?
    public var trackNumber, trackTotal, discNumber, discTotal: Int?
    /// As tagged: "2019" or "2019-05-04".
    public var date: String?
    /// A name; numeric ID3 genre references ("(13)", "13", ID3v1's byte, MP4 `gnre`) are mapped to names.
    public var genre: String?
    public var durationSeconds: Double?
    /// `bitrate` in bits/s (average over the stream).
    public var sampleRate: Int?, channels: Int?, bitrate: Int?

    /// The longest text value kept, in UTF-8 bytes.
    public static let maximumTextBytes = 1024
    /// The largest track or disc number (or total) kept.
    public static let maximumNumber = 999_999

    public init(title: String? = nil, artist: String? = nil, albumArtist: String? = nil, album: String? = nil,
                trackNumber: Int? = nil, trackTotal: Int? = nil, discNumber: Int? = nil, discTotal: Int? = nil,
                date: String? = nil, genre: String? = nil, durationSeconds: Double? = nil,
                sampleRate: Int? = nil, channels: Int? = nil, bitrate: Int? = nil) {
        self.title = title
        self.artist = artist
        self.albumArtist = albumArtist
        self.album = album
        self.trackNumber = trackNumber
        self.trackTotal = trackTotal
        self.discNumber = discNumber
        self.discTotal = discTotal
        self.date = date
        self.genre = genre
        self.durationSeconds = durationSeconds
        self.sampleRate = sampleRate
        self.channels = channels
        self.bitrate = bitrate
    }

    /// The JSON object the index keeps (`files.tags`): the fields that are set, under their Swift names, keys
    /// sorted — the keys and values `JSONEncoder` with `.sortedKeys` writes (it decodes back to the same value),
    /// without its cost (13 µs a track, 4 % of a pull's CPU over real MP3s). `TagsJSON` in the engine reads it.
    public var json: String {
        var object = JSONText.Object()
        object.add("album", album)
        object.add("albumArtist", albumArtist)
        object.add("artist", artist)
        object.add("bitrate", bitrate)
        object.add("channels", channels)
        object.add("date", date)
        object.add("discNumber", discNumber)
        object.add("discTotal", discTotal)
        object.add("durationSeconds", durationSeconds)
        object.add("genre", genre)
        object.add("sampleRate", sampleRate)
        object.add("title", title)
        object.add("trackNumber", trackNumber)
        object.add("trackTotal", trackTotal)
        return object.text
    }

    /// No tag and no duration (stream facts alone do not count).
    public var isEmpty: Bool {
        title == nil && artist == nil && albumArtist == nil && album == nil && trackNumber == nil
            && trackTotal == nil && discNumber == nil && discTotal == nil && date == nil && genre == nil
            && durationSeconds == nil
    }
}

/// The tag fields of one tag (ID3v2, APEv2, ID3v1, Vorbis comment, ilst, RIFF INFO), merged field by field.
struct Tags: Hashable {
    var title, artist, albumArtist, album: String?
    var trackNumber, trackTotal, discNumber, discTotal: Int?
    var date, genre: String?

    /// Fills each field still nil from `other` (self wins field by field).
    mutating func fill(from other: Tags) {
        title = title ?? other.title
        artist = artist ?? other.artist
        albumArtist = albumArtist ?? other.albumArtist
        album = album ?? other.album
        trackNumber = trackNumber ?? other.trackNumber
        trackTotal = trackTotal ?? other.trackTotal
        discNumber = discNumber ?? other.discNumber
        discTotal = discTotal ?? other.discTotal
        date = date ?? other.date
        genre = genre ?? other.genre
    }

    /// Sets "n" or "n/m" as the track number and total (a total already set is kept when the text has none).
    mutating func setTrack(_ text: String?) {
        guard let text else { return }
        let (n, total) = Tags.numberPair(text)
        if trackNumber == nil { trackNumber = n }
        if trackTotal == nil { trackTotal = total }
    }

    /// Sets "n" or "n/m" as the disc number and total.
    mutating func setDisc(_ text: String?) {
        guard let text else { return }
        let (n, total) = Tags.numberPair(text)
        if discNumber == nil { discNumber = n }
        if discTotal == nil { discTotal = total }
    }

    /// "9/12" → (9, 12); "09" → (9, nil); " 9 / 12 " → (9, 12); anything else → nil parts.
    static func numberPair(_ text: String) -> (Int?, Int?) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let first = parts.first.flatMap { number($0) }
        let second = parts.count > 1 ? number(parts[1]) : nil
        return (first, second)
    }

    /// A decimal number of at most 6 digits (surrounding spaces allowed), or nil.
    static func number(_ text: Substring) -> Int? {
        let digits = text.utf8.drop { $0 == 0x20 }.reversed().drop { $0 == 0x20 }.reversed()
        guard !digits.isEmpty, digits.count <= 6, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let value = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        return value <= TrackInfo.maximumNumber ? value : nil
    }

    /// Keeps a number only when it is within 0...maximumNumber.
    static func bounded(_ value: Int?) -> Int? {
        guard let value, value >= 0, value <= TrackInfo.maximumNumber else { return nil }
        return value
    }

    /// The track info of these tags with the stream facts; a duration, rate or count no real stream has (not
    /// finite, not positive, a duration of 30 years or more, a bitrate of 10¹² bit/s or more) is left out.
    func info(durationSeconds: Double?, sampleRate: Int?, channels: Int?, byteRate: Double?) -> TrackInfo {
        func positive(_ value: Int?) -> Int? { value.flatMap { $0 > 0 ? $0 : nil } }
        let duration = durationSeconds.flatMap { $0.isFinite && $0 > 0 && $0 < 1e9 ? $0 : nil }
        let bitrate = byteRate.flatMap { rate -> Int? in
            let bits = (rate * 8).rounded()
            return bits.isFinite && bits >= 1 && bits < 1e12 ? Int(bits) : nil
        }
        return TrackInfo(title: title, artist: artist, albumArtist: albumArtist, album: album,
                         trackNumber: Tags.bounded(trackNumber), trackTotal: Tags.bounded(trackTotal),
                         discNumber: Tags.bounded(discNumber), discTotal: Tags.bounded(discTotal),
                         date: date, genre: genre, durationSeconds: duration,
                         sampleRate: positive(sampleRate), channels: positive(channels), bitrate: bitrate)
    }
}
