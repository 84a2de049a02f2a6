import CloudSyncAudio
import CloudSyncCore
import Foundation

/// How much of a track its head (start set) keeps: at least `audioBytes` and `seconds` of audio after the
/// metadata, and the last `tailBytes`. `pull.head_first` and `pull.head_seconds` configure it; when the heads of
/// the whole library do not fit the budget under them, a pull uses a shorter one of ``ladder`` (``HeadFit``).
public struct HeadPolicy: Sendable, Hashable, CustomStringConvertible {
    public var audioBytes: Int64
    public var seconds: Double
    public var tailBytes: Int64

    /// The tail every head keeps unless the shortest step of the ladder applies.
    public static let defaultTailBytes: Int64 = 128 << 10

    public init(audioBytes: Int64 = 512 << 10, seconds: Double = 10, tailBytes: Int64 = HeadPolicy.defaultTailBytes) {
        self.audioBytes = max(0, audioBytes)
        self.seconds = seconds.isFinite ? max(0, seconds) : 0
        self.tailBytes = max(0, tailBytes)
    }

    /// The defaults (512 KiB, 10 s, a 128 KiB tail): also the policy of start sets recorded before policies were.
    public static let standard = HeadPolicy()

    /// The shorter heads a pull falls back to, in order, when the heads do not fit (each capped by the configured
    /// policy). The last keeps 2 s of audio (at least 64 KiB) and a 64 KiB tail: still every byte a player reads
    /// before the first audio (tags, cover, headers, a trailing `moov`) and what readers look for at the end —
    /// ID3v1/APEv2 and the last Ogg page are kept by the analysis itself; 64 KiB also holds the 65,536 bytes
    /// libvorbisfile reads back from the end and ffmpeg's 65,307-byte last-page search. A 256 kbit/s MP3 keeps
    /// ~135 KB instead of ~656 KB, so a budget holds the heads of about five times as many tracks.
    static let shorterSteps: [HeadPolicy] = [
        HeadPolicy(audioBytes: 256 << 10, seconds: 6),
        HeadPolicy(audioBytes: 128 << 10, seconds: 3),
        HeadPolicy(audioBytes: 64 << 10, seconds: 2, tailBytes: 64 << 10),
    ]

    /// This policy, then each shorter step no longer than it (duplicates dropped): what ``HeadFit`` chooses from.
    public var ladder: [HeadPolicy] {
        var steps = [self]
        for step in Self.shorterSteps {
            let capped = HeadPolicy(audioBytes: min(audioBytes, step.audioBytes), seconds: min(seconds, step.seconds),
                                    tailBytes: min(tailBytes, step.tailBytes))
            if !steps.contains(capped) { steps.append(capped) }
        }
        return steps
    }

    /// The index's key of this policy (`files.start_policy`): each start set is recorded with the key of the
    /// policy it was computed under, and a pull under another policy derives it again. The default tail is left
    /// out, so keys recorded before tails varied stay valid.
    public var key: String {
        "audio>=\(audioBytes)B,\(seconds)s" + (tailBytes == Self.defaultTailBytes ? "" : ",tail=\(tailBytes)B")
    }

    /// The policy of a key ``key`` made; nil for anything else.
    public init?(key: String) {
        let parts = key.split(separator: ",", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count), parts[0].hasPrefix("audio>="), parts[0].hasSuffix("B"), parts[1].hasSuffix("s"),
              let bytes = Int64(parts[0].dropFirst(7).dropLast()), let seconds = Double(parts[1].dropLast()) else { return nil }
        var tail = Self.defaultTailBytes
        if parts.count == 3 {
            guard parts[2].hasPrefix("tail="), parts[2].hasSuffix("B"), let value = Int64(parts[2].dropFirst(5).dropLast())
            else { return nil }
            tail = value
        }
        self.init(audioBytes: bytes, seconds: seconds, tailBytes: tail)
        guard self.key == key else { return nil }
    }

    /// The analysis policy.
    public var startSetPolicy: StartSetPolicy {
        StartSetPolicy(headSeconds: seconds, minimumAudioBytes: audioBytes, tailBytes: tailBytes)
    }

    /// Start-set bytes of a track not analysed yet, from a typical bitrate for its format.
    public func estimate(size: Int64, path: String, mimeType: String?) -> Int64 {
        StartSetAnalyzer.estimatedBytes(size: size, name: path, mimeType: mimeType, policy: startSetPolicy)
    }

