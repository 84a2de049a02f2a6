import CloudSyncCore
import Synchronization

/// A file's commit to the cache, started without waiting (a verified file's promotion, or a kept head's last
/// checkpoint: both join the cache's group commit): `done` gets its result, on the cache's writer queue.
typealias FileCommit = @Sendable (_ done: @escaping @Sendable (Result<FileResult, any Error>) -> Void) -> Void

/// What a pull's fetch rounds came to: counts for the report, and which files ended (completed or failed).
struct FetchTally: Sendable {
    var fetchedFiles = 0
    var fetchedBytes: Int64 = 0
    var headBytes: Int64 = 0
    var failed: [SyncReport.Failure] = []
    /// Files completed or failed: no later round of the pull tries them again.
    var finished: Set<String> = []
    /// Files whose head was cached and that did not complete in the rounds tallied here (a head fetched in the
    /// heads' round and completed in the tails' counts as a file, not also as a head).
    private(set) var heads: Set<String> = []
    private var completed: Set<String> = []

    /// Heads cached by the rounds, of files that did not complete.
    var headsCached: Int { heads.count }

    mutating func record(_ path: String, _ result: FileResult) {
        switch result {
        case .completed(let fetched, _):
            fetchedFiles += 1
            fetchedBytes += fetched
            finished.insert(path)
            completed.insert(path)
            heads.remove(path)
        case .failed(let message, let code):
            failed.append(.init(path: path, error: message, exitCode: code))
            finished.insert(path)
        case .headCached(let fetched):
            fetchedBytes += fetched
            headBytes += fetched
            if !completed.contains(path) { heads.insert(path) }
        }
    }

    /// Adds the tally of a later round.
    mutating func add(_ other: FetchTally) {
        fetchedFiles += other.fetchedFiles
        fetchedBytes += other.fetchedBytes
        headBytes += other.headBytes
        failed += other.failed
        finished.formUnion(other.finished)
        completed.formUnion(other.completed)
        heads.formUnion(other.heads)
        heads.subtract(completed)
    }

    /// Adds the counts to `report`; failures in path order (completion order depends on the network).
    func apply(to report: inout SyncReport) {
        report.fetchedFiles += fetchedFiles
        report.fetchedBytes += fetchedBytes
        report.headBytes += headBytes
        report.headsCached += headsCached
        report.failed += failed
        report.failed.sort { $0.path < $1.path }
    }
}

/// The shared state of one fetch round of ``Sync`` (`forEach`): its workers take the files in order; a file whose
/// commit joins the cache's group commit is handed over (``commit(_:_:)``) and its worker goes on to the next file
/// at once. A commit reports from the writer queue when it ends, in the order the commits were started (a group
/// commit's files end together, their callbacks in any order): each file is reported once those started before it
/// are. Before, each file took a task of its own for its fetch and another for its commit, and the round's parent
/// task woke for both: ~7 task resumptions per file, now 2–3 (the transfer's end, the open gate).
final class FetchRound: Sendable {
    private enum Commit {
        case running(path: String)
        case ended(path: String, result: FileResult?)
    }

    private struct State {
        var next = 0
        var workers = 0
        /// The first error that stops the round: no file is taken after it.
        var fatal: (any Error)?
        /// Commits started and not reported yet, by the order they started in.
        var commits: [Int: Commit] = [:]
        var started = 0
        var reported = 0
        var tally = FetchTally()
        var settled: CheckedContinuation<Void, Never>?
    }

    let files: Int
    private let report: @Sendable (_ path: String, FileResult) -> Void
    private let state = Mutex(State())

    /// `report` is called once per file with its result (the pull's `fileFinished` event).
    init(files: Int, report: @escaping @Sendable (_ path: String, FileResult) -> Void) {
        self.files = files
        self.report = report
    }

    /// A worker starts.
    func enter() { state.withLock { $0.workers += 1 } }

    /// A worker ends; true for the last one (no file is being fetched any more).
    func leave() -> Bool {
        state.withLock { s in
            s.workers -= 1
            return s.workers == 0
        }
    }

    /// The next file's index, or nil when every file was taken. Throws the error that stopped the round.
    func take() throws -> Int? {
        try state.withLock { s throws -> Int? in
            if let fatal = s.fatal { throw fatal }
            guard s.next < files else { return nil }
            s.next += 1
            return s.next - 1
        }
    }

    /// Stops the round: no file is taken after this; `fatal` is thrown (the first one).
    func stop(_ error: any Error) {
        state.withLock { s in if s.fatal == nil { s.fatal = error } }
    }

    var fatal: (any Error)? { state.withLock { $0.fatal } }
    var tally: FetchTally { state.withLock { $0.tally } }

    /// `path` ended with `result` without a commit to wait for.
    func finished(_ path: String, _ result: FileResult) {
        state.withLock { $0.tally.record(path, result) }
        report(path, result)
    }

    /// Starts `path`'s commit; it is reported when it ends and those started before it are reported.
    func commit(_ path: String, _ start: FileCommit) {
        let number = state.withLock { s -> Int in
            s.started += 1
            s.commits[s.started - 1] = .running(path: path)
            return s.started - 1
        }
        start { outcome in self.ended(number, outcome) }
    }

    private func ended(_ number: Int, _ outcome: Result<FileResult, any Error>) {
        let settled = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard case .running(let path) = s.commits[number] else { return nil }
            switch outcome {
            case .success(let result): s.commits[number] = .ended(path: path, result: result)
            case .failure(let error):
                // It stops the run: the file is not reported.
                if s.fatal == nil { s.fatal = error }
                s.commits[number] = .ended(path: path, result: nil)
            }
            // Reported under the lock: commits end on one queue, but a file already complete ends on its worker.
            while case .ended(let path, let result) = s.commits[s.reported] {
                s.commits[s.reported] = nil
                s.reported += 1
                if let result {
                    s.tally.record(path, result)
                    report(path, result)
                }
            }
            guard s.reported == s.started else { return nil }
            defer { s.settled = nil }
            return s.settled
        }
        settled?.resume()
    }

    /// Returns once every commit started has ended (call it once the workers have ended).
    func settled() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.reported == s.started { return true }
                s.settled = c
                return false
            }
            if now { c.resume() }
        }
    }
}
