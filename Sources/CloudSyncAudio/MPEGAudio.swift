import CloudSyncCore

/// One MPEG-1/2/2.5 Layer III frame header.
struct MPEGFrame: Equatable {
    /// 1 for MPEG-1, 2 for MPEG-2, 25 for MPEG-2.5.
    let version: Int
    let sampleRate: Int
    /// Bits per second of this frame.
    let bitrate: Int
    let length: Int
    let samplesPerFrame: Int
    let channels: Int

    /// Whether `other` can follow this frame in one stream (same version, layer and sample rate).
    func continues(_ other: MPEGFrame) -> Bool { version == other.version && sampleRate == other.sampleRate }

    /// Where the Xing/Info tag would start, from the frame's first byte (after the header and side information).
    var xingOffset: Int { 4 + (version == 1 ? (channels == 1 ? 17 : 32) : (channels == 1 ? 9 : 17)) }
}

/// One AAC ADTS frame header (ISO/IEC 13818-7 / 14496-3).
struct ADTSFrame: Equatable {
    let sampleRate: Int
    let channels: Int
    let length: Int
    let samplesPerFrame: Int

    func continues(_ other: ADTSFrame) -> Bool { sampleRate == other.sampleRate && channels == other.channels }
}

enum ADTS {
    static let sampleRates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

    /// The ADTS header at `i`, or nil (sync, layer 0, a listed sample rate, a length that holds its header).
    static func header(_ v: ByteView, _ i: Int) -> ADTSFrame? {
        guard v.contains(i, 7), v.bytes[i] == 0xFF, v.bytes[i + 1] & 0xF6 == 0xF0 else { return nil }
        let protectionAbsent = v.bytes[i + 1] & 1 == 1
        let rateIndex = Int(v.bytes[i + 2] >> 2) & 0x0F
        guard rateIndex < sampleRates.count else { return nil }
        let channels = Int(v.bytes[i + 2] & 1) << 2 | Int(v.bytes[i + 3] >> 6)
        let length = Int(v.bytes[i + 3] & 0x03) << 11 | Int(v.bytes[i + 4]) << 3 | Int(v.bytes[i + 5] >> 5)
        let blocks = Int(v.bytes[i + 6] & 0x03) + 1
        guard length >= (protectionAbsent ? 7 : 9) + 1 else { return nil }
        return ADTSFrame(sampleRate: sampleRates[rateIndex], channels: channels, length: length,
                         samplesPerFrame: 1024 * blocks)
    }
}

/// MP3 (MPEG-1/2/2.5 Layer III) and AAC in ADTS, walked alike: ID3v2 tags first (done by the analyzer), the
/// first frame found by sync and confirmed by the frames after it, Xing/Info/VBRI for MP3's totals, trailing
/// tags at the end. ADTS has no totals: its byte rate is the average of the frames in the first bytes.
enum MPEGAudio {
    enum Kind { case mp3, aac }

    /// How far past the tags (or the start) the first frame is searched for.
    static let searchSpan: Int64 = 64 << 10
    /// An MP3's first frame is searched for in its first `quickSpan` bytes past the tags before the whole span is
    /// read: nearly every file has it there, and each byte read is kept in the start set and read back from the
    /// partial file (88 KiB per track was a third of a small track's analysis).
    static let quickSpan: Int64 = 16 << 10
    /// Room after `quickSpan` for the confirming frames (an MP3 frame is at most 1,441 bytes).
    static let quickConfirmRoom: Int64 = 8 << 10
    /// Consecutive frames that confirm a sync (fewer when the file ends first).
    static let confirmingFrames = 3

