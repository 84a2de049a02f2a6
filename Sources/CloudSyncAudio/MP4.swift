import CloudSyncCore

/// ISO base media / QuickTime files (M4A, M4B, MP4, ALAC): the top-level atoms are walked header by header
/// (`free`/`wide`/`skip`, 64-bit `largesize`, size 0 = to the end of the file), the whole `moov` is read wherever
/// it is (before or after `mdat`), and from it the audio track's duration (`mdhd`, else `mvhd`), sample entry,
/// first chunk offset and the iTunes tags (`udta/meta/ilst`; `covr` skipped by size).
enum MP4 {
    /// The most top-level atoms walked, the most atoms visited inside `moov`, the deepest nesting followed.
    static let maximumTopLevelAtoms = 1024
    static let maximumInnerAtoms = 16_384
    static let maximumDepth = 10

    struct Atom {
        let type: String
        let offset: Int64
        let headerLength: Int64
        let end: Int64

        var body: Range<Int64> { (offset + headerLength)..<end }
    }

    enum AtomRead {
        case atom(Atom)
        case absent(ByteRanges)
        case invalid
    }

    /// The atom header at `offset` within `0..<limit` (size 0 = up to `limit`).
    static func atom(_ window: inout ByteWindow, at offset: Int64, limit: Int64) -> AtomRead {
        guard offset <= limit - 8 else { return .invalid }
        guard let head = window.view(at: offset, count: 8) else {
            return .absent(ByteRanges(checked: offset, min(limit, offset + 16)))
        }
        guard let size32 = head.u32be(0), let type = head.fourCC(4) else { return .invalid }
        var headerLength: Int64 = 8
        let size: Int64
        switch size32 {
        case 0: size = limit - offset
        case 1:
            guard offset <= limit - 16 else { return .invalid }
            guard let large = window.view(at: offset + 8, count: 8) else {
                return .absent(ByteRanges(checked: offset, offset + 16))
            }
            guard let value = large.u64be(0), let exact = Int64(exactly: value) else { return .invalid }
            headerLength = 16
            size = exact
        default: size = Int64(size32)
        }
        guard size >= headerLength, let end = offset.adding(size), end <= limit else { return .invalid }
        return .atom(Atom(type: type, offset: offset, headerLength: headerLength, end: end))
    }

    static func walk(_ analysis: inout Analysis) -> Walk {
        let size = analysis.size
        var offset: Int64 = 0
        var keep = ByteRanges()
        var moov: Atom?
        var mdat: Atom?
        var need = ByteRanges()
        for _ in 0..<maximumTopLevelAtoms {
            guard offset < size else { break }
            switch atom(&analysis.window, at: offset, limit: size) {
            case .invalid:
                // A last atom cut short (a truncated download of a file whose moov came first) still plays.
                if moov != nil && mdat != nil { break }
                return .notUnderstood(.mp4)
            case .absent(let ranges):
                need.formUnion(ranges)
            case .atom(let atom):
                keep.insert(contentsOf: atom.offset..<(atom.offset + atom.headerLength))
                if atom.type == "moov" && moov == nil {
                    moov = atom
                    if !analysis.window.has(atom.offset..<atom.end) {
                        // The whole moov, the next header and (when the audio follows) the head of the audio.
                        need.insert(contentsOf: atom.offset..<atom.end)
                        need.formUnion(analysis.span(atom.end, 16))
                        if mdat == nil { need.formUnion(analysis.lookahead(atom.end)) }
                    }
                } else if atom.type == "mdat" && mdat == nil {
                    mdat = atom
                }
                offset = atom.end
                if !need.isEmpty && !analysis.window.has(offset..<min(size, offset + 8)) {
                    need.formUnion(analysis.span(offset, 16))
                    return .need(need)
                }
                continue
            }
            break
        }
        if !need.isEmpty { return .need(need) }
        guard let moov, let mdat else { return .notUnderstood(.mp4) }
        keep.insert(contentsOf: moov.offset..<moov.end)
        guard let bytes = analysis.window.bytes(moov.body) else { return .need(ByteRanges(moov.offset..<moov.end)) }
        var movie = Movie()
        var visits = 0
        movie.read(ByteView(bytes), 0..<bytes.count, path: ["moov"], depth: 1, visits: &visits)
        guard let track = movie.audioTrack ?? movie.tracks.first else { return .notUnderstood(.mp4) }

        let mdatPayload = mdat.body
        var audioStart = mdatPayload.lowerBound
        if let chunk = track.firstChunkOffset, chunk >= mdatPayload.lowerBound, chunk < mdatPayload.upperBound {
            audioStart = chunk
        }
        let duration = track.duration ?? movie.duration
        let byteRate = duration.flatMap { $0 > 0 ? Double(mdatPayload.upperBound - mdatPayload.lowerBound) / $0 : nil }
        let info = movie.tags.info(durationSeconds: duration, sampleRate: track.sampleRate, channels: track.channels,
                                   byteRate: byteRate)
        return .layout(Layout(format: .mp4, audioStart: audioStart, byteRate: byteRate, keep: keep, info: info))
    }