    /// Start-set bytes under this policy of a track whose start set is `known` bytes under `recorded`: the known
    /// bytes with the audio part and the tail of `recorded` replaced by this policy's, at the track's own byte rate
    /// (`size ÷ duration`). The analysis gives a duration for what it understands; without one the larger of two
    /// readings counts (see the body). Within `0...size`; exact when `recorded` is this policy.
    public func estimate(size: Int64, path: String, mimeType: String?, known: Int64, recorded: HeadPolicy, duration: Double?) -> Int64 {
        let size = max(0, size)
        guard recorded != self else { return min(size, max(0, known)) }
        let value: Int64
        if let duration, duration.isFinite, duration > 0.5 {
            let rate = Double(size) / duration
            func part(_ policy: HeadPolicy) -> Int64 {
                let seconds = (rate * policy.seconds).rounded(.up)
                let audio = max(policy.audioBytes, seconds < 1e15 ? Int64(seconds) : Int64.max / 4)
                return audio.addingSaturating(policy.tailBytes)
            }
            value = known.addingSaturating(part(self)).addingSaturating(-part(recorded))
        } else {
            // No duration: most likely the analysis's fallback (a format it does not know), whose first bytes
            // follow `audioBytes` (plus 64 KiB) and whose tail follows `tailBytes`, seconds not entering it; but a
            // FLAC stream that does not declare its length has none either, and its audio follows the seconds at
            // the format's typical rate. The larger of the two: an estimate too small would have a pull take longer
            // heads, find they do not fit, and shorten them again on every pull.
            let fallback = known.addingSaturating(audioBytes).addingSaturating(-recorded.audioBytes)
                .addingSaturating(tailBytes).addingSaturating(-recorded.tailBytes)
            let typical = known.addingSaturating(estimate(size: size, path: path, mimeType: mimeType))
                .addingSaturating(-recorded.estimate(size: size, path: path, mimeType: mimeType))
            value = max(fallback, typical)
        }
        return min(size, max(0, value))
    }

    /// "512 KiB and 10 s of audio" ("… with the last 64.0 KiB" when the tail is not the default's).
    public var description: String {
        let seconds = seconds.rounded() == seconds && seconds < 1e9 ? String(Int(seconds)) : String(seconds)
        return "\(ByteSize.format(audioBytes)) and \(seconds) s of audio"
            + (tailBytes == Self.defaultTailBytes ? "" : " with the last \(ByteSize.format(tailBytes))")
    }
}

/// Which head policy a library's heads fit under. Pure.
public enum HeadFit {
    /// Share of the budget the heads of a longer step than the current one must stay under for a pull to move up
    /// to it: moving up derives every start set again and fetches the longer heads, so estimates a few percent
    /// short must not make pulls go up and down.
    public static let upMargin = 0.95

    /// The budget that keeps heads needing `headsBytes`, shortened now: a pull moves up to them only within
    /// ``upMargin`` of it, so that is what a person is told to give.
    public static func budgetKeeping(_ headsBytes: Int64) -> Int64 {
        let needed = (Double(max(0, headsBytes)) / upMargin).rounded(.up)
        guard needed < 9e18 else { return Int64.max }
        // The choice rounds its limit down in floating point: the first budget whose limit holds the heads.
        var budget = Int64(needed)
        while Int64((Double(budget) * upMargin).rounded(.down)) < headsBytes { budget += 1 }
        return budget
    }

    /// The index in `ladder` of the first policy whose heads (`headsBytes`, the budget every head needs under it)
    /// fit `budget`; a step before `current` (longer heads than the library has now) only when they fit within
    /// ``upMargin`` of it. The last step when none fits (the lowest-priority tracks then get no head). Evaluates
    /// `headsBytes` only up to the step chosen.
    public static func choose(_ ladder: [HeadPolicy], budget: Int64, current: Int?,
                              headsBytes: (HeadPolicy) throws -> Int64) rethrows -> (index: Int, headsBytes: Int64) {
        precondition(!ladder.isEmpty, "a ladder holds at least the configured policy")
        var last: Int64 = 0
        for (index, policy) in ladder.enumerated() {
            last = try headsBytes(policy)
            let movesUp = current.map { index < $0 } ?? false
            let limit = movesUp ? Int64((Double(budget) * upMargin).rounded(.down)) : budget
            if last <= limit { return (index, last) }
        }
        return (ladder.count - 1, last)
    }
}
