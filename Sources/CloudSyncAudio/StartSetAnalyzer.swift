import CloudSyncCore

/// Computes the start set of a track (the bytes a player needs to start it and to know it) from the bytes present,
/// in a few rounds of "fetch these ranges, then look again". Pure: no I/O, no state between calls.
///
/// The engine's loop is:
/// 1. fetch ``initialRanges(size:policy:)``;
/// 2. call ``analyze(_:name:mimeType:policy:round:)`` with `round` 0, 1, …; on `.need`, fetch those ranges and
///    call again with the next round; on `.done`, the start set is known (its `ranges` may still need fetching:
///    only the bytes the analysis read are guaranteed present).
///
/// Guarantees, whatever the bytes (hostile, truncated, random): no trap, bounded work per call, `.need` always
/// names at least one byte not present, a call with `round >= policy.maxRounds` returns `.done`, `ranges` lie
/// within `0..<size` and hold at most `policy.maxStartSetBytes` bytes, and `info` is parsed only from bytes inside
/// `ranges` (every byte an analysis reads becomes part of the start set).
public enum StartSetAnalyzer {
    /// The first request(s) of a track: `[0, min(size, probeBytes)) ∪ [max(0, size - tailBytes), size)`.
    public static func initialRanges(size: Int64, policy: StartSetPolicy) -> ByteRanges {
        let limits = Limits(policy)
        let size = max(0, size)
        var ranges = ByteRanges(checked: 0, min(size, limits.probeBytes))
        ranges.formUnion(ByteRanges(checked: max(0, size - limits.tailBytes), size))
        return ranges
    }

    /// Walks the file's structure over the present bytes (stateless: re-parses from what is present each call).
    /// Format by magic bytes first; the file name's extension and the MIME type are hints (they decide only where
    /// the bytes are ambiguous, e.g. an MP3 that starts with junk). At `round >= policy.maxRounds` it returns
    /// `.done` (a fallback if still unresolved). Never reads a byte that is not present; `.done`'s `info` is parsed
    /// only from bytes inside `ranges`.
    public static func analyze(_ bytes: some AudioBytes, name: String, mimeType: String?, policy: StartSetPolicy,
                               round: Int) -> StartSetStep {
        let limits = Limits(policy)
        var analysis = Analysis(window: ByteWindow(bytes), limits: limits,
                                hint: FormatHint.from(name: name, mimeType: mimeType))
        let size = analysis.size
        guard size > 0 else {
            return .done(StartSet(format: analysis.hint ?? .unknown, ranges: ByteRanges(), audioStart: nil,
                                  isFallback: true, info: TrackInfo()))
        }
        switch walk(&analysis) {
        case .layout(let layout):
            guard let set = compose(layout, analysis) else { return .done(fallback(layout.format, analysis)) }
            return .done(set)
        case .need(let wanted):
            let wanted = wanted.clamped(to: size)
            let missing = wanted.subtracting(analysis.window.present)
            var afterwards = wanted
            afterwards.formUnion(initialRanges(size: size, policy: policy))
            guard round < limits.maxRounds, !missing.isEmpty,
                  afterwards.byteCount <= limits.maxStartSetBytes
            else { return .done(fallback(detectedFormat(&analysis), analysis)) }
            return .need(missing)
        case .notUnderstood(let format):
            return .done(fallback(format, analysis))
        }
    }

    /// Before any byte is known (for the cache budget planner): an estimate of the start-set bytes of a file of
    /// this size and name, from a typical bitrate per format and typical leading metadata; never more than `size`
    /// nor `maxStartSetBytes`.
    public static func estimatedBytes(size: Int64, name: String, mimeType: String?, policy: StartSetPolicy) -> Int64 {
        let limits = Limits(policy)
        let size = max(0, size)
        let estimate: Int64
        if let format = FormatHint.from(name: name, mimeType: mimeType), let rate = FormatHint.typicalByteRate(format) {
            let seconds = (rate * limits.headSeconds).rounded(.up)
            let audio = max(limits.minimumAudioBytes, seconds < 1e15 ? Int64(seconds) : Int64.max / 4)
            estimate = (FormatHint.typicalMetadataBytes.adding(audio) ?? Int64.max).adding(limits.tailBytes) ?? Int64.max
        } else {
            estimate = limits.probeBytes.adding(limits.tailBytes) ?? Int64.max
        }
        return min(size, estimate, limits.maxStartSetBytes)
    }

    /// The format the magic bytes at the start claim (or the hint), for labelling a fallback.
    static func detectedFormat(_ analysis: inout Analysis) -> AudioFormat {
        let head = analysis.window.clamped(at: 0, count: 12)
        guard let view = analysis.window.bytes(head).map(ByteView.init) else { return analysis.hint ?? .unknown }
        return FormatHint.magic(view) ?? analysis.hint ?? .unknown
    }

    /// Dispatch by magic bytes: leading ID3v2 tags first, then what follows them.
    static func walk(_ analysis: inout Analysis) -> Walk {
        let size = analysis.size
        let first = analysis.window.clamped(at: 0, count: 12)
        guard let head = analysis.window.bytes(first).map(ByteView.init) else {
            return .need(analysis.lookahead(0))
        }
        if head.matches(0, "ID3") {
            switch ID3v2.leadingChain(&analysis, at: 0) {
            case .need(let ranges): return .need(ranges)
            case .hostile: return .notUnderstood(analysis.hint ?? .mp3)
            case .chain(let tags, let end):
                let next = analysis.window.clamped(at: end, count: 12)
                guard let after = analysis.window.bytes(next).map(ByteView.init) else {
                    return .need(analysis.lookahead(end))
                }
                if after.matches(0, "fLaC") { return FLAC.walk(&analysis, at: end, id3: tags) }
                if ADTS.header(after, 0) != nil && analysis.hint != .mp3 {
                    return MPEGAudio.walk(&analysis, from: end, kind: .aac, id3: tags)
                }
                return MPEGAudio.walk(&analysis, from: end, kind: analysis.hint == .aac ? .aac : .mp3, id3: tags)
            }
        }
        switch FormatHint.magic(head) {
        case .flac?: return FLAC.walk(&analysis, at: 0, id3: [])
        case .ogg?: return Ogg.walk(&analysis)
        case .wav?: return RIFF.walk(&analysis)
        case .aiff?: return AIFF.walk(&analysis)
        case .mp4?: return MP4.walk(&analysis)
        case .aac?: return MPEGAudio.walk(&analysis, from: 0, kind: .aac, id3: [])
        case .mp3?: return MPEGAudio.walk(&analysis, from: 0, kind: .mp3, id3: [])
        default:
            switch analysis.hint {
            case .mp3?: return MPEGAudio.walk(&analysis, from: 0, kind: .mp3, id3: [])
            case .aac?: return MPEGAudio.walk(&analysis, from: 0, kind: .aac, id3: [])
            case .mp4? where size >= 8 && head.u32be(0).map({ $0 == 0 || $0 >= 8 }) == true
                && ["moov", "mdat", "free", "wide", "skip", "pnot"].contains(head.fourCC(4) ?? ""):
                return MP4.walk(&analysis)
            default: return .notUnderstood(analysis.hint ?? .unknown)
            }
        }
    }
}