    /// What a `moov` says.
    struct Track {
        var handler: String?
        var timescale: UInt32 = 0
        var durationUnits: UInt64 = 0
        var sampleRate: Int?
        var channels: Int?
        var firstChunkOffset: Int64?

        var duration: Double? {
            timescale > 0 && durationUnits > 0 ? Double(durationUnits) / Double(timescale) : nil
        }
    }

    struct Movie {
        var timescale: UInt32 = 0
        var durationUnits: UInt64 = 0
        var tracks: [Track] = []
        var tags = Tags()

        var duration: Double? {
            timescale > 0 && durationUnits > 0 ? Double(durationUnits) / Double(timescale) : nil
        }

        var audioTrack: Track? { tracks.first { $0.handler == "soun" } }

        static let containers: Set<String> = ["moov", "trak", "mdia", "minf", "stbl", "udta", "meta", "ilst"]

        /// Reads the atoms within `range` of `v` (the body of the atom at the end of `path`).
        mutating func read(_ v: ByteView, _ range: Range<Int>, path: [String], depth: Int, visits: inout Int) {
            guard depth <= MP4.maximumDepth else { return }
            var i = range.lowerBound
            if path.last == "meta" {
                // ISO `meta` is a full atom (version and flags first); QuickTime's is not: its first child follows.
                if !v.matches(i + 4, "hdlr") { i += 4 }
            }
            while i <= range.upperBound - 8, visits < MP4.maximumInnerAtoms {
                visits += 1
                guard let size32 = v.u32be(i), let type = v.fourCC(i + 4) else { return }
                var header = 8
                var size = Int(size32)
                if size32 == 1 {
                    guard let large = v.u64be(i + 8), large <= UInt64(range.upperBound - i) else { return }
                    header = 16
                    size = Int(large)
                } else if size32 == 0 {
                    size = range.upperBound - i
                }
                guard size >= header, size <= range.upperBound - i else { return }
                let body = (i + header)..<(i + size)
                if path.last == "ilst" {
                    readItem(v, type: type, body)
                } else if Movie.containers.contains(type) {
                    if type == "trak" { tracks.append(Track()) }
                    read(v, body, path: path + [type], depth: depth + 1, visits: &visits)
                } else {
                    readLeaf(v, type: type, body, path: path)
                }
                i += size
            }
        }

