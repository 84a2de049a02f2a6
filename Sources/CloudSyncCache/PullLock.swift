#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation
import Synchronization

extension Cache {
    /// Takes the per-remote pull lock (`locks/pull-<remote>.lock`, an flock that the kernel releases if the
    /// process dies). With `wait: false` and another holder, throws `.locked` naming the holder's pid; with
    /// `wait: true` retries without blocking a thread (non-blocking attempts with a growing pause up to 0.5 s),
    /// calling `waiting` once with the holder's pid when it has to wait, until the lock is free or the task is
    /// cancelled (then `CancellationError`). Hold it for a whole pull; release with ``PullLock/release()`` or by
    /// dropping it.
    public func pullLock(remote: String, wait: Bool, waiting: @Sendable (_ holder: String) -> Void = { _ in }) async throws -> PullLock {
        let name = "pull-\(LocalPath.safeComponent(remote)).lock"
        let display = self.display("locks/\(name)")
        let fd = try fs.openFile(name, in: locksFD, flags: O_RDWR | O_CREAT, mode: 0o600, display: display)
        var pause: UInt64 = 10_000_000
        var announced = false
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            if e == EINTR { continue }
            guard e == EWOULDBLOCK else {
                Glibc.close(fd)
                throw CacheError.system("flock", errno: e, path: display, cacheRoot: rootPath)
            }
            let holder = Self.lockHolder(fd)
            guard wait else {
                Glibc.close(fd)
                throw CacheError(.locked, "Another cloudsync run\(holder.isEmpty ? "" : " (pid \(holder))") is pulling remote \(remote). "
                    + "Wait for it to finish, or pass --wait to queue behind it.", path: display, errno: e)
            }
            if !announced {
                announced = true
                waiting(holder)
            }
            do {
                try await Task.sleep(nanoseconds: pause)
            } catch {
                Glibc.close(fd)
                throw error
            }
            pause = min(pause * 2, 500_000_000)
        }
        let pid = Array("\(getpid())\n".utf8)
        if ftruncate(fd, 0) != 0 || pwrite(fd, pid, pid.count, 0) != pid.count {
            logger.debug("could not record the pid in \(display)")
        }
        return PullLock(fd: fd, remote: remote)
    }

    /// The pid the holder of a pull lock wrote into it ("" when none).
    private static func lockHolder(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = pread(fd, &buffer, buffer.count, 0)
        return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : ""
    }
}

/// A held per-remote pull lock. Released by ``release()`` or deinit.
public final class PullLock: Sendable {
    public let remote: String
    private let fd: Mutex<Int32>

    init(fd: Int32, remote: String) {
        self.fd = Mutex(fd)
        self.remote = remote
    }

    /// Releases the lock. Idempotent.
    public func release() {
        fd.withLock { fd in
            if fd >= 0 {
                _ = ftruncate(fd, 0)
                Glibc.close(fd)
            }
            fd = -1
        }
    }

    deinit { release() }
}
