import CloudSyncCore
@testable import CloudSyncEngine
import Foundation
import Synchronization
import TestSupport
import Testing

/// `FetchRound`: workers take the files in order; commits report in the order they started, whatever order they
/// end in; the tally counts every file once; a failed commit stops the round.
@Suite(.timeLimit(.minutes(1))) struct FetchRoundTests {
    typealias Done = @Sendable (Result<FileResult, any Error>) -> Void

    /// Reports in the order they came, and the commits not ended yet.
    final class Log: Sendable {
        let reports = Mutex<[String]>([])
        let pending = Mutex<[(path: String, done: Done)]>([])

        func round(files: Int) -> FetchRound {
            FetchRound(files: files) { path, _ in self.reports.withLock { $0.append(path) } }
        }

        /// A commit that waits until the test ends it.
        func held(_ path: String) -> FileCommit {
            { done in self.pending.withLock { $0.append((path, done)) } }
        }

        func end(at index: Int, _ result: Result<FileResult, any Error>) {
            let commit = pending.withLock { $0.remove(at: index) }
            commit.done(result)
        }
    }

    struct Stop: Error {}

    @Test func everyFileIsTakenOnceInOrder() throws {
        let round = Log().round(files: 3)
        #expect(try round.take() == 0)
        #expect(try round.take() == 1)
        #expect(try round.take() == 2)
        #expect(try round.take() == nil)
        #expect(try round.take() == nil)
        #expect(try Log().round(files: 0).take() == nil)
    }

    @Test("seeded: a committed file is reported after every commit started before it", arguments: [0, 1, 2, 3])
    func commitsReportInTheOrderTheyStarted(variant: Int) async throws {
        let s = seed("FetchRoundTests.order") &+ UInt64(variant)
        var random = SeededRandom(seed: s)
        let count = 300
        let log = Log()
        let round = log.round(files: count)
        var committed: [String] = []
        var direct = 0
        while let index = try round.take() {
            let path = "f\(index)"
            switch Int.random(in: 0 ..< 4, using: &random) {
            case 0:
                round.finished(path, .failed(message: "no", exitCode: .partialFailure))
                direct += 1
            case 1:
                // A commit that ends at once, on the worker (a file already complete).
                committed.append(path)
                round.commit(path) { done in done(.success(.completed(fetched: 1, verifiedWith: nil))) }
            default:
                committed.append(path)
                round.commit(path, log.held(path))
            }
            // Some waiting commits end, in any order.
            while Int.random(in: 0 ..< 3, using: &random) == 0, case let waiting = log.pending.withLock({ $0.count }), waiting > 0 {
                log.end(at: Int.random(in: 0 ..< waiting, using: &random), .success(.completed(fetched: 1, verifiedWith: nil)))
            }
        }
        // The rest end side by side, from several threads, in any order.
        let rest = log.pending.withLock { p -> [Done] in
            defer { p = [] }
            return p.shuffled(using: &random).map(\.done)
        }
        DispatchQueue.concurrentPerform(iterations: rest.count) { rest[$0](.success(.completed(fetched: 1, verifiedWith: nil))) }
        await round.settled()
        let reports = log.reports.withLock { $0 }
        #expect(reports.count == count, "seed \(s)")
        #expect(Set(reports).count == count, "seed \(s): a file was reported twice")
        #expect(reports.filter(Set(committed).contains) == committed, "seed \(s)")
        let tally = round.tally
        #expect(tally.fetchedFiles == committed.count)
        #expect(tally.fetchedBytes == Int64(committed.count))
        #expect(tally.failed.count == direct)
        #expect(tally.finished.count == count)
        #expect(round.fatal == nil)
    }

    @Test func settledWaitsForEveryCommit() async throws {
        let log = Log()
        let round = log.round(files: 2)
        round.commit("a", log.held("a"))
        round.commit("b", log.held("b"))
        let settled = Atomic<Bool>(false)
        let waiter = Task {
            await round.settled()
            settled.store(true, ordering: .relaxed)
        }
        // "b" ends first: it waits to be reported after "a", and the round is not settled.
        log.end(at: 1, .success(.headCached(fetched: 5)))
        try await Task.sleep(for: .milliseconds(20))
        let early = settled.load(ordering: .relaxed)
        #expect(!early)
        #expect(log.reports.withLock { $0 }.isEmpty)
        log.end(at: 0, .success(.headCached(fetched: 7)))
        await waiter.value
        #expect(log.reports.withLock { $0 } == ["a", "b"])
        #expect(round.tally.headsCached == 2)
        #expect(round.tally.headBytes == 12)
        #expect(round.tally.finished.isEmpty, "a kept head may be fetched whole in a later round")
    }

    @Test func aFailedCommitStopsTheRoundAndIsNotReported() async throws {
        let log = Log()
        let round = log.round(files: 5)
        for _ in 0 ..< 3 {
            let index = try #require(try round.take())
            round.commit("f\(index)", log.held("f\(index)"))
        }
        log.end(at: 1, .failure(Stop()))
        #expect(round.fatal is Stop)
        #expect(throws: Stop.self) { try round.take() }
        log.end(at: 1, .success(.completed(fetched: 1, verifiedWith: nil)))
        log.end(at: 0, .success(.completed(fetched: 1, verifiedWith: nil)))
        await round.settled()
        #expect(log.reports.withLock { $0 } == ["f0", "f2"])
        // The first error stays the one thrown.
        round.stop(CancellationError())
        #expect(round.fatal is Stop)
    }

    @Test func theLastWorkerToLeaveIsTold() {
        let round = Log().round(files: 1)
        round.enter()
        round.enter()
        #expect(!round.leave())
        #expect(round.leave())
    }

    /// A head fetched in the heads' round of a file the tails' round completes counts as a file, not also as a
    /// head; a head whose file failed later stays a head; bytes count once each.
    @Test func aHeadCompletedLaterCountsAsAFile() {
        var heads = FetchTally()
        for path in ["a", "b", "c"] { heads.record(path, .headCached(fetched: 10)) }
        var tails = FetchTally()
        tails.record("a", .completed(fetched: 90, verifiedWith: nil))
        tails.record("b", .failed(message: "cut", exitCode: .partialFailure))
        heads.add(tails)
        #expect(heads.headsCached == 2 && heads.heads == ["b", "c"])
        #expect(heads.fetchedFiles == 1 && heads.fetchedBytes == 120 && heads.headBytes == 30)
        var report = SyncReport(remote: "r", provider: "webdav")
        heads.apply(to: &report)
        #expect(report.headsCached == 2 && report.fetchedFiles == 1 && report.failed.map(\.path) == ["b"])
    }
}
