@testable import CloudSyncCache
import CloudSyncCore
import Dispatch
import Foundation
import Synchronization
import Testing
import TestSupport

/// The cache's writer (#23): checkpoints run off the caller's thread and lag it, never claiming bytes before they
/// are durable; completed files are promoted in group commits whose syncs are issued together; waiting for an
/// entry's lock parks no thread and ends on cancellation.
@Suite struct CacheWriterTests {
    /// How long a step of the writer may take before it counts as never happening. Generous: synchronous tests
    /// that wait on child processes (ProcessTests' kill loops; the engine's command-line tests when both targets
    /// run in one process) hold the two cooperative threads of a 2-core machine, and a task started by these
    /// tests then waits for one: a loaded CI machine once stalled a promotion's first sync past 10 s, and both
    /// targets in one `swift test` started a `Task { promote() }` only after 17.9 s (past 30 s in 3 of 4 runs).
    /// Only a failing test waits this long.
    static let patience = 120.0

    /// An `fdatasync` that blocks while the gate is closed, counting calls and how many are inside at once.
    final class GatedSync: Sendable {
        let gate = DispatchSemaphore(value: 0)
        let closed = Atomic<Bool>(true)
        let calls = Atomic<Int>(0)
        let running = Atomic<Int>(0)
        let failWith = Atomic<Int32>(0)

        var io: FileIO {
            var io = FileIO.system
            let real = FileIO.system
            io.fdatasync = { [self] fd throws(Errno) in
                calls.add(1, ordering: .relaxed)
                running.add(1, ordering: .relaxed)
                if closed.load(ordering: .relaxed) { gate.wait() }
                running.subtract(1, ordering: .relaxed)
                let e = failWith.load(ordering: .relaxed)
                if e != 0 { throw Errno(e) }
                try real.fdatasync(fd)
            }
            return io
        }

        /// Lets every blocked and later call through.
        func open() {
            closed.store(false, ordering: .relaxed)
            for _ in 0 ..< 64 { gate.signal() }
        }

        /// Lets one blocked call through; the gate stays closed.
        func letOneThrough() { gate.signal() }
    }

