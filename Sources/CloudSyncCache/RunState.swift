#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation

/// The last pull of one remote, as `cloudsync status` shows it (table `pull_runs`, one row per remote).
public struct PullRun: Sendable, Hashable {
    public enum Outcome: String, Sendable, Hashable {
        /// Started and not ended: running now if its pull lock is held, else killed.
        case running
        /// Every file fetched, every folder read.
        case ok
        /// Some files or folders failed (exit 1) or the remote was unavailable for every file (exit 5).
        case partial
        /// The remote stopped as a whole (listing failed, lock, disk).
        case failed
        /// Ctrl-C or SIGTERM: bytes fetched so far are kept.
        case interrupted
    }

    public var remote: String
    public var started: Date
    public var ended: Date?
    public var outcome: Outcome
    public var exitCode: Int32
    public var fetchedFiles: Int
    public var fetchedBytes: Int64
    public var failed: Int
    /// The first failure or the error that stopped the remote (already free of secrets: engine messages).
    public var message: String?

    public init(remote: String, started: Date, ended: Date? = nil, outcome: Outcome, exitCode: Int32 = 0,
                fetchedFiles: Int = 0, fetchedBytes: Int64 = 0, failed: Int = 0, message: String? = nil) {
        self.remote = remote
        self.started = started
        self.ended = ended
        self.outcome = outcome
        self.exitCode = exitCode
        self.fetchedFiles = fetchedFiles
        self.fetchedBytes = fetchedBytes
        self.failed = failed
        self.message = message
    }
}

/// A process of cloudsync that holds one of the cache's locks now.
public struct LockHolder: Sendable, Hashable {
    public var pid: Int32
    /// What the holder wrote into its lock file: a serve's URL; empty for a pull.
    public var detail: String
}

extension Cache {
    /// Records that a pull of `remote` started (replacing the previous run's row).
    public func recordPullStart(remote: String, at date: Date = Date()) throws(CacheError) {
        try recordPull(PullRun(remote: remote, started: date, outcome: .running))
    }

    /// Records how a pull ended.
    public func recordPull(_ run: PullRun) throws(CacheError) {
        try withDatabase { db throws(CacheError) in
            _ = try db.run("""
                INSERT OR REPLACE INTO pull_runs(remote, started, ended, outcome, exit_code, fetched_files, fetched_bytes, failed, message)
                VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [.text(run.remote), .real(run.started.timeIntervalSince1970),
                      run.ended.map { .real($0.timeIntervalSince1970) } ?? .null, .text(run.outcome.rawValue),
                      .int(Int64(run.exitCode)), .int(Int64(run.fetchedFiles)), .int(run.fetchedBytes),
                      .int(Int64(run.failed)), run.message.map { .text(String($0.prefix(2000))) } ?? .null])
        }
    }

    /// The last pull of every remote that has one, by remote name.
    public func pullRuns() throws(CacheError) -> [String: PullRun] {
        let runs = try withDatabase { db throws(CacheError) in
            try db.query("""
                SELECT remote, started, ended, outcome, exit_code, fetched_files, fetched_bytes, failed, message FROM pull_runs
                """) { row in
                PullRun(remote: row.text(0), started: Date(timeIntervalSince1970: row.double(1)),
                        ended: row.isNull(2) ? nil : Date(timeIntervalSince1970: row.double(2)),
                        outcome: PullRun.Outcome(rawValue: row.text(3)) ?? .failed,
                        exitCode: Int32(clamping: row.int(4)), fetchedFiles: Int(clamping: row.int(5)),
                        fetchedBytes: max(0, row.int(6)), failed: Int(clamping: row.int(7)), message: row.optionalText(8))
            }
        }
        return Dictionary(runs.map { ($0.remote, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// The process pulling `remote` now, if any. Read from the kernel's lock table, so asking never takes
    /// (and never disturbs) the lock itself.
    public func pullLockHolder(remote: String) -> LockHolder? {
        holder(ofLockFile: "pull-\(LocalPath.safeComponent(remote)).lock")
    }

    /// Every `cloudsync serve` on this cache now, with the URL it announced.
    public func serveHolders() -> [LockHolder] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("locks").path)) ?? []
        return names.filter { $0.hasPrefix("serve-") && $0.hasSuffix(".lock") }.sorted().compactMap { holder(ofLockFile: $0) }
    }

    /// Announces a running serve: an exclusive flock on `locks/serve-<pid>.lock` holding `url`, released (and the
    /// file removed) by ``ServeAnnouncement/withdraw()`` or when the process dies (the kernel drops the lock; a
    /// stale file is ignored by ``serveHolders()`` and replaced by the next serve with the same pid).
    public func announceServe(url: String) -> ServeAnnouncement? {
        let name = "serve-\(getpid()).lock"
        let fd = openat(locksFD, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            Glibc.close(fd)
            return nil
        }
        let bytes = Array(url.utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, bytes, bytes.count, 0)
        return ServeAnnouncement(fd: fd, name: name, locksFD: locksFD)
    }

    private func holder(ofLockFile name: String) -> LockHolder? {
        var info = stat()
        guard fstatat(locksFD, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        // Read to its end (``WholeFile``): Foundation stopped after the first 4 KiB, about 75 locks, fewer than a
        // desktop holds, and a running pull beyond them was reported "killed".
        guard let table = (try? WholeFile.read("/proc/locks", limit: 64 << 20)).map({ String(decoding: $0, as: UTF8.self) }),
              let pid = KernelLockTable.holder(in: table, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        else { return nil }
        var detail = ""
        let fd = openat(locksFD, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd >= 0 {
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = pread(fd, &buffer, buffer.count, 0)
            Glibc.close(fd)
            if n > 0 { detail = String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
        }
        // A pull lock holds the holder's pid; only a serve's detail is worth showing.
        return LockHolder(pid: pid, detail: name.hasPrefix("serve-") ? detail : "")
    }
}

/// A serve's announcement in `locks/` (see ``Cache/announceServe(url:)``).
public final class ServeAnnouncement: @unchecked Sendable {
    private var fd: Int32
    private let name: String
    private let locksFD: Int32

    init(fd: Int32, name: String, locksFD: Int32) {
        self.fd = fd
        self.name = name
        self.locksFD = locksFD
    }

    public func withdraw() {
        guard fd >= 0 else { return }
        _ = unlinkat(locksFD, name, 0)
        Glibc.close(fd)
        fd = -1
    }

    deinit { withdraw() }
}

/// Reads Linux's `/proc/locks` (proc(5)): `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`, where the device is
/// `major:minor` in hex and the inode in decimal. Blocked waiters (`->` lines) are not holders.
public enum KernelLockTable {
    public static func holder(in table: String, device: UInt64, inode: UInt64) -> Int32? {
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] != "->", fields[1] == "FLOCK" else { continue }
            let parts = fields[5].split(separator: ":")
            guard parts.count == 3, let maj = UInt64(parts[0], radix: 16), let min = UInt64(parts[1], radix: 16),
                  let ino = UInt64(parts[2]), maj == major, min == minor, ino == inode,
                  let pid = Int32(fields[4]) else { continue }
            return pid
        }
        return nil
    }
}
