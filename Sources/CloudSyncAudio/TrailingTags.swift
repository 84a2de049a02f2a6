import CloudSyncCore

/// Tags at the end of a file (MP3, AAC, and the fallback's formats such as APE, WavPack, Musepack): ID3v1/1.1
/// (the last 128 bytes), APEv2 (a 32-byte footer, an optional header) and Lyrics3v2 (bounded by "LYRICSBEGIN" and
/// a size with "LYRICS200"), in any order before the ID3v1 tag. Players read all of them, so the start set keeps
/// them whole; binary APE items (cover art) are skipped by size.
enum TrailingTags {
    struct Found {
        /// From the first byte of the first trailing tag to the end of the file (empty at the end when none).
        var region: Range<Int64>
        var ape: Tags?
        var id3v1: Tags?
    }

    enum Result {
        case tags(Found)
        case need(ByteRanges)
    }

    /// The most APE items read; the most bytes of an APE key.
    static let maximumItems = 1024
    static let maximumKeyBytes = 255

    /// The trailing tags of the file, none starting before `floor` (the first audio byte).
    static func read(_ analysis: inout Analysis, floor: Int64) -> Result {
        let size = analysis.size
        var end = size
        var found = Found(region: size..<size)
        for _ in 0..<4 {
            if end == size, found.id3v1 == nil, end - 128 >= floor {
                guard let v = analysis.window.view(at: end - 128, count: 128) else {
                    return .need(analysis.span(end - 128, 128))
                }
                if v.matches(0, "TAG") {
                    found.id3v1 = id3v1(v)
                    end -= 128
                    continue
                }
            }
            if end - 32 >= floor {
                guard let footer = analysis.window.view(at: end - 32, count: 32) else {
                    return .need(analysis.span(end - 32, 32))
                }
                if footer.matches(0, "APETAGEX") {
                    guard let tagSize = footer.u32le(12), let count = footer.u32le(16), let flags = footer.u32le(20),
                          tagSize >= 32 else { break }
                    let total = Int64(tagSize) + (flags & 0x8000_0000 != 0 ? 32 : 0)
                    let start = end - total
                    guard start >= floor else { break }
                    let items = (end - Int64(tagSize))..<(end - 32)
                    // With the tag, the footer-sized bytes before it: where the next tag's end would be.
                    guard analysis.window.has(start..<end) else { return .need(ByteRanges(max(floor, start - 32)..<end)) }
                    if found.ape == nil { found.ape = ape(&analysis.window, items: items, count: Int(count)) }
                    end = start
                    continue
                }
            }
            if end - 15 >= floor {
                guard let v = analysis.window.view(at: end - 15, count: 15) else {
                    return .need(analysis.span(end - 15, 15))
                }
                if v.matches(6, "LYRICS200"), let digits = v.slice(0, 6), let length = Tags.number(Substring(
                    String(decoding: digits, as: UTF8.self))) {
                    let start = end - 15 - Int64(length)
                    guard start >= floor, length >= 11 else { break }
                    guard let begin = analysis.window.view(at: start, count: 11) else {
                        return .need(ByteRanges(max(floor, start - 32)..<end))
                    }
                    guard begin.matches(0, "LYRICSBEGIN") else { break }
                    end = start
                    continue
                }
            }
            break
        }
        found.region = end..<size
        return .tags(found)
    }

    /// ID3v1 (title, artist, album 30 bytes each, year 4, comment 30) and 1.1 (track in the comment's last byte
    /// after a NUL); the genre byte as a name.
    static func id3v1(_ v: ByteView) -> Tags {
        func field(_ at: Int, _ length: Int) -> String? {
            v.slice(at, length).flatMap { Text.utf8OrLatin1(Text.untilNUL($0), width: length) }
        }
        var tags = Tags()
        tags.title = field(3, 30)
        tags.artist = field(33, 30)
        tags.album = field(63, 30)
        tags.date = field(93, 4)
        if v.u8(125) == 0, let track = v.u8(126), track != 0 { tags.trackNumber = Int(track) }
        if let genre = v.u8(127) { tags.genre = Genres.name(Int(genre)) }
        return tags
    }

    /// The text items of an APEv2 tag whose items occupy `items` (each: value size, flags, NUL-terminated key,
    /// value), read item by item so binary items are skipped without being read.
    static func ape(_ window: inout ByteWindow, items: Range<Int64>, count: Int) -> Tags {
        var tags = Tags()
        var position = items.lowerBound
        for _ in 0..<min(max(0, count), maximumItems) {
            guard position <= items.upperBound - 8,
                  let head = window.view(at: position, count: min(8 + Int64(maximumKeyBytes) + 1, items.upperBound - position)),
                  let valueSize = head.u32le(0), let flags = head.u32le(4),
                  let nul = head.bytes[8...].firstIndex(of: 0), nul > 8
            else { break }
            let key = String(decoding: head.bytes[8..<nul], as: UTF8.self)
            let valueStart = position + Int64(nul) + 1
            guard Int64(valueSize) <= items.upperBound - valueStart else { break }
            position = valueStart + Int64(valueSize)
            guard (flags >> 1) & 3 == 0 else { continue }  // binary or external item
            let length = min(Int64(valueSize), Int64(TrackInfo.maximumTextBytes) * 4)
            guard let value = window.bytes(at: valueStart, count: length) else { break }
            let text = Text.utf8(Text.untilNUL(value[...]))
            switch Text.lowercasedASCII(key) {
            case "title": tags.title = tags.title ?? text
            case "artist": tags.artist = tags.artist ?? text
            case "album artist", "albumartist", "album_artist": tags.albumArtist = tags.albumArtist ?? text
            case "album": tags.album = tags.album ?? text
            case "track", "tracknumber": tags.setTrack(text)
            case "disc", "discnumber": tags.setDisc(text)
            case "year", "date": tags.date = tags.date ?? text
            case "genre": tags.genre = tags.genre ?? text
            default: break
            }
        }
        return tags
    }
}
