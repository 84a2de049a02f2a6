import CloudSyncCore

/// ID3v2.2, 2.3 and 2.4 (id3.org's informal standards): tag headers and sizes (footer flag, several tags in a
/// row), and the text frames of interest, with every text encoding, unsynchronisation (whole tag in 2.2/2.3, per
/// frame in 2.4) and extended headers. Frames are skipped by their size; pictures (APIC/PIC) are never read.
/// Compressed or encrypted frames are skipped (no zlib here).
enum ID3v2 {
    /// One tag's header.
    struct Header {
        /// Where the tag starts (its "ID3").
        let offset: Int64
        let major: UInt8
        let flags: UInt8
        /// The size field: the bytes after the 10-byte header (extended header, frames, padding), footer excluded.
        let size: Int64

        /// The first byte after the tag (footer included).
        var end: Int64 { offset + 10 + size + (major == 4 && flags & 0x10 != 0 ? 10 : 0) }
    }

    /// The result of walking the tags at the start of a file.
    enum Chain {
        /// The tags (each wholly present and parsed) and the first byte after the last one.
        case chain([Tags], end: Int64)
        /// A tag's header is present but not all of its bytes.
        case need(ByteRanges)
        /// "ID3" with a header that cannot be one, or a tag that runs past the end of the file.
        case hostile
    }

    /// The most tags read in a row (real files have one, rarely two).
    static let maximumTags = 16

    /// A tag header at `i` of `view`, or nil when the bytes are not one (bad version, size byte with its top bit).
    static func header(_ view: ByteView, _ i: Int, offset: Int64) -> Header? {
        guard view.matches(i, "ID3"), let major = view.u8(i + 3), let minor = view.u8(i + 4), let flags = view.u8(i + 5),
              major != 0xFF, minor != 0xFF, let size = view.syncsafe32(i + 6),
              offset >= 0, offset <= Int64.max - (1 << 29)  // so that `end` cannot overflow
        else { return nil }
        return Header(offset: offset, major: major, flags: flags, size: Int64(size))
    }

    /// The tags at `start`, one after another. Each must be wholly present before it is parsed; the need then
    /// covers the tag and the audio after it, so a big cover costs one extra round.
    static func leadingChain(_ analysis: inout Analysis, at start: Int64) -> Chain {
        var offset = start
        var tags: [Tags] = []
        for _ in 0..<maximumTags {
            guard offset <= analysis.size - 10 else { break }
            guard let view = analysis.window.view(at: offset, count: 10) else {
                return .need(analysis.lookahead(offset))
            }
            guard view.matches(0, "ID3") else { break }
            guard let header = header(view, 0, offset: offset) else { return tags.isEmpty ? .hostile : .chain(tags, end: offset) }
            guard header.end <= analysis.size else { return .hostile }
            guard analysis.window.has(offset..<header.end) else {
                var need = ByteRanges(offset..<header.end)
                need.formUnion(analysis.lookahead(header.end))
                return .need(need)
            }
            tags.append(parse(&analysis.window, header))
            offset = header.end
        }
        return .chain(tags, end: offset)
    }

    /// The text frames of a wholly present tag, as tag fields (the first value of each frame). A damaged frame
    /// ends the walk; what was read before it is kept.
    static func parse(_ window: inout ByteWindow, _ header: Header) -> Tags {
        guard (2...4).contains(header.major) else { return Tags() }
        var body = Body(start: header.offset + 10, length: header.size)
        if header.flags & 0x80 != 0 && header.major < 4 {
            // Whole-tag unsynchronisation (2.2, 2.3): frame sizes count the bytes after it is undone.
            guard let raw = window.bytes(at: body.start, count: body.length) else { return Tags() }
            body.memory = unsynchronised(raw[...])
        }
        var position: Int64 = 0
        if header.flags & 0x40 != 0 {
            switch header.major {
            case 2: return Tags()  // 2.2's bit 6 is "compression", which no reader ever defined
            case 3:
                guard let v = body.read(&window, at: 0, count: 4), let n = v.u32be(0) else { return Tags() }
                position = 4 + Int64(n)
            default:
                guard let v = body.read(&window, at: 0, count: 4), let n = v.syncsafe32(0), n >= 6 else { return Tags() }
                position = Int64(n)
            }
        }
        let headerLength: Int64 = header.major == 2 ? 6 : 10
        var frames = FrameTexts()
        for _ in 0..<4096 {
            guard position <= body.count - headerLength,
                  let v = body.read(&window, at: position, count: headerLength) else { break }
            let idLength = header.major == 2 ? 3 : 4
            guard let idBytes = v.slice(0, idLength), idBytes.allSatisfy({ isFrameIDByte($0) }) else { break }
            let id = String(decoding: idBytes, as: UTF8.self)
            let size: Int64
            switch header.major {
            case 2: size = Int64(v.u24be(3) ?? 0)
            case 3: size = Int64(v.u32be(4) ?? 0)
            default:
                guard let n = v.syncsafe32(4) else { return frames.tags }
                size = Int64(n)
            }
            position += headerLength
            guard size <= body.count - position else { break }
            defer { position += size }
            guard let field = FrameTexts.field(id), size > 1 else { continue }
            let formatFlags = header.major == 2 ? 0 : v.u8(9) ?? 0
            var skip: Int64 = 0
            var unsync = false
            if header.major == 3 {
                if formatFlags & 0xC0 != 0 { continue }  // compressed or encrypted
                if formatFlags & 0x20 != 0 { skip += 1 }  // group identifier
            } else if header.major == 4 {
                if formatFlags & 0x0C != 0 { continue }  // compressed or encrypted
                if formatFlags & 0x40 != 0 { skip += 1 }  // group identifier
                if formatFlags & 0x01 != 0 { skip += 4 }  // data length indicator
                unsync = formatFlags & 0x02 != 0 || header.flags & 0x80 != 0
            }
            guard skip < size else { continue }
            let length = min(size - skip, Int64(TrackInfo.maximumTextBytes) * 4 + 8)
            guard let data = body.read(&window, at: position + skip, count: length) else { break }
            let bytes = unsync ? unsynchronised(data.bytes[...]) : data.bytes
            if let value = text(bytes[...]) { frames.set(field, value) }
        }
        return frames.tags
    }

