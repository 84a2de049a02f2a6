import CloudSyncAudio
import CloudSyncCache
import CloudSyncCore
import Foundation

/// Start sets in the engine: analysing a track's structure from the bytes the cache holds (`CloudSyncAudio`),
/// fetching the ranges the analysis names, and recording the start set with the tags it carries.
enum StartSets {
    /// The policy of start sets recorded before policies were (a NULL `files.start_policy`).
    static let legacyPolicyKey = HeadPolicy.standard.key

    /// Makes the start set of `job`'s track present. When it is not known yet it is analysed first: the first
    /// bytes and the tail are fetched, then whatever ranges the analysis names (a cover's end, a trailing
    /// `moov`, Ogg header pages), round by round; the start set is recorded in the index with the tags and
    /// duration read from it. Then its missing bytes are fetched. They are not made durable here: the caller
    /// flushes a head it keeps, and promotion syncs a whole track (one sync per file, shared with other files).
    static func fetch(_ job: FileJob, fetcher: FileFetcher, heads: HeadPolicy, logger: Logger) async throws {
        let startSet: ByteRanges
        if let known = job.writer.startSet {
            startSet = known
        } else {
            let policy = heads.startSetPolicy
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
                    try record(found, in: job.writer, heads: heads)
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
    static func analyseLocally(_ writer: EntryWriter, heads: HeadPolicy) throws {
        guard writer.startSet == nil else { return }
        _ = try analysePresent(writer, heads: heads)
    }

    /// Analyses the track from the bytes its entry holds (no network) and records the start set under `heads`; false when the analysis needs bytes the entry does not hold (nothing is recorded). The analysis
    /// ends in its fallback (first and last bytes) once its rounds run out asking for absent bytes, so of an
    /// entry that is not complete such a fallback is not taken: fetched as a head, its structure is read whole. A
    /// fallback the analysis gives without asking for a byte (a format it does not know, a structure past its
    /// limits) is the start set whatever else the file holds, and is taken.
    private static func analysePresent(_ writer: EntryWriter, heads: HeadPolicy) throws -> Bool {
        let policy = heads.startSetPolicy
        let bytes = WriterBytes(writer: writer)
        var asked = false
        for round in 0 ... max(0, policy.maxRounds) {
            switch StartSetAnalyzer.analyze(bytes, name: writer.path, mimeType: nil, policy: policy, round: round) {
            case .need:
                asked = true
            case .done(let found):
                guard !found.isFallback || !asked || writer.missingRanges().isEmpty else { return false }
                try record(found, in: writer, heads: heads)
                return true
            }
        }
        return false
    }

    /// Derives again, from the bytes the cache holds, the start sets of `remote`'s tracks computed under another
    /// policy than `heads` (`pull.head_first` or `pull.head_seconds` changed, or the heads were shortened
    /// to fit the budget, ``HeadFit``): a smaller start set is then what the budget keeps
    /// (the rest of a head is shrunk by the plan), a bigger one is fetched as a head. A start set that cannot be
    /// derived from what is held (no bytes, its structure not all there) is forgotten: analysed when next fetched.
    /// Entries another process is writing keep theirs until a later pull. Returns how many were derived again and
    /// how many forgotten. `reason`, when given, is said first (only when there is something to derive).
    @discardableResult
    static func rederive(remote: String, cache: Cache, heads: HeadPolicy, logger: Logger,
                         reason: String? = nil) throws -> (derived: Int, forgotten: Int) {
        let stale = try cache.startSetsOfOtherPolicies(remote: remote, policy: heads.key, legacy: legacyPolicyKey)
        guard !stale.isEmpty else { return (0, 0) }
        if let reason { logger.info(reason) }
        logger.info("\(remote): deriving the start sets of \(stale.count == 1 ? "1 track" : "\(stale.count) tracks") again for "
            + "heads of \(heads)")
        var derived = 0
        var forget: [String] = []
        for entry in stale {
            guard entry.holdsBytes else {
                forget.append(entry.path)
                continue
            }
            do {
                let writer = try cache.openWriter(remote: remote, path: entry.path, wait: false)
                defer { writer.close() }
                if try analysePresent(writer, heads: heads) { derived += 1 } else { forget.append(entry.path) }
            } catch let error as CacheError where error.code == .busy {
                logger.debug("\(remote):\(entry.path): being written by another process; its start set is derived again later")
            } catch {
                logger.info("\(remote):\(entry.path): could not derive its start set again (\(error)); it is analysed when next fetched")
                forget.append(entry.path)
            }
        }
        let forgotten = forget.isEmpty ? 0 : try cache.forgetStartSets(remote: remote, paths: forget).count
        return (derived, forgotten)
    }

    /// ``rederive(remote:cache:heads:logger:reason:)`` for every remote of the cache: they share one budget, so
    /// the start sets of every remote follow the policy the heads fit under. `reason` is said once, first.
    @discardableResult
    static func rederiveAll(cache: Cache, heads: HeadPolicy, logger: Logger, reason: String? = nil) throws -> (derived: Int, forgotten: Int) {
        var total = (derived: 0, forgotten: 0)
        var reason = reason
        for remote in try cache.remotesWithStartSetsOfOtherPolicies(policy: heads.key, legacy: legacyPolicyKey) {
            let changed = try rederive(remote: remote, cache: cache, heads: heads, logger: logger, reason: reason)
            if changed.derived + changed.forgotten > 0 { reason = nil }
            total.derived += changed.derived
            total.forgotten += changed.forgotten
        }
        return total
    }

    /// Records `found` with its tags (JSON of ``TrackInfo``), duration and the key of `heads`.
    private static func record(_ found: StartSet, in writer: EntryWriter, heads: HeadPolicy) throws {
        try writer.setStartSet(found.ranges, tags: found.info.isEmpty ? nil : found.info.json,
                               duration: found.info.durationSeconds, policy: heads.key)
    }
}

/// The bytes a cache entry holds, for the analysis: what its writer has (committed or pending), read on demand.
/// Parsers ask for many small pieces close together (an ID3v2 tag's frame headers and texts, then the frames after
/// it), so a read from the partial file takes up to ``readAhead`` present bytes and the reads inside them are
/// copied from memory: a real MP3 took ~20 `pread`s under the writer's lock (an encrypted entry decrypted a 64 KiB
/// block for each), now ~3. The analyser still asks only for what it parses.
final class WriterBytes: AudioBytes {
    let writer: EntryWriter
    private var block: [UInt8] = []
    private var blockStart: Int64 = 0

    /// How far past what is asked a read from the partial file goes (never past the present bytes): a tag's
    /// frames without a picture fit, and the frame search reads its window (24 KiB, or 88 KiB when the frame is
    /// not in the first 16 KiB) in one piece anyway.
    static let readAhead: Int64 = 16 << 10

    init(writer: EntryWriter) { self.writer = writer }

    var size: Int64 { writer.size }
    var present: ByteRanges { writer.presentRanges() }

    func bytes(in range: Range<Int64>) -> [UInt8]? {
        let count = range.upperBound - range.lowerBound
        guard range.lowerBound >= 0, count >= 0 else { return nil }
        if range.lowerBound < blockStart || range.upperBound - blockStart > Int64(block.count) {
            // Present ranges are merged: the run holding the first byte holds the whole range or it is not there.
            guard let run = present.ranges.first(where: { $0.contains(range.lowerBound) }), run.upperBound >= range.upperBound
            else { return count == 0 ? [] : nil }
            let length = max(count, min(run.upperBound - range.lowerBound, Self.readAhead))
            guard let bytes = try? writer.readBytes(range.lowerBound..<(range.lowerBound + length)), Int64(bytes.count) == length
            else { return nil }
            block = bytes
            blockStart = range.lowerBound
        }
        let from = Int(range.lowerBound - blockStart)
        return from == 0 && Int(count) == block.count ? block : Array(block[from..<from + Int(count)])
    }
}
