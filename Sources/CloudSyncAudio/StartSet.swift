import CloudSyncCore

/// The container or stream format of an audio file, as its bytes say (not its name).
public enum AudioFormat: String, Sendable, Codable, CaseIterable {
    /// MPEG-1/2/2.5 Layer III frames, possibly behind ID3v2 tags.
    case mp3
    /// AAC in ADTS frames (`.aac`), possibly behind ID3v2 tags.
    case aac
    /// Native FLAC (`fLaC`), possibly behind ID3v2 tags.
    case flac
    /// ISO base media / QuickTime (M4A, M4B, MP4, ALAC).
    case mp4
    /// Ogg with Vorbis, Opus or FLAC.
    case ogg
    /// RIFF/WAVE, RF64 and BW64.
    case wav
    /// AIFF and AIFF-C.
    case aiff
    /// Anything else (APE, WavPack, WMA, Matroska, DSF, DFF, Musepack, …) or bytes no format claims.
    case unknown
}

/// How much a start set keeps.
///
/// Values outside their sensible range are read as the nearest sensible one by the analyzer (negative sizes as
/// 0, a NaN or negative `headSeconds` as 0, `maxRounds` below 0 as 0), so a policy built from configuration can
/// never make an analysis misbehave.
public struct StartSetPolicy: Sendable, Hashable {
    /// Seconds of audio after the metadata (config `pull.head_seconds`, default 10).
    public var headSeconds: Double
    /// At least this many bytes of audio after the metadata (config `pull.head_first`, default 512 KiB).
    public var minimumAudioBytes: Int64
    /// Always keep the last `tailBytes` of the file (default 128 KiB).
    public var tailBytes: Int64
    /// The first request covers `[0, probeBytes)` (default `minimumAudioBytes + 64 KiB`).
    public var probeBytes: Int64
    /// Analysis rounds before giving up with the fallback (default 8).
    public var maxRounds: Int
    /// A start set never exceeds this many bytes (default 64 MiB); a structure that would need more falls back.
    public var maxStartSetBytes: Int64
    /// A hole shorter than this between two kept ranges is kept too (default 64 KiB). Readers fetch in blocks and
    /// read forward through a short gap rather than seek (ffmpeg: up to its 32 KiB buffer plus its 32 KiB
    /// short-seek threshold), so such a hole would be read anyway; keeping it costs at most this much per hole.
    public var mergeGapBytes: Int64 = 64 << 10

    public init(headSeconds: Double = 10, minimumAudioBytes: Int64 = 512 << 10, tailBytes: Int64 = 128 << 10,
                probeBytes: Int64? = nil, maxRounds: Int = 8, maxStartSetBytes: Int64 = 64 << 20) {
        self.headSeconds = headSeconds
        self.minimumAudioBytes = minimumAudioBytes
        self.tailBytes = tailBytes
        let (sum, overflow) = max(0, minimumAudioBytes).addingReportingOverflow(64 << 10)
        self.probeBytes = probeBytes ?? (overflow ? Int64.max : sum)
        self.maxRounds = maxRounds
        self.maxStartSetBytes = maxStartSetBytes
    }
}

/// The bytes of one file that are available to an analysis (present in the cache). Implemented by the engine
/// over a partial file, by tests over memory.
public protocol AudioBytes {
    /// The size of the whole file in bytes.
    var size: Int64 { get }
    /// Ranges present now.
    var present: ByteRanges { get }
    /// The bytes of `range` (clamped by the caller to 0..<size), or nil when any byte of it is not present.
    func bytes(in range: Range<Int64>) -> [UInt8]?
}

/// What a start set of one track is.
public struct StartSet: Sendable, Hashable {
    public var format: AudioFormat
    /// Byte ranges to keep (within `0..<size`): the start set.
    public var ranges: ByteRanges
    /// Offset of the first audio byte (after leading metadata), when the structure was understood.
    public var audioStart: Int64?
    /// True when the structure was not understood (unknown format, hostile or truncated header): `ranges` is
    /// then `[0, probeBytes) ∪ the tail`.
    public var isFallback: Bool
    /// Tags and stream facts, read only from bytes inside `ranges`.
    public var info: TrackInfo

    public init(format: AudioFormat, ranges: ByteRanges, audioStart: Int64?, isFallback: Bool, info: TrackInfo) {
        self.format = format
        self.ranges = ranges
        self.audioStart = audioStart
        self.isFallback = isFallback
        self.info = info
    }

    /// How many bytes the start set keeps (the sum of `ranges`).
    public var byteCount: Int64 { ranges.byteCount }
}

/// One step of the analysis of a track.
public enum StartSetStep: Sendable, Hashable {
    /// Fetch these ranges (those not yet present), then call `analyze` again with `round + 1`. Always contains at
    /// least one byte not present.
    case need(ByteRanges)
    case done(StartSet)
}