    /// The bytes with every `FF 00` turned back into `FF` (ID3v2 unsynchronisation undone).
    static func unsynchronised(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var previousFF = false
        for byte in bytes {
            if previousFF && byte == 0 {
                previousFF = false
                continue
            }
            out.append(byte)
            previousFF = byte == 0xFF
        }
        return out
    }

    /// The first value of a text frame (encoding byte, then text), or nil.
    static func text(_ data: ArraySlice<UInt8>) -> String? {
        guard let encoding = data.first else { return nil }
        let rest = data.dropFirst()
        switch encoding {
        case 0: return Text.latin1(Text.untilNUL(rest))
        case 3: return Text.utf8(Text.untilNUL(rest))
        case 1, 2:
            var units = rest
            var bigEndian = true
            if encoding == 1, units.count >= 2 {
                let a = units[units.startIndex], b = units[units.startIndex + 1]
                if a == 0xFF && b == 0xFE {
                    bigEndian = false
                    units = units.dropFirst(2)
                } else if a == 0xFE && b == 0xFF {
                    units = units.dropFirst(2)
                }
            }
            var end = units.startIndex
            while end + 1 < units.endIndex, !(units[end] == 0 && units[end + 1] == 0) { end += 2 }
            if end + 1 >= units.endIndex { end = units.endIndex }
            return Text.utf16(units[units.startIndex..<end], bigEndian: bigEndian)
        default: return nil
        }
    }

    static func isFrameIDByte(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
    }

    /// A tag's frames, read from the window or (after whole-tag unsynchronisation) from memory.
    struct Body {
        let start: Int64
        let length: Int64
        var memory: [UInt8]? = nil

        var count: Int64 { memory.map { Int64($0.count) } ?? length }

        func read(_ window: inout ByteWindow, at position: Int64, count: Int64) -> ByteView? {
            guard position >= 0, count >= 0, position <= self.count - count else { return nil }
            if let memory {
                return ByteView(Array(memory[Int(position)..<Int(position + count)]))
            }
            return window.view(at: start + position, count: count)
        }
    }
}

/// The frames of interest of one ID3v2 tag and how they become tag fields.
struct FrameTexts {
    enum Field { case title, artist, albumArtist, album, track, disc, recorded, year, dayMonth, genre }

    private var values: [Field: String] = [:]

    static func field(_ id: String) -> Field? {
        switch id {
        case "TIT2", "TT2": return .title
        case "TPE1", "TP1": return .artist
        case "TPE2", "TP2": return .albumArtist
        case "TALB", "TAL": return .album
        case "TRCK", "TRK": return .track
        case "TPOS", "TPA": return .disc
        case "TDRC": return .recorded
        case "TYER", "TYE": return .year
        case "TDAT", "TDA": return .dayMonth
        case "TCON", "TCO": return .genre
        default: return nil
        }
    }

    /// Keeps the first frame of each kind.
    mutating func set(_ field: Field, _ value: String) {
        if values[field] == nil { values[field] = value }
    }

    var tags: Tags {
        var tags = Tags()
        tags.title = values[.title]
        tags.artist = values[.artist]
        tags.albumArtist = values[.albumArtist]
        tags.album = values[.album]
        tags.setTrack(values[.track])
        tags.setDisc(values[.disc])
        if let recorded = values[.recorded] {
            tags.date = recorded
        } else if let year = values[.year] {
            // 2.3's TYER + TDAT ("DDMM") make one date, as 2.4's TDRC would hold it.
            if let dm = values[.dayMonth], dm.utf8.count == 4, dm.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
               year.utf8.count == 4 {
                let d = dm.prefix(2), m = dm.suffix(2)
                tags.date = "\(year)-\(m)-\(d)"
            } else {
                tags.date = year
            }
        }
        tags.genre = values[.genre].flatMap { Genres.resolveID3v2($0) }.flatMap { Text.clean($0) }
        return tags
    }
}
