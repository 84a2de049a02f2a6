import CloudSyncCache
import CloudSyncCore
import Foundation

/// Start sets in the engine: what a track's head is, and fetching it.
enum StartSets {
    /// Start-set bytes of a track not analysed yet, for the planner.
    static func estimator(headBytes: Int64, headSeconds: Double) -> @Sendable (Int64, String, String?) -> Int64 {
        { size, _, _ in min(size, headBytes) }
    }

    /// Makes the start set of `job`'s track present: when it is not known yet, it is computed first (recorded
    /// in the index with the tags it carries), then its missing bytes are fetched and checkpointed.
    static func fetch(_ job: FileJob, fetcher: FileFetcher, options: SyncOptions, logger: Logger) async throws {
        let startSet: RangeSet<Int64>
        if let known = job.writer.startSet {
            startSet = known
        } else {
            startSet = RangeSet(0 ..< min(job.file.size, options.headBytes))
            try job.writer.setStartSet(startSet, tags: nil, duration: nil)
        }
        for range in startSet.ranges {
            try await fetcher.fetch(job, within: range)
        }
    }

    /// Computes the start set of a complete track from its local file (no network).
    static func analyseLocally(_ writer: EntryWriter, options: SyncOptions) throws {
        guard writer.startSet == nil else { return }
        try writer.setStartSet(RangeSet(0 ..< min(writer.size, options.headBytes)), tags: nil, duration: nil)
    }
}
