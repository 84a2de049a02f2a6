import CloudSyncCore
import Foundation

/// How often writers checkpoint. (What the cache may hold is the engine's budget planner's to decide.)
public struct CacheLimits: Sendable, Hashable {
    /// A writer checkpoints (fdatasync, then commit ranges) after this many new bytes…
    public var checkpointBytes: Int64
    /// …or this long after its last checkpoint, whichever comes first.
    public var checkpointInterval: Duration
    /// How long a group commit waits for more files after its first (``Cache/hurryPromotions(_:)`` ends the wait
    /// while no more can come).
    public var batchDelay: Duration

    public init(checkpointBytes: Int64 = 4 * 1024 * 1024, checkpointInterval: Duration = .seconds(2),
                batchDelay: Duration = .milliseconds(25)) {
        self.checkpointBytes = checkpointBytes
        self.checkpointInterval = checkpointInterval
        self.batchDelay = batchDelay
    }
}

/// How much of an entry's current version is cached.
public enum CacheEntryState: String, Sendable, Codable, Hashable {
    /// No byte of the current version is cached (an older complete copy may still be in `tracks/`).
    case missing
    /// Some bytes are in the partial file.
    case partial
    /// The current version is complete and verified in `tracks/`.
    case complete
}

/// What the index knows about one remote file.
public struct CacheEntryInfo: Sendable, Hashable {
    public var remote: String
    /// Metadata from the last listing; `file.path` is the remote path.
    public var file: RemoteFile
    public var state: CacheEntryState
    /// Bytes of the current version that are present (= `file.size` when complete).
    public var presentBytes: Int64
    /// Where the complete file lives (or will live) relative to `tracks/`: sanitized remote name, then the
    /// sanitized remote path (see ``LocalPath``).
    public var localPath: String
    /// The cache's `tracks/` directory.
    public var tracksURL: URL
    public var pinned: Bool
    public var lastAccess: Date
    /// The start set of the current version (what a player needs to start and know the track), once analysed.
    public var startSet: ByteRanges?
    /// The start set is known and every byte of it is present (always true when complete): the track starts at once.
    public var headPresent: Bool
    /// When this version was first listed.
    public var added: Date
    /// When a player last read it through `serve` (nil: never).
    public var lastPlayed: Date?
    /// Bytes of an older complete version still in `tracks/` while this one downloads (0 when none).
    public var outdatedTrackBytes: Int64
    /// Tags read from the start set (the engine's JSON) and the duration in seconds; nil until read.
    public var tags: String?
    public var duration: Double?
    /// When a pull that keeps deletions (`--no-delete`) found the remote file gone; nil while it is listed.
    public var deletedRemotely: Date?
    /// Its bytes are stored encrypted (`cache.encrypt`): the file in `tracks/` is ciphertext, readable through
    /// `serve` only.
    public var sealed: Bool = false

    public var path: String { file.path }

    /// `cached`, `head`, `partial` or `missing` (the words of `ls` and its JSON).
    public var stateName: String {
        switch state {
        case .complete: "cached"
        case .partial where headPresent, .missing where headPresent: "head"
        case .partial: "partial"
        case .missing: "missing"
        }
    }

    /// Absolute location of ``localPath``. The file exists when `state == .complete` (or holds an older
    /// version while a newer one downloads).
    public var localURL: URL { tracksURL.appendingPathComponent(localPath, isDirectory: false) }
}

/// What a batch upsert did to each file, in input order.
/// How a listed file relates to its index entry (``Cache/compare(remote:files:)``), or related before
/// ``Cache/upsert(remote:files:)`` recorded it.
public enum ListedFileStatus: Sendable, Hashable {
    /// Not indexed.
    case new
    /// Another version is indexed; `wasComplete` when that version is complete in `tracks/`.
    case changed(wasComplete: Bool)
    /// This version is indexed: complete, or with `presentBytes` committed so far.
    case same(complete: Bool, presentBytes: Int64)
}

/// What a removal did.
public struct RemovalReport: Sendable, Hashable {
    /// Remote paths removed from the index, with their cached files.
    public var removed: [String] = []
    /// Remote paths kept because they are pinned (`cloudsync cache unpin` to let them go).
    public var keptPinned: [String] = []
}

/// One entry eviction removed (or would remove, in a dry run).
public struct EvictedEntry: Sendable, Hashable {
    public var remote: String
    public var path: String
    public var bytes: Int64
    public var lastAccess: Date
    /// Why: `"age"` or `"size"` (or `"clear"`).
    public var reason: String
}

/// The result of ``Cache/evict(dryRun:)`` or ``Cache/clear(remote:)``.
public struct EvictionReport: Sendable, Hashable {
    public var dryRun: Bool
    public var evicted: [EvictedEntry] = []
    /// Entries skipped because another process is writing them right now.
    public var skippedBusy: [String] = []
    /// Pinned entries that were over the limits but kept.
    public var keptPinned: Int = 0
    public var bytesBefore: Int64 = 0
    public var bytesAfter: Int64 = 0
    public var freedBytes: Int64 { evicted.reduce(0) { $0.addingSaturating($1.bytes) } }
}

/// `cloudsync cache status`.
public struct CacheStatus: Sendable, Hashable {
    public var root: URL
    public var limits: CacheLimits
    public var entries: Int
    public var complete: Int
    public var partial: Int
    public var pinned: Int
    /// Bytes on disk: complete tracks (including older copies awaiting replacement) plus partials' present bytes.
    public var bytesPresent: Int64
    /// Bytes the whole library would need complete (every indexed track).
    public var libraryBytes: Int64 = 0
    /// Tracks whose start set is known, and its mean size (nil when none is).
    public var analysedStartSets = 0
    public var meanStartBytes: Int64?
    /// Per remote, in name order.
    public var remotes: [RemoteStatus] = []
}

/// How ready one remote's tracks are.
public struct RemoteStatus: Sendable, Hashable {
    public var remote: String
    public var tracks: Int
    /// Complete and verified in `tracks/`.
    public var complete: Int
    /// Not complete, but the start set is present: starts at once through `serve`.
    public var headOnly: Int
    /// Some bytes, but not the whole start set.
    public var partial: Int
    /// No byte of the current version.
    public var missing: Int
    public var bytesPresent: Int64
    public var libraryBytes: Int64
}

/// The result of ``Cache/verify(hasher:)``.
public struct VerifyReport: Sendable, Hashable {
    /// Complete files checked (size, and hash when the provider gives one).
    public var checked: Int = 0
    /// Complete files without a provider hash: only their size was compared.
    public var skippedNoHash: Int = 0
    /// Remote paths (`remote:path`) whose bytes did not match: the file was deleted and marked missing.
    public var mismatched: [String] = []
    /// Remote paths whose file had another size than the remote's (truncated, grown): deleted and marked missing.
    public var wrongSize: [String] = []
    /// Remote paths whose file's modification time is not the remote's (touched or copied over): reported only.
    public var mtimeDrift: [String] = []
    /// Remote paths whose complete file had vanished from `tracks/`: marked missing.
    public var vanished: [String] = []
    /// Remote paths of encrypted entries with a block that failed its authentication check (tampering, bit rot):
    /// those blocks were dropped and are fetched again; the rest is kept.
    public var damaged: [String] = []
}
