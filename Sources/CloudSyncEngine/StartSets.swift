import CloudSyncAudio
import CloudSyncCache
import CloudSyncCore
import Foundation

/// Start sets in the engine: analysing a track's structure from the bytes the cache holds (`CloudSyncAudio`),
/// fetching the ranges the analysis names, and recording the start set with the tags it carries.
enum StartSets {
    /// The analysis policy of a pull: at least `headBytes` and `headSeconds` of audio.
    static func policy(headBytes: Int64, headSeconds: Double) -> StartSetPolicy {
        StartSetPolicy(headSeconds: headSeconds, minimumAudioBytes: headBytes)
    }

    /// Start-set bytes of a track not analysed yet, for the planner.
    static func estimator(headBytes: Int64, headSeconds: Double) -> @Sendable (Int64, String, String?) -> Int64 {
        let policy = policy(headBytes: headBytes, headSeconds: headSeconds)
        return { size, path, mime in StartSetAnalyzer.estimatedBytes(size: size, name: path, mimeType: mime, policy: policy) }
    }

    /// Makes the start set of `job`'s track present. When it is not known yet it is analysed first: the first
    /// bytes and the tail are fetched, then whatever ranges the analysis names (a cover's end, a trailing
    /// `moov`, Ogg header pages), round by round; the start set is recorded in the index with the tags and
    /// duration read from it. Then its missing bytes are fetched. They are not made durable here: the caller
    /// flushes a head it keeps, and promotion syncs a whole track (one sync per file, shared with other files).
    static func fetch(_ job: FileJob, fetcher: FileFetcher, options: SyncOptions, logger: Logger) async throws {
        let startSet: ByteRanges
        if let known = job.writer.startSet {
            startSet = known
        } else {
            let policy = policy(headBytes: options.headBytes, headSeconds: options.headSeconds)
            var want = StartSetAnalyzer.initialRanges(size: job.file.size, policy: policy)
            var round = 0
            while true {
                try await fetcher.fetch(job, ranges: want)
                let step = StartSetAnalyzer.analyze(WriterBytes(writer: job.writer), name: job.file.path,
                                                    mimeType: job.file.mimeType, policy: policy, round: round)
                switch step {
                case .need(let more):
                    want = more
                    round += 1
                    continue
                case .done(let found):
                    try record(found, in: job.writer)
                    if found.isFallback {
                        logger.debug("\(job.file.path): structure not recognised; its start set is its first and last bytes")
                    }
                    startSet = found.ranges
                }
                break
            }
        }
        try await fetcher.fetch(job, ranges: startSet)
    }

    /// Computes the start set (and tags) of a complete track from its local file: no network.
    static func analyseLocally(_ writer: EntryWriter, options: SyncOptions) throws {
        guard writer.startSet == nil else { return }
        let policy = policy(headBytes: options.headBytes, headSeconds: options.headSeconds)
        let bytes = WriterBytes(writer: writer)
        for round in 0 ... max(0, policy.maxRounds) {
            if case .done(let found) = StartSetAnalyzer.analyze(bytes, name: writer.path, mimeType: nil, policy: policy,
                                                                round: round) {
                try record(found, in: writer)
                return
            }
        }
    }

    /// Records `found` with its tags (JSON of ``TrackInfo``) and duration.
    private static func record(_ found: StartSet, in writer: EntryWriter) throws {
        let tags = found.info.isEmpty ? nil : try encoder.encode(found.info)
        try writer.setStartSet(found.ranges, tags: tags.map { String(decoding: $0, as: UTF8.self) },
                               duration: found.info.durationSeconds)
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}

/// The bytes a cache entry holds, for the analysis: what its writer has (committed or pending), read on demand.
struct WriterBytes: AudioBytes {
    let writer: EntryWriter

    var size: Int64 { writer.size }
    var present: ByteRanges { writer.presentRanges() }

    func bytes(in range: Range<Int64>) -> [UInt8]? {
        try? writer.readBytes(range)
    }
}
