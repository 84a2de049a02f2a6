@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Glibc
import Testing
import TestSupport

/// What `cloudsync status` reads: the last pull per remote, and who holds the cache's locks now (#25).
@Suite struct RunStateTests {
    /// Lines as proc(5) documents them, including a blocked waiter (`->`), POSIX locks and other devices.
    @Test(arguments: [
        ("1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF\n", UInt64(0x0801), UInt64(131), Int32?.some(4242)),
        ("1: POSIX  ADVISORY  WRITE 99 08:01:131 0 EOF\n", 0x0801, 131, nil),
        ("1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 77 08:01:131 0 EOF\n", 0x0801, 131, 4242),
        ("1: -> FLOCK  ADVISORY  WRITE 77 08:01:131 0 EOF\n", 0x0801, 131, nil),
        ("2: FLOCK  ADVISORY  WRITE 12 00:2e:131 0 EOF\n", 0x0801, 131, nil),
        ("2: FLOCK  ADVISORY  WRITE 12 00:2e:131 0 EOF\n", 0x002e, 131, 12),
        ("3: FLOCK  ADVISORY  READ 12 103:02:9 0 EOF\n", (0x103 << 8) | 0x02, 9, 12),
        ("garbage\n\n: : :\n1: FLOCK ADVISORY WRITE x 08:01:131 0 EOF\n", 0x0801, 131, nil),
    ] as [(String, UInt64, UInt64, Int32?)])
    func kernelLockTable(table: String, device: UInt64, inode: UInt64, holder: Int32?) {
        #expect(KernelLockTable.holder(in: table, device: device, inode: inode) == holder)
    }

    @Test func lastPullRoundTripsAndReplacesThePreviousOne() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        #expect(try cache.pullRuns().isEmpty)
        let started = Date(timeIntervalSince1970: 1_800_000_000)
        try cache.recordPullStart(remote: "nas", at: started)
        #expect(try cache.pullRuns()["nas"]?.outcome == .running)
        let done = PullRun(remote: "nas", started: started, ended: started.addingTimeInterval(12), outcome: .partial,
                           exitCode: 1, fetchedFiles: 3, fetchedBytes: 1 << 40, failed: 2, message: "a.mp3: 404")
        try cache.recordPull(done)
        try cache.recordPull(PullRun(remote: "other", started: started, outcome: .running))
        let runs = try cache.pullRuns()
        #expect(runs["nas"] == done)
        #expect(runs.count == 2)
    }

    /// The holder is read from the kernel's table: this process's own flock shows, and asking never takes it
    /// (a second process's non-blocking attempt would fail while we hold it, and still succeeds after).
    @Test func pullLockHolderIsSeenWithoutTakingTheLock() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        #expect(cache.pullLockHolder(remote: "nas") == nil)
        let lock = try await cache.pullLock(remote: "nas", wait: false)
        #expect(cache.pullLockHolder(remote: "nas")?.pid == getpid())
        lock.release()
        #expect(cache.pullLockHolder(remote: "nas") == nil)
        // Still free to take: status did not leave it held.
        try await cache.pullLock(remote: "nas", wait: false).release()
    }

    /// With more locks in the kernel's table than fit its first 4 KiB (a desktop's programs, a pull's entry locks),
    /// the holder is still found: the table is read to its end.
    @Test func pullLockHolderIsSeenBehindHundredsOfOtherLocks() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        var others: [Int32] = []
        defer { for fd in others { close(fd) } }
        for i in 0 ..< 300 {
            let fd = open(dir.url.appendingPathComponent("other-\(i)").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            try #require(fd >= 0 && flock(fd, LOCK_EX) == 0)
            others.append(fd)
        }
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        let lock = try await cache.pullLock(remote: "nas", wait: false)
        #expect(cache.pullLockHolder(remote: "nas")?.pid == getpid())
        lock.release()
    }

    @Test func serveAnnouncementIsListedUntilWithdrawn() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        #expect(cache.serveHolders().isEmpty)
        let announcement = try #require(cache.announceServe(url: "http://127.0.0.1:8765/"))
        #expect(cache.serveHolders() == [LockHolder(pid: getpid(), detail: "http://127.0.0.1:8765/")])
        announcement.withdraw()
        #expect(cache.serveHolders().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("locks/serve-\(getpid()).lock").path))
        // A stale file (a serve killed with -9) holds no lock and is not listed.
        _ = FileManager.default.createFile(atPath: dir.url.appendingPathComponent("locks/serve-1.lock").path, contents: Data("http://x/".utf8))
        #expect(cache.serveHolders().isEmpty)
    }
}
