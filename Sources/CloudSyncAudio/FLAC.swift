/// Native FLAC: optional ID3v2 tags, "fLaC", metadata blocks (STREAMINFO first; VORBIS_COMMENT read; PICTURE,
/// PADDING, SEEKTABLE and the rest skipped by length), then frames. The start set holds every block whole.
enum FLAC {
    /// The most metadata blocks walked.
    static let maximumBlocks = 1024

    /// STREAMINFO's facts.
    struct StreamInfo {
        let sampleRate: Int
        let channels: Int
        let totalSamples: UInt64

        var duration: Double? {
            sampleRate > 0 && totalSamples > 0 ? Double(totalSamples) / Double(sampleRate) : nil
        }

        /// From the 34 bytes of a STREAMINFO block's body.
        init?(_ v: ByteView, _ i: Int) {
            guard v.contains(i, 18), let packed = v.u64be(i + 10) else { return nil }
            sampleRate = Int(packed >> 44)
            channels = Int((packed >> 41) & 0x7) + 1
            totalSamples = packed & 0xF_FFFF_FFFF
            guard sampleRate > 0 else { return nil }
        }
    }

    static func walk(_ analysis: inout Analysis, at start: Int64, id3: [Tags]) -> Walk {
        let size = analysis.size
        var position = start + 4
        var streamInfo: StreamInfo?
        var comments: Tags?
        for index in 0..<maximumBlocks {
            guard position <= size - 4 else { return .notUnderstood(.flac) }
            guard let header = analysis.window.view(at: position, count: 4), let type = header.u8(0),
                  let length = header.u24be(1)
            else { return .need(analysis.lookahead(position)) }
            let body = position + 4
            guard Int64(length) <= size - body, type & 0x7F != 127 else { return .notUnderstood(.flac) }
            let end = body + Int64(length)
            let last = type & 0x80 != 0
            switch type & 0x7F {
            case 0:
                guard index == 0, length >= 34 else { return .notUnderstood(.flac) }
                guard let v = analysis.window.view(at: body, count: 34) else {
                    return .need(analysis.span(body, 34).union(analysis.lookahead(end)))
                }
                guard let info = StreamInfo(v, 0) else { return .notUnderstood(.flac) }
                streamInfo = info
            case 4 where comments == nil:
                guard let v = analysis.window.view(at: body, count: Int64(length)) else {
                    return .need(analysis.span(body, Int64(length)).union(analysis.lookahead(end)))
                }
                comments = VorbisComment.parse(v, at: 0)
            default:
                guard index > 0 else { return .notUnderstood(.flac) }
            }
            position = end
            if last { break }
            if index == maximumBlocks - 1 { return .notUnderstood(.flac) }
        }
        guard let streamInfo else { return .notUnderstood(.flac) }
        let audioStart = position
        let duration = streamInfo.duration
        let byteRate = duration.map { Double(size - audioStart) / $0 }
        var tags = comments ?? Tags()
        for tag in id3 { tags.fill(from: tag) }
        let info = tags.info(durationSeconds: duration, sampleRate: streamInfo.sampleRate,
                             channels: streamInfo.channels, byteRate: byteRate)
        return .layout(Layout(format: .flac, audioStart: audioStart, byteRate: byteRate, info: info))
    }
}

/// Vorbis comments (Xiph): a vendor string, then "KEY=value" fields, little-endian lengths. Used by FLAC and Ogg.
enum VorbisComment {
    /// The most fields read.
    static let maximumFields = 4096

    /// The fields of a comment block starting at `i` of `v` (vendor length first). Fields that do not fit are
    /// ignored, and so is everything after them.
    static func parse(_ v: ByteView, at i: Int) -> Tags {
        var fields = Fields()
        guard let vendorLength = v.u32le(i), Int64(vendorLength) <= Int64(v.count - i - 4),
              let count = v.u32le(i + 4 + Int(vendorLength)) else { return Tags() }
        var position = i + 8 + Int(vendorLength)
        for _ in 0..<min(Int(count), maximumFields) {
            guard let length = v.u32le(position), Int64(length) <= Int64(v.count - position - 4) else { break }
            if let field = v.slice(position + 4, Int(length)) { fields.add(field) }
            position += 4 + Int(length)
        }
        return fields.tags
    }

    /// Fields of interest by key (case-insensitive); the first of each key wins.
    struct Fields {
        private var values: [String: String] = [:]

        mutating func add(_ field: ArraySlice<UInt8>) {
            guard let equals = field.firstIndex(of: UInt8(ascii: "=")), equals - field.startIndex <= 64 else { return }
            let key = Text.lowercasedASCII(String(decoding: field[field.startIndex..<equals], as: UTF8.self))
            guard Fields.keys.contains(key), values[key] == nil else { return }
            let valueEnd = min(field.endIndex, equals + 1 + TrackInfo.maximumTextBytes * 4)
            if let value = Text.utf8(field[(equals + 1)..<valueEnd]) { values[key] = value }
        }

        static let keys: Set<String> = [
            "title", "artist", "albumartist", "album artist", "album_artist", "album", "tracknumber", "tracktotal",
            "totaltracks", "discnumber", "disctotal", "totaldiscs", "date", "year", "genre",
        ]

        var tags: Tags {
            var tags = Tags()
            tags.title = values["title"]
            tags.artist = values["artist"]
            tags.albumArtist = values["albumartist"] ?? values["album artist"] ?? values["album_artist"]
            tags.album = values["album"]
            tags.setTrack(values["tracknumber"])
            if tags.trackTotal == nil, let total = values["tracktotal"] ?? values["totaltracks"] {
                tags.trackTotal = Tags.number(Substring(total))
            }
            tags.setDisc(values["discnumber"])
            if tags.discTotal == nil, let total = values["disctotal"] ?? values["totaldiscs"] {
                tags.discTotal = Tags.number(Substring(total))
            }
            tags.date = values["date"] ?? values["year"]
            tags.genre = values["genre"]
            return tags
        }
    }
}
