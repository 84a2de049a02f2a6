import CloudSyncCore

/// Ogg (RFC 3533) carrying Vorbis, Opus or FLAC: the header pages (identification, comments however many
/// megabytes, Vorbis setup, FLAC metadata blocks) up to the first audio page, and the last page for the duration
/// (its granule position: samples, or for Opus 48 kHz samples including the pre-skip). Other logical streams in
/// the file (a Skeleton, a cover video) are stepped over; chained files are read as their first link plus the
/// last page, which is exact only when both belong to the same stream.
enum Ogg {
    /// The largest possible page (27 + 255 + 255 × 255 bytes): a reader looking for the last page reads this many
    /// bytes at the end, so the start set keeps them.
    static let maximumPageSize: Int64 = 65_307
    /// The most pages walked before the headers end.
    static let maximumHeaderPages = 4096

    enum Codec { case vorbis, opus, flac }

    struct Page {
        let offset: Int64
        let flags: UInt8
        let granule: Int64
        let serial: UInt32
        let lacing: ArraySlice<UInt8>
        let headerLength: Int
        let bodyLength: Int

        var end: Int64 { offset + Int64(headerLength + bodyLength) }
        var isFirst: Bool { flags & 0x02 != 0 }
    }

    enum PageRead {
        case page(Page, ByteView)
        case absent(Range<Int64>)
        case invalid
    }

    /// The page at `offset` with its bytes (header and body), or where the bytes still missing are.
    static func page(_ window: inout ByteWindow, at offset: Int64) -> PageRead {
        guard offset <= window.size - 27 else { return .invalid }
        guard let head = window.view(at: offset, count: 27) else {
            return .absent(offset..<min(window.size, offset + maximumPageSize))
        }
        guard head.matches(0, "OggS"), head.u8(4) == 0, let flags = head.u8(5), let granule = head.u64le(6),
              let serial = head.u32le(14), let segments = head.u8(26) else { return .invalid }
        let headerLength = 27 + Int(segments)
        guard offset <= window.size - Int64(headerLength) else { return .invalid }
        guard let header = window.view(at: offset, count: Int64(headerLength)) else {
            return .absent(offset..<min(window.size, offset + maximumPageSize))
        }
        let lacing = header.bytes[27..<headerLength]
        let bodyLength = lacing.reduce(0) { $0 + Int($1) }
        guard offset <= window.size - Int64(headerLength + bodyLength) else { return .invalid }
        guard let whole = window.view(at: offset, count: Int64(headerLength + bodyLength)) else {
            return .absent(offset..<(offset + Int64(headerLength + bodyLength)))
        }
        let page = Page(offset: offset, flags: flags, granule: Int64(bitPattern: granule), serial: serial,
                        lacing: lacing, headerLength: headerLength, bodyLength: bodyLength)
        return .page(page, whole)
    }

    /// The first packet of a stream names its codec.
    static func codec(_ v: ByteView, _ i: Int) -> Codec? {
        if v.u8(i) == 1 && v.matches(i + 1, "vorbis") { return .vorbis }
        if v.matches(i, "OpusHead") { return .opus }
        if v.u8(i) == 0x7F && v.matches(i + 1, "FLAC") { return .flac }
        return nil
    }

    /// The header packets of one stream, fed segment by segment as pages arrive.
    struct Headers {
        let codec: Codec
        let serial: UInt32
        /// Packets completed so far.
        var packets = 0
        /// The identification packet (bounded: it is small for every codec).
        var identification: [UInt8] = []
        /// The first bytes of the current packet, to tell a FLAC block's type.
        var prefix: [UInt8] = []
        var comments: VorbisCommentStream?
        var tags = Tags()
        /// Header packets in all (FLAC: 1 + the count in its first packet, or up to the block flagged last).
        var expected: Int?
        var sawLastFLACBlock = false

        init(codec: Codec, serial: UInt32) {
            self.codec = codec
            self.serial = serial
            switch codec {
            case .vorbis: expected = 3
            case .opus: expected = 2
            case .flac: expected = nil
            }
        }

        var done: Bool {
            if let expected { return packets >= expected }
            return sawLastFLACBlock
        }

        /// Bytes of the packet being read: which consumer gets them depends on the packet and its first bytes.
        mutating func feed(_ bytes: ArraySlice<UInt8>) {
            if packets == 0 {
                identification.append(contentsOf: bytes.prefix(max(0, 512 - identification.count)))
                return
            }
            var rest = bytes
            let prefixLength = codec == .vorbis ? 7 : codec == .opus ? 8 : 4
            if prefix.count < prefixLength {
                let take = rest.prefix(prefixLength - prefix.count)
                prefix.append(contentsOf: take)
                rest = rest.dropFirst(take.count)
                if prefix.count == prefixLength && isCommentPacket { comments = VorbisCommentStream() }
            }
            if comments != nil, !rest.isEmpty { comments?.feed(rest) }
        }