        mutating func readLeaf(_ v: ByteView, type: String, _ body: Range<Int>, path: [String]) {
            let b = body.lowerBound
            switch type {
            case "mvhd":
                if let (scale, units) = Movie.timing(v, b) { (timescale, durationUnits) = (scale, units) }
            case "mdhd" where path.last == "mdia" && !tracks.isEmpty:
                if let (scale, units) = Movie.timing(v, b) {
                    tracks[tracks.count - 1].timescale = scale
                    tracks[tracks.count - 1].durationUnits = units
                    if tracks[tracks.count - 1].sampleRate == nil, scale >= 8000 {
                        tracks[tracks.count - 1].sampleRate = Int(scale)
                    }
                }
            case "hdlr" where path.last == "mdia" && !tracks.isEmpty:
                tracks[tracks.count - 1].handler = v.fourCC(b + 8)
            case "stsd" where !tracks.isEmpty:
                // Full atom, entry count, then the first sample entry: size, format, 6 reserved, data reference
                // index, then (sound) version, revision, vendor, channels, sample size, compression, packet
                // size, sample rate 16.16.
                let entry = b + 8
                guard body.contains(entry), let channels = v.u16be(entry + 24), let rate = v.u32be(entry + 32)
                else { return }
                if channels > 0 { tracks[tracks.count - 1].channels = Int(channels) }
                let hz = Int(rate >> 16)
                let timescale = tracks[tracks.count - 1].timescale
                if hz > 0 && !(timescale > 65535) { tracks[tracks.count - 1].sampleRate = hz }
            case "stco" where !tracks.isEmpty:
                if let count = v.u32be(b + 4), count > 0, let first = v.u32be(b + 8) {
                    tracks[tracks.count - 1].firstChunkOffset = Int64(first)
                }
            case "co64" where !tracks.isEmpty:
                if let count = v.u32be(b + 4), count > 0, let first = v.u64be(b + 8), let exact = Int64(exactly: first) {
                    tracks[tracks.count - 1].firstChunkOffset = exact
                }
            default: break
            }
        }

        /// (timescale, duration) of an `mvhd` or `mdhd` body, version 0 (32-bit) or 1 (64-bit).
        static func timing(_ v: ByteView, _ b: Int) -> (UInt32, UInt64)? {
            switch v.u8(b) {
            case 0:
                guard let scale = v.u32be(b + 12), let units = v.u32be(b + 16) else { return nil }
                return (scale, units == UInt32.max ? 0 : UInt64(units))
            case 1:
                guard let scale = v.u32be(b + 20), let units = v.u64be(b + 24) else { return nil }
                return (scale, units == UInt64.max ? 0 : units)
            default: return nil
            }
        }

        /// One `ilst` item: its `data` atom (type, locale, value) by the item's four-character code.
        mutating func readItem(_ v: ByteView, type: String, _ body: Range<Int>) {
            var i = body.lowerBound
            while i <= body.upperBound - 16 {
                guard let size32 = v.u32be(i), size32 >= 16, Int(size32) <= body.upperBound - i else { return }
                let size = Int(size32)
                if v.matches(i + 4, "data"), let kind = v.u32be(i + 8) {
                    let value = (i + 16)..<(i + size)
                    item(v, type: type, kind: kind & 0x00FF_FFFF, value)
                    return
                }
                i += size
            }
        }

        mutating func item(_ v: ByteView, type: String, kind: UInt32, _ value: Range<Int>) {
            guard let bytes = v.slice(value.lowerBound, min(value.count, TrackInfo.maximumTextBytes * 4)) else { return }
            let text: String? = switch kind {
            case 1: Text.utf8(bytes)
            case 2: Text.utf16(bytes, bigEndian: true)
            default: nil
            }
            switch type {
            case "\u{A9}nam": tags.title = tags.title ?? text
            case "\u{A9}ART": tags.artist = tags.artist ?? text
            case "aART": tags.albumArtist = tags.albumArtist ?? text
            case "\u{A9}alb": tags.album = tags.album ?? text
            case "\u{A9}day": tags.date = tags.date ?? text
            case "\u{A9}gen": tags.genre = tags.genre ?? text
            case "gnre":
                if tags.genre == nil, let n = v.u16be(value.lowerBound), n > 0 { tags.genre = Genres.name(Int(n) - 1) }
            case "trkn":
                if let n = v.u16be(value.lowerBound + 2), n > 0 { tags.trackNumber = tags.trackNumber ?? Int(n) }
                if let t = v.u16be(value.lowerBound + 4), t > 0 { tags.trackTotal = tags.trackTotal ?? Int(t) }
            case "disk":
                if let n = v.u16be(value.lowerBound + 2), n > 0 { tags.discNumber = tags.discNumber ?? Int(n) }
                if let t = v.u16be(value.lowerBound + 4), t > 0 { tags.discTotal = tags.discTotal ?? Int(t) }
            default: break
            }
        }
    }
}