    /// A cache in `dir` whose `fdatasync` is `sync`'s, checkpointing every 100 bytes, and a writer of its 1000-byte
    /// `r:a.mp3`.
    func gatedWriter(in dir: TemporaryDirectory, _ sync: GatedSync) throws -> (Cache, EntryWriter) {
        let cache = try Cache.open(root: dir.url, limits: CacheLimits(checkpointBytes: 100, checkpointInterval: .seconds(3600)),
                                   io: sync.io)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: 1000))
        return (cache, try cache.openWriter(remote: "r", path: "a.mp3"))
    }

    /// A checkpoint stuck behind a slow disk holds the transfer back: once two checkpoints' worth of bytes wait
    /// to be durable the writer takes no more (the transport pauses), and takes them again when the sync ends. So
    /// a kill -9 loses at most about two checkpoints of a file, however slow the disk (bench/README Findings 7).
    @Test func aLaggingCheckpointHoldsTheTransferBack() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let sync = GatedSync()
        let (_, writer) = try gatedWriter(in: dir, sync)
        try writer.writePattern(0 ..< 120)
        try writer.checkpointIfDue()
        #expect(await eventually(Self.patience) { sync.calls.load(ordering: .relaxed) == 1 })
        // The sync of the first 120 bytes is stuck; the next 79 still fit (120 + 79 < 2 × 100).
        #expect(writer.acceptsBytes)
        try writer.writePattern(120 ..< 199)
        try writer.checkpointIfDue()
        #expect(writer.acceptsBytes)
        try writer.writePattern(199 ..< 210)
        #expect(!writer.acceptsBytes, "210 bytes wait for a sync that does not end: no more until it does")
        sync.open()
        #expect(await eventually(Self.patience) { writer.acceptsBytes })
        try await writer.flush()
        #expect(writer.acceptsBytes)
        writer.close()
    }

    @Test func aDueCheckpointRunsOnTheWriterAndTheIndexClaimsOnlySyncedBytes() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let sync = GatedSync()
        let (cache, writer) = try gatedWriter(in: dir, sync)
        let reader = try cache.openReader(remote: "r", path: "a.mp3")
        try writer.writePattern(0 ..< 300)
        // Returns while the sync it asked for is blocked: the caller (a network thread) never waits for it.
        try writer.checkpointIfDue()
        #expect(await eventually(Self.patience) { sync.calls.load(ordering: .relaxed) == 1 })
        // The writer sees its own bytes; the index claims nothing until they are durable.
        #expect(writer.presentRanges().ranges.map { $0 } == [0 ..< 300])
        #expect(try reader.presentRanges().isEmpty)
        // One checkpoint at a time: more writes while it runs queue no second one.
        try writer.writePattern(300 ..< 500)
        try writer.checkpointIfDue()
        sync.open()
        #expect(try await eventually(Self.patience) { try !reader.presentRanges().isEmpty })
        #expect(try reader.presentRanges().isSuperset(of: ByteRanges(0 ..< 300)))
        try await writer.flush()
        #expect(try reader.presentRanges().ranges.map { $0 } == [0 ..< 500])
        #expect(sync.calls.load(ordering: .relaxed) == 2)
        writer.close()
    }

    @Test func aFailedBackgroundCheckpointIsThrownOnceByTheNextCall() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let sync = GatedSync()
        sync.open()
        let cache = try Cache.open(root: dir.url, limits: CacheLimits(checkpointBytes: 100, checkpointInterval: .seconds(3600)),
                                   io: sync.io)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: 1000))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0 ..< 200)
        try await writer.flush()
        sync.failWith.store(ENOSPC, ordering: .relaxed)
        try writer.writePattern(200 ..< 400)
        try writer.checkpointIfDue()
        try await writer.flush()  // behind the queued checkpoint, which failed; nothing is pending now
        let error = #expect(throws: CacheError.self) { try writer.checkpointIfDue() }
        #expect(error?.code == .diskFull)
        try writer.checkpointIfDue()  // reported once
        // The failed bytes are not claimed and must be fetched again.
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.presentBytes == 200)
        #expect(writer.missingRanges().ranges.map { $0 } == [200 ..< 1000])
        writer.close()
    }

    /// Files that complete while a batch syncs form the next batch, whose syncs all run at once; an entry removed
    /// meanwhile fails alone and the others reach `tracks/`.
    @Test func filesCompletingDuringABatchAreCommittedTogether() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let sync = GatedSync()
        let cache = try Cache.open(root: dir.url, io: sync.io)
        let names = (0 ..< 6).map { "Album \($0 % 2)/t\($0).mp3" }
        try cache.upsert(remote: "r", files: names.map { remoteFile($0, size: 500) })
        let writers = try names.map { try cache.openWriter(remote: "r", path: $0) }
        for writer in writers { try writer.writePattern(0 ..< 500) }
        for writer in writers { try writer.verify(expectedHash: nil) { _ in nil } }
        // The first promotion's sync blocks the writer queue; five more queue up behind it.
        let first = Task { try await writers[0].promote() }
        #expect(await eventually(Self.patience) { sync.calls.load(ordering: .relaxed) == 1 })
        let rest = writers.dropFirst().map { writer in Task { () async -> CacheError? in
            do throws(CacheError) { try await writer.promote(); return nil } catch { return error }
        } }
        try await Task.sleep(for: .milliseconds(50))
        try cache.remove(remote: "r", path: names[3])
        sync.letOneThrough()
        try await first.value
        // The second batch's five syncs are all issued before any returns: with the gate still closed, five are
        // blocked at once (one after the other, a second would never start).
        #expect(await eventually(Self.patience) { sync.running.load(ordering: .relaxed) == 5 })
        sync.open()
        var failures: [CacheError?] = []
        for task in rest { failures.append(await task.value) }
        #expect(failures.map { $0?.code } == [nil, nil, .changed, nil, nil])
        #expect(sync.calls.load(ordering: .relaxed) == 6)
        for (i, name) in names.enumerated() where i != 3 {
            let entry = try #require(try cache.entry(remote: "r", path: name))
            #expect(entry.state == .complete)
            #expect(try Data(contentsOf: entry.localURL) == Data(pattern(0 ..< 500)))
        }
        #expect(try cache.entry(remote: "r", path: names[3]) == nil)
        #expect(!FileManager.default.fileExists(atPath: cache.tracksURL.appendingPathComponent("r/Album 1/t3.mp3").path))
        for writer in writers { writer.close() }
    }

    /// A batch's barrier writes every file out before any `fdatasync` (all writes started, then each waited for),
    /// so the syncs find their data on disk and share one journal commit. A write-out error is that file's
    /// failure and its fdatasync is skipped (the kernel reports a write error once, so the fdatasync after it
    /// would succeed without the bytes); a write-out the file does not support (EINVAL) or a sandbox forbids
    /// (EPERM) leaves it to fdatasync.
    @Test func theBarrierWritesEveryFileOutBeforeAnySync() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let fds = try (0 ..< 5).map { i -> Int32 in
            let fd = open(dir.url.appendingPathComponent("f\(i)").path, O_RDWR | O_CREAT, 0o600)
            try #require(fd >= 0)
            try #require(write(fd, "bytes \(i)", 7) == 7)
            return fd
        }
        defer { for fd in fds { close(fd) } }
        let log = Mutex<[String]>([])
        var io = FileIO.system
        let real = FileIO.system
        io.writeOut = { fd, wait throws(Errno) in
            let i = fds.firstIndex(of: fd) ?? -1
            log.withLock { $0.append("\(wait ? "wait" : "start") \(i)") }
            if wait && i == 1 { throw Errno(EIO) }
            if !wait && i == 3 { throw Errno(EINVAL) }
            if wait && i == 4 { throw Errno(EPERM) }
            try real.writeOut(fd, wait)
        }
        io.fdatasync = { fd throws(Errno) in
            log.withLock { $0.append("sync \(fds.firstIndex(of: fd) ?? -1)") }
            try real.fdatasync(fd)
        }
        let errors = CacheWriter.syncTogether(fds, io: io)
        #expect(errors.map { $0?.rawValue } == [nil, EIO, nil, nil, nil])
        let calls = log.withLock { $0 }
        #expect(Array(calls.prefix(10)) == ["start 0", "start 1", "start 2", "start 3", "start 4",
                                            "wait 0", "wait 1", "wait 2", "wait 3", "wait 4"])
        #expect(Set(calls.dropFirst(10)) == ["sync 0", "sync 2", "sync 3", "sync 4"])
        #expect(calls.count == 14)
        // The real call, on real files: no error.
        #expect(CacheWriter.syncTogether(fds, io: .system).allSatisfy { $0 == nil })
    }

    /// A group commit waits `batchDelay` for more files (here an hour) unless the cache is told to hurry (a pull
    /// with no file left to fetch): then the waiting batch runs at once, and so does each one queued while it
    /// hurries; once told to stop, commits wait again.
    @Test func hurriedPromotionsDoNotWaitForMoreFiles() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        var cache = try Cache.open(root: dir.url, limits: CacheLimits(batchDelay: .seconds(3600)))
        let names = ["a.mp3", "b.mp3", "c.mp3"]
        try cache.upsert(remote: "r", files: names.map { remoteFile($0, size: 300) })
        var writers = try names.map { try cache.openWriter(remote: "r", path: $0) }
        for writer in writers {
            try writer.writePattern(0 ..< 300)
            try writer.verify(expectedHash: nil) { _ in nil }
        }
        func promoting(_ writer: EntryWriter) -> Task<CacheError?, Never> {
            Task { () async -> CacheError? in
                do throws(CacheError) { try await writer.promote(); return nil } catch { return error }
            }
        }
        func complete(_ name: String) -> Bool { (try? cache.entry(remote: "r", path: name))??.state == .complete }
        // (A promotion that never runs is not awaited: the test fails instead of waiting the hour.)
        // Queued first, then hurried: the waiting batch runs now.
        let first = promoting(writers[0])
        #expect(await eventually(Self.patience) { cache.writer.waitingCount == 1 })
        cache.hurryPromotions(true)
        try #require(await eventually(Self.patience) { complete("a.mp3") })
        #expect(await first.value == nil)
        // Queued while hurrying: runs at once.
        let second = promoting(writers[1])
        try #require(await eventually(Self.patience) { complete("b.mp3") })
        #expect(await second.value == nil)
        // Not hurrying any more: the next one waits for its batch's delay, until told again.
        cache.hurryPromotions(false)
        let third = promoting(writers[2])
        #expect(await eventually(Self.patience) { cache.writer.waitingCount == 1 })
        #expect(!complete("c.mp3"))
        cache.hurryPromotions(true)
        try #require(await eventually(Self.patience) { complete("c.mp3") })
        #expect(await third.value == nil)
        for writer in writers { writer.close() }
        writers = []
        // The delayed runs of the hurried batches (due in an hour) do not keep the cache open: released, it closes
        // its index (no WAL left behind).
        weak let released = cache
        cache = try Cache.open(root: dir.url)
        #expect(released == nil, "a delayed batch still holds the cache")
    }

    /// A cache in `dir` with one entry, r:a.mp3 of `size` bytes, and its writer holding all of them.
    static func written(_ size: Int64, in dir: TemporaryDirectory) throws -> (Cache, EntryWriter) {
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: size))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0 ..< size)
        return (cache, writer)
    }

    @Test func promotionNeedsAVerificationSinceTheLastWrite() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let (cache, writer) = try Self.written(100, in: dir)
        let unverified = await #expect(throws: CacheError.self) { try await writer.promote() }
        #expect(unverified?.code == .incomplete)
        try writer.verify(expectedHash: ContentHash(kind: .sha256, value: "pattern"), verify: patternVerifier)
        try writer.writePattern(0 ..< 10)
        await #expect(throws: CacheError.self) { try await writer.promote() }
        try writer.verify(expectedHash: ContentHash(kind: .sha256, value: "pattern"), verify: patternVerifier)
        try await writer.promote()
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .complete)
        writer.close()
    }

    /// Bytes dropped after the verification, while the promotion waits in its batch (a damaged block found by a
    /// reader), are never promoted: the batch sees the verification gone and fails that file alone; the index
    /// keeps the hole, so it is fetched again.
    @Test func bytesDroppedWhileAPromotionIsQueuedAreNotPromoted() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let sync = GatedSync()
        let cache = try Cache.open(root: dir.url, io: sync.io)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: 500))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0 ..< 500)
        try writer.verify(expectedHash: nil) { _ in nil }
        let promotion = Task { () async -> CacheError? in
            do throws(CacheError) { try await writer.promote(); return nil } catch { return error }
        }
        // The batch holds the file at its durability barrier; the drop lands before the rename.
        #expect(await eventually(Self.patience) { sync.calls.load(ordering: .relaxed) == 1 })
        try writer.discard(100 ..< 200)
        sync.open()
        let failure = await promotion.value
        #expect(failure?.code == .incomplete, "\(String(describing: failure))")
        let entry = try cache.entry(remote: "r", path: "a.mp3")
        #expect(entry?.state != .complete, "\(String(describing: entry))")
        #expect(writer.missingRanges().ranges.map { $0 } == [100 ..< 200])
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("tracks/r/a.mp3").path))
        // Fetched again, verified again: promoted.
        try writer.writePattern(100 ..< 200)
        try writer.verify(expectedHash: nil) { _ in nil }
        try await writer.promote()
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .complete)
        writer.close()
    }

    /// Bytes dropped while the verification runs — after its check that every byte is there, before it marks
    /// the file verified (a reader found a damaged block meanwhile) — are not promoted either: the mark is given
    /// only if every byte is still there. (serve met this: a file promoted with a dropped block, which the index
    /// then vouched for.)
    @Test func bytesDroppedDuringTheVerificationAreNotPromoted() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let (cache, writer) = try Self.written(500, in: dir)
        // The hash is computed from the file while the block is dropped: the drop lands inside verify.
        let lost = #expect(throws: CacheError.self) {
            try writer.verify(expectedHash: ContentHash(kind: .sha256, value: "pattern")) { url in
                try writer.discard(100 ..< 200)
                return try patternVerifier(url)
            }
        }
        #expect(lost?.code == .incomplete, "\(String(describing: lost))")
        let unverified = await #expect(throws: CacheError.self) { try await writer.promote() }
        #expect(unverified?.code == .incomplete)
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state != .complete)
        #expect(writer.missingRanges().ranges.map { $0 } == [100 ..< 200])
        try writer.writePattern(100 ..< 200)
        try writer.verify(expectedHash: ContentHash(kind: .sha256, value: "pattern"), verify: patternVerifier)
        try await writer.promote()
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .complete)
        writer.close()
    }

    /// A writer's validator and start set are not a transaction of their own each: they reach the index with
    /// the first commit of the bytes they vouch for (a checkpoint), with the promotion of a file that completed
    /// without one, or when the writer closes; a complete entry records them at once. Never later than its bytes.
    @Test func validatorAndStartSetReachTheIndexWithTheBytesTheyVouchFor() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url, limits: CacheLimits(checkpointBytes: 100, checkpointInterval: .seconds(3600)))
        try cache.upsert(remote: "r", files: [remoteFile("a.mp3"), remoteFile("b.mp3"), remoteFile("c.mp3")])
        let startSet = ByteRanges(0 ..< 300)

        // a: set, then bytes: the checkpoint that claims them writes both.
        let a = try cache.openWriter(remote: "r", path: "a.mp3")
        try a.setValidator("\"v1\"")
        try a.setStartSet(startSet, tags: #"{"title":"A"}"#, duration: 42)
        #expect(try cache.row(remote: "r", path: "a.mp3")?.validator == nil, "written on its own")
        try a.writePattern(0 ..< 300)
        try a.checkpoint()
        var row = try #require(try cache.row(remote: "r", path: "a.mp3"))
        #expect(row.validator == "\"v1\"" && row.startSet == startSet && row.tags == #"{"title":"A"}"# && row.duration == 42)
        #expect(row.head && row.ranges == ByteRanges(0 ..< 300))
        a.close()

        // b: the whole file arrives before any checkpoint: its promotion writes them with the track.
        let b = try cache.openWriter(remote: "r", path: "b.mp3")
        try b.setValidator("\"v2\"")
        try b.setStartSet(startSet, tags: nil, duration: 7)
        try b.writePattern(0 ..< 1000)
        try await b.complete(expectedHash: ContentHash(kind: .sha256, value: "pattern"), verify: patternVerifier)
        row = try #require(try cache.row(remote: "r", path: "b.mp3"))
        #expect(row.validator == "\"v2\"" && row.startSet == startSet && row.duration == 7 && row.head)
        #expect(try cache.entry(remote: "r", path: "b.mp3")?.state == .complete)
        // Complete: a later start set is written at once.
        try b.setStartSet(ByteRanges(0 ..< 10), tags: nil, duration: 8)
        #expect(try cache.row(remote: "r", path: "b.mp3")?.duration == 8)
        b.close()

        // c: no bytes at all: closing writes them.
        let c = try cache.openWriter(remote: "r", path: "c.mp3")
        try c.setValidator("\"v3\"")
        try c.setStartSet(startSet, tags: nil, duration: 1)
        c.close()
        row = try #require(try cache.row(remote: "r", path: "c.mp3"))
        #expect(row.validator == "\"v3\"" && row.startSet == startSet && !row.head)
        // The next writer of the entry starts from them.
        let again = try cache.openWriter(remote: "r", path: "c.mp3")
        #expect(again.validator == "\"v3\"" && again.startSet == startSet)
        again.close()
    }

    @Test func waitingForAnEntryLockEndsWhenItIsFreeOrCancelled() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("a.mp3", size: 100), remoteFile("b.mp3", size: 100)])
        let holder = try cache.openWriter(remote: "r", path: "a.mp3")
        let busy = Mutex(0)
        let waiter = Task { try await cache.openWriterWaiting(remote: "r", path: "a.mp3", busy: { busy.withLock { $0 += 1 } }) }
        try await Task.sleep(for: .milliseconds(30))
        holder.close()
        let second = try await waiter.value
        #expect(second.path == "a.mp3")
        // Told once that it had to wait (the back-off ran several rounds meanwhile).
        #expect(busy.withLock { $0 } == 1)
        // While `second` holds it, a cancelled waiter gives up with CancellationError.
        let cancelled = Task { try await cache.openWriterWaiting(remote: "r", path: "a.mp3") }
        try await Task.sleep(for: .milliseconds(30))
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        second.close()
        // A free entry opens at once, without calling `busy`; an unknown one is not waited for.
        try await cache.openWriterWaiting(remote: "r", path: "b.mp3", busy: { busy.withLock { $0 += 1 } }).close()
        #expect(busy.withLock { $0 } == 1)
        let unknown = await #expect(throws: CacheError.self) { try await cache.openWriterWaiting(remote: "r", path: "zzz.mp3") }
        #expect(unknown?.code == .notFound)
    }
}