        var isCommentPacket: Bool {
            switch codec {
            case .vorbis: return prefix.first == 3 && prefix.dropFirst().elementsEqual("vorbis".utf8)
            case .opus: return prefix.elementsEqual("OpusTags".utf8)
            case .flac: return prefix.first.map { $0 & 0x7F == 4 } ?? false
            }
        }

        /// The packet ended.
        mutating func endPacket() {
            if packets == 0, codec == .flac {
                let v = ByteView(identification)
                if let count = v.u16be(7), count > 0 { expected = 1 + Int(count) }
            } else if codec == .flac, let first = prefix.first, first & 0x80 != 0 {
                sawLastFLACBlock = true
            }
            if let stream = comments, tags == Tags() { tags = stream.fields.tags }
            comments = nil
            prefix = []
            packets += 1
        }

        /// Payload bytes still expected before the headers end, as far as the comment lengths read tell (a
        /// guess for what no length tells yet).
        var remainingEstimate: Int64 {
            (comments?.remainingEstimate ?? 0) + (codec == .vorbis ? 16 << 10 : 8 << 10)
        }
    }

    static func walk(_ analysis: inout Analysis) -> Walk {
        let size = analysis.size
        var offset: Int64 = 0
        var headers: Headers?
        var audioStart: Int64?
        for _ in 0..<maximumHeaderPages {
            switch page(&analysis.window, at: offset) {
            case .invalid: return .notUnderstood(.ogg)
            case .absent(let missing):
                // Ask for the rest of the headers at once: what the comment lengths announce, in pages.
                let payload = headers?.remainingEstimate ?? (8 << 10)
                let pages = payload / (255 * 255) + 2
                let estimate = payload + pages * (27 + 255)
                var need = ByteRanges(missing)
                need.formUnion(analysis.span(offset, estimate))
                need.formUnion(analysis.lookahead(offset.adding(estimate) ?? size))
                // And where the last page will be looked for, which is needed anyway.
                need.formUnion(ByteRanges(checked: max(0, size - maximumPageSize), size))
                return .need(need)
            case .page(let page, let bytes):
                if headers == nil, page.isFirst, let codec = codec(bytes, page.headerLength) {
                    headers = Headers(codec: codec, serial: page.serial)
                }
                offset = page.end
                guard var current = headers else {
                    guard page.isFirst else { return .notUnderstood(.ogg) }  // no known codec among the first pages
                    continue
                }
                guard page.serial == current.serial else { continue }
                var cursor = page.headerLength
                for lace in page.lacing {
                    current.feed(bytes.bytes[cursor..<(cursor + Int(lace))])
                    cursor += Int(lace)
                    if lace < 255 {
                        current.endPacket()
                        if current.done { break }
                    }
                }
                headers = current
                if current.done { audioStart = page.end }
            }
            if audioStart != nil { break }
        }
        guard let headers, let audioStart else { return .notUnderstood(.ogg) }

        // The last page, as a reader finds it: syncing within the last maximumPageSize bytes.
        let tail = ByteRanges(checked: max(audioStart, size - maximumPageSize), size)
        var keep = tail
        guard tail.ranges.allSatisfy({ analysis.window.has($0) }) else { return .need(tail) }
        let id = ByteView(headers.identification)
        var duration: Double?
        var sampleRate: Int?
        var channels: Int?
        var preSkip: Int64 = 0
        switch headers.codec {
        case .vorbis:
            channels = id.u8(11).map(Int.init)
            sampleRate = id.u32le(12).map(Int.init)
        case .opus:
            channels = id.u8(9).map(Int.init)
            preSkip = Int64(id.u16le(10) ?? 0)
            sampleRate = 48000
        case .flac:
            if let info = FLAC.StreamInfo(id, 17) {
                sampleRate = info.sampleRate
                channels = info.channels
            }
        }
        if let last = lastGranule(&analysis.window, within: tail.ranges.first ?? size..<size, serial: headers.serial) {
            keep.formUnion(ByteRanges(last.range))
            if let rate = sampleRate, rate > 0 {
                let samples = last.granule - preSkip
                if samples > 0 { duration = Double(samples) / Double(headers.codec == .opus ? 48000 : rate) }
            }
        }
        let byteRate = duration.map { Double(size - audioStart) / $0 }
        let info = headers.tags.info(durationSeconds: duration, sampleRate: sampleRate, channels: channels,
                                     byteRate: byteRate)
        return .layout(Layout(format: .ogg, audioStart: audioStart, byteRate: byteRate, keep: keep, info: info))
    }

