import CloudSyncCore

/// A ``StartSetPolicy`` with every value made sensible (see the policy's doc comment).
struct Limits {
    let headSeconds: Double
    let minimumAudioBytes: Int64
    let tailBytes: Int64
    let probeBytes: Int64
    let maxRounds: Int
    let maxStartSetBytes: Int64
    let mergeGapBytes: Int64

    init(_ policy: StartSetPolicy) {
        headSeconds = policy.headSeconds.isFinite ? min(max(0, policy.headSeconds), 86_400) : 0
        minimumAudioBytes = max(0, policy.minimumAudioBytes)
        tailBytes = max(0, policy.tailBytes)
        probeBytes = max(0, policy.probeBytes)
        maxRounds = max(0, policy.maxRounds)
        maxStartSetBytes = max(0, policy.maxStartSetBytes)
        mergeGapBytes = max(0, policy.mergeGapBytes)
    }
}

/// The structure a format's walk found.
struct Layout {
    var format: AudioFormat
    /// The first audio byte.
    var audioStart: Int64
    /// Bytes per second of the stream, when the format tells.
    var byteRate: Double?
    /// Ranges players read besides `[0, audioStart)`, the head of the audio and the tail: trailing tags, a `moov`
    /// after `mdat`, chunk headers after the audio, the last Ogg page.
    var keep = ByteRanges()
    var info: TrackInfo
}

/// What a format's walk concluded from the present bytes.
enum Walk {
    /// The structure is understood.
    case layout(Layout)
    /// Going on needs these bytes (at least one of them not present).
    case need(ByteRanges)
    /// Not this format, or a structure that contradicts itself or the file: the fallback, labelled `format`.
    case notUnderstood(AudioFormat)
}

/// The state of one `analyze` call: the window over the file, the limits and the name's hint.
struct Analysis {
    var window: ByteWindow
    let limits: Limits
    /// What the name's extension or the MIME type suggest (magic bytes win over it).
    let hint: AudioFormat?

    var size: Int64 { window.size }

    /// The bytes from `offset` that belong to the start set anyway when `offset` is still before the first audio
    /// byte (the audio part, with room to find the first frame): asking for them together with metadata that ends
    /// at `offset` saves a round and costs nothing extra.
    func lookahead(_ offset: Int64) -> ByteRanges {
        let span = max(limits.minimumAudioBytes, 64 << 10).adding(64 << 10) ?? Int64.max
        let range = window.clamped(at: offset, count: span)
        return ByteRanges(checked: range.lowerBound, range.upperBound)
    }

    /// `[offset, offset + count)` clamped to the file, as a set.
    func span(_ offset: Int64, _ count: Int64) -> ByteRanges {
        let range = window.clamped(at: offset, count: count)
        return ByteRanges(checked: range.lowerBound, range.upperBound)
    }

    /// The tail every start set keeps: `[size - tailBytes, size)`.
    var tail: ByteRanges {
        ByteRanges(checked: max(0, size - limits.tailBytes), size)
    }
}

extension StartSetAnalyzer {
    /// The start set of an understood layout, or nil when it would exceed `maxStartSetBytes`.
    static func compose(_ layout: Layout, _ analysis: Analysis) -> StartSet? {
        let size = analysis.size
        let limits = analysis.limits
        guard layout.audioStart >= 0, layout.audioStart <= size else { return nil }
        var audioPart = limits.minimumAudioBytes
        if let rate = layout.byteRate, rate.isFinite, rate > 0 {
            let seconds = (rate * limits.headSeconds).rounded(.up)
            audioPart = seconds < Double(size) ? max(audioPart, Int64(seconds)) : size
        }
        let headEnd = min(size, layout.audioStart.adding(audioPart) ?? size)
        var ranges = ByteRanges(checked: 0, headEnd)
        ranges.formUnion(analysis.tail)
        ranges.formUnion(layout.keep.clamped(to: size))
        ranges.formUnion(analysis.window.touched)
        ranges.fillGaps(shorterThan: limits.mergeGapBytes)
        guard ranges.byteCount <= limits.maxStartSetBytes else { return nil }
        return StartSet(format: layout.format, ranges: ranges, audioStart: layout.audioStart, isFallback: false,
                        info: layout.info)
    }

    /// The fallback: `[0, probeBytes) ∪ the tail`, cut so that it fits `maxStartSetBytes` (the tail first, then
    /// the head), with the tags of an APEv2 or ID3v1 tag at the end when they lie inside it.
    static func fallback(_ format: AudioFormat, _ analysis: Analysis) -> StartSet {
        let size = analysis.size
        let limits = analysis.limits
        let tailLength = min(size, limits.tailBytes, limits.maxStartSetBytes)
        var ranges = ByteRanges(checked: size - tailLength, size)
        let headLength = min(size, limits.probeBytes, max(0, limits.maxStartSetBytes - tailLength))
        ranges.insert(contentsOf: 0..<headLength)
        var info = TrackInfo()
        var probe = analysis
        probe.window = ByteWindow(Restricted(analysis.window, to: ranges))
        if case .tags(let trailing) = TrailingTags.read(&probe, floor: 0), ranges.containsAll(trailing.region) {
            var tags = trailing.ape ?? Tags()
            tags.fill(from: trailing.id3v1 ?? Tags())
            info = tags.info(durationSeconds: nil, sampleRate: nil, channels: nil, byteRate: nil)
        }
        return StartSet(format: format, ranges: ranges, audioStart: nil, isFallback: true, info: info)
    }
}

/// A window's bytes seen only where they are inside `allowed`: the fallback reads its tags through it.
private struct Restricted: AudioBytes {
    let base: ByteWindow
    let present: ByteRanges
    var size: Int64 { base.size }

    init(_ base: ByteWindow, to allowed: ByteRanges) {
        self.base = base
        present = base.present.intersection(allowed)
    }

    func bytes(in range: Range<Int64>) -> [UInt8]? {
        guard present.containsAll(range) else { return nil }
        var window = base
        return window.bytes(range)
    }
}