    static let bitratesV1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
    static let bitratesV2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]

    /// The Layer III frame header at `i`, or nil (free-format and reserved values are rejected).
    static func header(_ v: ByteView, _ i: Int) -> MPEGFrame? {
        guard v.contains(i, 4), v.bytes[i] == 0xFF, v.bytes[i + 1] & 0xE0 == 0xE0 else { return nil }
        let versionBits = (v.bytes[i + 1] >> 3) & 3
        guard versionBits != 1, (v.bytes[i + 1] >> 1) & 3 == 1 else { return nil }  // reserved; Layer III only
        let bitrateIndex = Int(v.bytes[i + 2] >> 4)
        let rateIndex = Int(v.bytes[i + 2] >> 2) & 3
        guard bitrateIndex != 0, bitrateIndex != 15, rateIndex != 3, v.bytes[i + 3] & 3 != 2 else { return nil }
        let padding = Int(v.bytes[i + 2] >> 1) & 1
        let version = versionBits == 3 ? 1 : versionBits == 2 ? 2 : 25
        let rates = version == 1 ? [44100, 48000, 32000] : version == 2 ? [22050, 24000, 16000] : [11025, 12000, 8000]
        let kbps = (version == 1 ? bitratesV1 : bitratesV2)[bitrateIndex]
        let sampleRate = rates[rateIndex]
        let length = (version == 1 ? 144_000 : 72_000) * kbps / sampleRate + padding
        return MPEGFrame(version: version, sampleRate: sampleRate, bitrate: kbps * 1000, length: length,
                         samplesPerFrame: version == 1 ? 1152 : 576, channels: v.bytes[i + 3] >> 6 == 3 ? 1 : 2)
    }

    /// A frame of either kind, reduced to what the walk needs.
    struct Frame {
        let length: Int
        let sampleRate: Int
        let channels: Int
        let samplesPerFrame: Int
        let bitrate: Int?
        let mpeg: MPEGFrame?
    }

    static func frame(_ kind: Kind, _ v: ByteView, _ i: Int) -> Frame? {
        switch kind {
        case .mp3:
            return header(v, i).map { Frame(length: $0.length, sampleRate: $0.sampleRate, channels: $0.channels,
                                            samplesPerFrame: $0.samplesPerFrame, bitrate: $0.bitrate, mpeg: $0) }
        case .aac:
            return ADTS.header(v, i).map { Frame(length: $0.length, sampleRate: $0.sampleRate, channels: $0.channels,
                                                 samplesPerFrame: $0.samplesPerFrame, bitrate: nil, mpeg: nil) }
        }
    }

    /// Walks an MP3 or ADTS stream whose first frame is at or after `from` (the end of the leading ID3v2 tags,
    /// whose fields are `id3`).
    static func walk(_ analysis: inout Analysis, from start: Int64, kind: Kind, id3: [Tags]) -> Walk {
        let format: AudioFormat = kind == .mp3 ? .mp3 : .aac
        let size = analysis.size
        let buffer: ByteView
        let offset: Int
        let first: Frame
        if kind == .mp3, let quick = quickSearch(&analysis, from: start) {
            (buffer, offset, first) = quick
        } else {
            // The search window with room to confirm the frames after a sync found at its end; only its present
            // prefix is read, and a sync that cannot be confirmed within that prefix asks for the rest.
            let span = analysis.window.clamped(at: start, count: searchSpan + 3 * 8192)
            let prefix = analysis.window.presentPrefix(of: span)
            guard !prefix.isEmpty, let read = analysis.window.bytes(prefix).map(ByteView.init) else {
                return .need(analysis.lookahead(start))
            }
            switch firstFrame(kind, read, limit: min(read.count, Int(searchSpan)), complete: prefix == span,
                              reachesEnd: prefix.upperBound == size) {
            case .need: return .need(analysis.lookahead(start))
            case .none: return .notUnderstood(format)
            case .found(let at, let frame): (buffer, offset, first) = (read, at, frame)
            }
        }
        let audioStart = start + Int64(offset)

        let trailing: TrailingTags.Found
        switch TrailingTags.read(&analysis, floor: audioStart + Int64(first.length)) {
        case .need(let ranges): return .need(ranges)
        case .tags(let found): trailing = found
        }
        let audioBytes = trailing.region.lowerBound - audioStart
        guard audioBytes > 0, first.sampleRate > 0 else { return .notUnderstood(format) }

        var byteRate: Double?
        var duration: Double?
        if kind == .mp3, let mpeg = first.mpeg, let totals = vbrTotals(buffer, offset, mpeg) {
            let seconds = Double(totals.frames) * Double(mpeg.samplesPerFrame) / Double(mpeg.sampleRate)
            if seconds > 0 {
                duration = seconds
                byteRate = Double(totals.bytes > 0 ? Int64(totals.bytes) : audioBytes) / seconds
            }
        }
        if byteRate == nil {
            if let bitrate = first.bitrate {
                byteRate = Double(bitrate) / 8
            } else {
                byteRate = averageByteRate(kind, buffer, from: offset)
            }
            if let rate = byteRate, rate > 0 { duration = Double(audioBytes) / rate }
        }
        var tags = Tags()
        for tag in id3 { tags.fill(from: tag) }
        tags.fill(from: trailing.ape ?? Tags())
        tags.fill(from: trailing.id3v1 ?? Tags())
        let info = tags.info(durationSeconds: duration, sampleRate: first.sampleRate, channels: first.channels,
                             byteRate: byteRate)
        var keep = ByteRanges()
        if !trailing.region.isEmpty { keep.insert(contentsOf: trailing.region) }
        return .layout(Layout(format: format, audioStart: audioStart, byteRate: byteRate, keep: keep, info: info))
    }

    /// The outcome of a search for the first frame.
    enum Search {
        case found(offset: Int, frame: Frame)
        /// Bytes past the buffer are needed to decide.
        case need
        /// No confirmed frame within the limit.
        case none
    }

    /// The first sync in `buffer[0 ..< limit]` confirmed by the frames after it (fewer at the file's end, which
    /// `reachesEnd` says the buffer holds). `complete` says the buffer is all the window there is to read.
    static func firstFrame(_ kind: Kind, _ buffer: ByteView, limit: Int, complete: Bool, reachesEnd: Bool) -> Search {
        var candidate = 0
        search: while candidate < limit {
            // Skip to the next 0xFF: sync bytes are rare in padding and junk.
            guard let ff = buffer.firstIndex(of: 0xFF, from: candidate, to: limit) else { break }
            candidate = ff
            guard let first = frame(kind, buffer, candidate) else {
                if candidate + 8 > buffer.count && !complete { return .need }
                candidate += 1
                continue
            }
            var position = candidate + first.length
            var confirmed = 1
            while confirmed < confirmingFrames {
                if position == buffer.count && reachesEnd { break }  // the file ends: fewer frames are enough
                if position + 8 > buffer.count && !complete { return .need }
                guard let next = frame(kind, buffer, position), next.sampleRate == first.sampleRate,
                      next.channels == first.channels || kind == .mp3 else {
                    candidate += 1
                    continue search
                }
                position += next.length
                confirmed += 1
            }
            return .found(offset: candidate, frame: first)
        }
        return complete ? .none : .need
    }

    /// The first MP3 frame within `quickSpan` of `start`, when those bytes and the room to confirm it are present
    /// and hold one; nil sends the walk to the whole span. It finds the frame the whole span's search would: that
    /// search takes the first confirmed sync too, and a frame starting within `quickSpan` is confirmed within
    /// `quickConfirmRoom` (or at the file's end, which both windows then reach).
    static func quickSearch(_ analysis: inout Analysis, from start: Int64) -> (ByteView, Int, Frame)? {
        let span = analysis.window.clamped(at: start, count: quickSpan + quickConfirmRoom)
        guard !span.isEmpty, analysis.window.has(span), let buffer = analysis.window.bytes(span).map(ByteView.init),
              case .found(let offset, let frame) = firstFrame(.mp3, buffer, limit: min(buffer.count, Int(quickSpan)),
                                                              complete: true, reachesEnd: span.upperBound == analysis.size)
        else { return nil }
        return (buffer, offset, frame)
    }

    /// Frame and byte totals of a Xing/Info or VBRI tag in the frame at `offset`, or nil when it has none.
    static func vbrTotals(_ v: ByteView, _ offset: Int, _ frame: MPEGFrame) -> (frames: UInt32, bytes: UInt32)? {
        let xing = offset + frame.xingOffset
        if v.matches(xing, "Xing") || v.matches(xing, "Info"), let flags = v.u32be(xing + 4) {
            var cursor = xing + 8
            var frames: UInt32 = 0, bytes: UInt32 = 0
            if flags & 1 != 0 {
                frames = v.u32be(cursor) ?? 0
                cursor += 4
            }
            if flags & 2 != 0 { bytes = v.u32be(cursor) ?? 0 }
            if frames > 0 { return (frames, bytes) }
        }
        let vbri = offset + 36
        if v.matches(vbri, "VBRI"), let bytes = v.u32be(vbri + 10), let frames = v.u32be(vbri + 14), frames > 0 {
            return (frames, bytes)
        }
        return nil
    }

    /// The mean byte rate of the consecutive frames from `offset` within the buffer (at most 512 frames).
    static func averageByteRate(_ kind: Kind, _ v: ByteView, from offset: Int) -> Double? {
        var position = offset
        var bytes = 0, samples = 0, rate = 0
        for _ in 0..<512 {
            guard let f = frame(kind, v, position), position + f.length <= v.count else { break }
            if rate == 0 { rate = f.sampleRate }
            guard f.sampleRate == rate else { break }
            bytes += f.length
            samples += f.samplesPerFrame
            position += f.length
        }
        guard samples > 0, rate > 0 else { return nil }
        return Double(bytes) * Double(rate) / Double(samples)
    }
}
