#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation
import Synchronization

extension Cache {
    /// Takes the per-remote pull lock (`locks/pull-<remote>.lock`, an flock that the kernel releases if the
    /// process dies). With `wait: false` and another holder, throws `.locked` naming the holder's pid; with
    /// `wait: true` blocks until it is free. Hold it for a whole pull; release with ``PullLock/release()``
    /// or by dropping it.
    public func pullLock(remote: String, wait: Bool) throws(CacheError) -> PullLock {
        let name = "pull-\(LocalPath.safeComponent(remote)).lock"
        let display = self.display("locks/\(name)")
        let fd = try fs.openFile(name, in: locksFD, flags: O_RDWR | O_CREAT, mode: 0o600, display: display)
        while flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0 {
            let e = errno
            if e == EINTR { continue }
            if e == EWOULDBLOCK {
                var buffer = [UInt8](repeating: 0, count: 32)
                let n = pread(fd, &buffer, buffer.count, 0)
                let pid = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : ""
                Glibc.close(fd)
                let holder = pid.isEmpty ? "" : " (pid \(pid))"
                throw CacheError(.locked, "Another cloudsync run\(holder) is pulling remote \(remote). Wait for it to "
                    + "finish, or pass --wait to queue behind it.", path: display, errno: e)
            }
            Glibc.close(fd)
            throw CacheError.system("flock", errno: e, path: display, cacheRoot: root.path)
        }
        let pid = Array("\(getpid())\n".utf8)
        if ftruncate(fd, 0) != 0 || pwrite(fd, pid, pid.count, 0) != pid.count {
            logger.debug("could not record the pid in \(display)")
        }
        return PullLock(fd: fd, remote: remote)
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
