import CloudSyncCore
import Foundation

/// The one bounded, concurrent breadth-first folder walk of the providers that list folder by folder (WebDAV
/// PROPFIND Depth 1, Yandex folder pages).
public enum FolderWalk {
    /// Reads `start` and every job `handle` returns, at most `concurrency` reads at once, started in the order they
    /// were queued (breadth-first). `handle` sees one outcome at a time on the caller's task, in completion order, and
    /// returns the jobs to queue next. A throw from `read` or `handle` cancels the reads in flight and ends the walk.
    public static func run<Job: Sendable, Outcome: Sendable>(
        start: [Job], concurrency: Int, read: @escaping @Sendable (Job) async throws -> Outcome,
        handle: (Outcome) throws -> [Job]
    ) async throws {
        var queue = start
        var next = 0
        try await withThrowingTaskGroup(of: Outcome.self) { group in
            var inFlight = 0
            while true {
                while inFlight < max(1, concurrency), next < queue.count {
                    let job = queue[next]
                    next += 1
                    inFlight += 1
                    group.addTask { try await read(job) }
                }
                guard let outcome = try await group.next() else { break }
                inFlight -= 1
                do {
                    queue += try handle(outcome)
                } catch {
                    group.cancelAll()
                    throw error
                }
            }
        }
    }
}

/// The folders a walk has met, held to its `WalkLimits`: each folder is listed once, a folder deeper than
/// `maxDepth` is not listed but reported, and one folder more than `maxFolders` ends the walk.
public struct WalkFrontier: Sendable {
    public let limits: WalkLimits
    public let remote: String
    /// The configured root, as the user wrote it (for the error message).
    public let root: String
    public private(set) var visited: Set<[String]>

    /// `start` is the walk's first folder (segments), already visited.
    public init(limits: WalkLimits, remote: String, root: String, start: [String]) {
        self.limits = limits
        self.remote = remote
        self.root = root
        visited = [start]
    }

    /// Sorts the subfolders a folder answered: those not met before and within `maxDepth` (by `depth`) are to be
    /// listed; deeper ones are returned by `shown` name, to be reported in `skippedFolders`. Throws
    /// `WalkLimits.tooManyFolders` once more than `maxFolders` folders were met.
    public mutating func admit(_ subfolders: [[String]], depth: ([String]) -> Int, shown: ([String]) -> String) throws
        -> (list: [[String]], tooDeep: [String]) {
        var list: [[String]] = []
        var tooDeep: [String] = []
        for sub in subfolders where !visited.contains(sub) {
            visited.insert(sub)
            if depth(sub) > limits.maxDepth {
                tooDeep.append(shown(sub))
                continue
            }
            guard visited.count <= limits.maxFolders else { throw limits.tooManyFolders(remote: remote, root: root) }
            list.append(sub)
        }
        return (list, tooDeep)
    }
}
