import CloudSyncCore
import Foundation

/// How one pull runs.
public struct SyncOptions: Sendable {
    /// Files downloaded at once.
    public var jobs: Int
    /// Bytes per ranged GET.
    public var chunkSize: Int64
    /// Concurrent ranged GETs ("segments") per file of at least `segmentThreshold` bytes; 1 = one per file.
    public var segments: Int
    /// Files this big or bigger are fetched in `segments` streams.
    public var segmentThreshold: Int64
    /// With a value, a first pass fetches this many leading bytes of every planned track before any remainder.
    public var headFirst: Int64?
    /// Only files equal to or under these paths (relative to the remote's root); empty = everything.
    public var paths: [String]
    /// Plan only: change nothing, fetch nothing.
    public var dryRun: Bool
    /// Wait for another run's pull lock instead of failing with `.locked`.
    public var waitForLock: Bool

    public init(jobs: Int = 4, chunkSize: Int64 = 8 << 20, segments: Int = 4, segmentThreshold: Int64 = 64 << 20,
                headFirst: Int64? = nil, paths: [String] = [], dryRun: Bool = false, waitForLock: Bool = false) {
        self.jobs = max(1, jobs)
        self.chunkSize = max(64 << 10, chunkSize)
        self.segments = max(1, segments)
        self.segmentThreshold = max(1, segmentThreshold)
        self.headFirst = headFirst
        self.paths = paths
        self.dryRun = dryRun
        self.waitForLock = waitForLock
    }

    /// Whether `path` is selected by `paths`.
    func selects(_ path: String) -> Bool {
        if paths.isEmpty { return true }
        return paths.contains { prefix in
            let p = prefix.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            return p.isEmpty || path == p || path.hasPrefix(p + "/")
        }
    }
}

/// What a pull decided to do for one remote.
public struct SyncPlan: Sendable {
    public struct Item: Sendable {
        public var file: RemoteFile
        /// Bytes still to download.
        public var missingBytes: Int64
        /// The file was cached before in another version.
        public var changed: Bool
    }

    public var fetch: [Item] = []
    /// Paths of cached tracks whose remote files are gone.
    public var remove: [String] = []
    /// Files already complete and unchanged.
    public var upToDate: Int = 0

    public var fetchBytes: Int64 { fetch.reduce(0) { $0 + $1.missingBytes } }
}

/// Progress of a pull, for the command layer to render. Delivered in order per file.
public enum SyncEvent: Sendable {
    case listing(remote: String)
    case listed(remote: String, files: Int, kind: ListingKind)
    case planned(remote: String, plan: SyncPlan)
    case fileStarted(remote: String, path: String, size: Int64, missing: Int64)
    /// `bytes` more bytes of `path` arrived.
    case progress(remote: String, path: String, bytes: Int64)
    case fileFinished(remote: String, path: String, result: FileResult)
    case removed(remote: String, path: String, keptPinned: Bool)
    case warning(remote: String, message: String)
}

/// How one file ended.
public enum FileResult: Sendable {
    /// Complete and verified in tracks/; `fetched` bytes were downloaded in this run.
    case completed(fetched: Int64, verifiedWith: HashKind?)
    /// Head-first pass done: the first bytes are cached.
    case headCached(fetched: Int64)
    /// `exitCode` says why: `.unavailable` for a remote that kept failing after retries, `.partialFailure` otherwise.
    case failed(message: String, exitCode: ExitCode)
}

/// The outcome of a pull for one remote; `--json` prints it.
public struct SyncReport: Sendable, Codable {
    public struct Failure: Sendable, Codable {
        public var path: String
        public var error: String
        /// Not printed in JSON: used to choose the process exit code.
        public var exitCode: ExitCode = .partialFailure

        enum CodingKeys: String, CodingKey { case path, error }
    }

    public var remote: String
    public var provider: String
    public var listed = 0
    public var new = 0
    public var changed = 0
    public var deleted = 0
    public var fetchedFiles = 0
    public var fetchedBytes: Int64 = 0
    public var skipped = 0
    public var failed: [Failure] = []
    /// Folders (relative to the root, "" = the root) the provider could not read in this listing (403, malformed
    /// answer, over the size cap or the API deadline, too deep): their new tracks were not seen, their known ones
    /// are kept. Sorted.
    public var unreadableFolders: [String] = []
    /// The error that stopped the whole remote (listing failed, lock held), if any. Not in JSON when nil.
    public var fatal: String?

    enum CodingKeys: String, CodingKey {
        case remote, provider, listed, new, changed, deleted, skipped, failed, fatal
        case fetchedFiles = "fetched_files"
        case fetchedBytes = "fetched_bytes"
        case unreadableFolders = "unreadable_folders"
    }

    public init(remote: String, provider: String) {
        self.remote = remote
        self.provider = provider
    }

    /// 0 when nothing failed; 5 when every file failed because the remote stayed unavailable; else 1 (a file
    /// failed, or a folder could not be read, so its new tracks were not fetched).
    public var exitCode: ExitCode {
        if failed.isEmpty { return unreadableFolders.isEmpty ? .ok : .partialFailure }
        if fetchedFiles == 0, failed.allSatisfy({ $0.exitCode == .unavailable }) { return .unavailable }
        return .partialFailure
    }
}