    /// The granule position of the last valid page (CRC checked) of stream `serial` that ends a packet, searched
    /// backwards from the end within `region`.
    static func lastGranule(_ window: inout ByteWindow, within region: Range<Int64>, serial: UInt32)
        -> (granule: Int64, range: Range<Int64>)? {
        guard !region.isEmpty, let bytes = window.bytes(region) else { return nil }
        let v = ByteView(bytes)
        var i = bytes.count - 27
        var candidates = 0
        while i >= 0 && candidates < 256 {
            defer { i -= 1 }
            guard bytes[i] == 0x4F, v.matches(i, "OggS") else { continue }
            candidates += 1
            guard v.u8(i + 4) == 0, let segments = v.u8(i + 26), v.contains(i, 27 + Int(segments)) else { continue }
            let bodyLength = bytes[(i + 27)..<(i + 27 + Int(segments))].reduce(0) { $0 + Int($1) }
            let length = 27 + Int(segments) + bodyLength
            guard v.contains(i, length), v.u32le(i + 14) == serial, let granule = v.u64le(i + 6),
                  Int64(bitPattern: granule) >= 0, v.u32le(i + 22) == crc(bytes[i..<(i + length)]) else { continue }
            let start = region.lowerBound + Int64(i)
            return (Int64(bitPattern: granule), start..<(start + Int64(length)))
        }
        return nil
    }

    /// Ogg's CRC-32 (polynomial 0x04C11DB7, no reflection, initial 0) of a page with its CRC field taken as 0.
    static func crc(_ page: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0
        for (k, byte) in page.enumerated() {
            let b = (22...25).contains(k) ? 0 : byte
            crc = (crc << 8) ^ crcTable[Int((crc >> 24) ^ UInt32(b))]
        }
        return crc
    }

    static let crcTable: [UInt32] = (0..<256).map { n in
        var r = UInt32(n) << 24
        for _ in 0..<8 { r = r & 0x8000_0000 != 0 ? (r << 1) ^ 0x04C1_1DB7 : r << 1 }
        return r
    }
}

/// A Vorbis comment block read incrementally (it may span megabytes of pages): lengths are read as they come,
/// field text is kept only for keys of interest and up to a bound, everything else is skipped by count.
struct VorbisCommentStream {
    private enum State { case vendorLength, vendor, count, fieldLength, field, done }
    private var state = State.vendorLength
    /// Bytes of the current length word.
    private var word: [UInt8] = []
    /// Bytes left in the current vendor string or field.
    private var remaining: Int64 = 0
    private var fieldsLeft: Int64 = 0
    /// The kept start of the current field.
    private var field: [UInt8] = []
    private(set) var fields = VorbisComment.Fields()

    /// The longest field start kept: the key, "=", and a bounded value.
    static let keptFieldBytes = 64 + 1 + TrackInfo.maximumTextBytes * 4

    mutating func feed(_ bytes: ArraySlice<UInt8>) {
        var rest = bytes
        var steps = 0
        while !rest.isEmpty && state != .done && steps < 1_000_000 {
            steps += 1
            switch state {
            case .vendorLength, .count, .fieldLength:
                let take = rest.prefix(4 - word.count)
                word.append(contentsOf: take)
                rest = rest.dropFirst(take.count)
                guard word.count == 4, let value = ByteView(word).u32le(0) else { continue }
                word = []
                switch state {
                case .vendorLength:
                    remaining = Int64(value)
                    state = .vendor
                case .count:
                    fieldsLeft = min(Int64(value), Int64(VorbisComment.maximumFields))
                    state = fieldsLeft > 0 ? .fieldLength : .done
                default:
                    remaining = Int64(value)
                    field = []
                    state = .field
                    if remaining == 0 { endField() }
                }
            case .vendor:
                let take = Int(min(Int64(rest.count), remaining))
                rest = rest.dropFirst(take)
                remaining -= Int64(take)
                if remaining == 0 { state = .count }
            case .field:
                let take = Int(min(Int64(rest.count), remaining))
                let keep = max(0, min(take, VorbisCommentStream.keptFieldBytes - field.count))
                field.append(contentsOf: rest.prefix(keep))
                rest = rest.dropFirst(take)
                remaining -= Int64(take)
                if remaining == 0 { endField() }
            case .done:
                break
            }
        }
    }

    private mutating func endField() {
        fields.add(field[...])
        field = []
        fieldsLeft -= 1
        state = fieldsLeft > 0 ? .fieldLength : .done
    }

    /// Bytes of the block still to come, as far as the lengths read so far tell (each unread field counted small).
    var remainingEstimate: Int64 {
        switch state {
        case .done: return 0
        case .vendor, .field: return remaining + fieldsLeft * 64
        default: return fieldsLeft * 64 + 4
        }
    }
}
