import CloudSyncCore
import Foundation

/// An error from the cache, with what to do next. Messages never contain tokens or URLs.
public struct CacheError: Error, Sendable, CustomStringConvertible, ExitCodeProviding {
    public enum Code: String, Sendable {
        /// Another process (or writer in this process) is writing this entry right now.
        case busy
        /// Another cloudsync run holds the pull lock for this remote.
        case locked
        /// A local file-system or database error.
        case io
        /// No space left on the device holding the cache.
        case diskFull
        /// The index or a cache file is damaged or was changed behind the cache's back.
        case corrupt
        /// The downloaded bytes do not match the provider's hash; the bytes were discarded.
        case hashMismatch
        /// No such entry in the index.
        case notFound
        /// The entry changed (new fingerprint, removed) while a writer or reader had it open: start again.
        case changed
        /// The operation needs bytes that are not present yet (e.g. completing an incomplete file).
        case incomplete
        /// A caller passed an impossible value (a range outside the file, a write after close).
        case invalidArgument
        /// The file is bigger than the cache's filesystem can hold (EFBIG, or a size no filesystem has): that one
        /// file fails, the others go on.
        case tooLarge
        /// The cache's file system cannot hold this track's name in `tracks/`: it refuses it, or another entry's
        /// file or folder takes it (a file and a folder differing only in case, on a disk that ignores case). That
        /// one file fails, the others go on.
        case unusableName
        /// A block of an encrypted cache file failed authentication (tampering, bit rot): its bytes are never
        /// served; the block is dropped from the index and fetched again.
        case damaged
        /// The cache is encrypted and no key is available (`cache.key` missing, `cache.key_command` failed).
        case keyMissing
        /// The key given is not the one this cache was encrypted with.
        case wrongKey
        /// `cache.encrypt` disagrees with what the cache holds: `cloudsync cache encrypt` / `decrypt` converts it.
        case encryptionMismatch
    }

    public var code: Code
    /// What went wrong and what to do next.
    public var message: String
    /// The file or directory concerned, when there is one.
    public var path: String?
    /// The underlying `errno` (or SQLite result code for database errors, see `message`).
    public var errno: Int32?
    /// For `.damaged`: the plaintext bytes of the block that failed its check.
    public var damagedBytes: Range<Int64>?

    public init(_ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
    }

    public var description: String { message }

    public var exitCode: ExitCode {
        switch code {
        case .io, .diskFull, .corrupt: .ioError
        case .locked, .busy: .locked
        case .hashMismatch, .notFound, .changed, .incomplete, .invalidArgument, .tooLarge, .unusableName, .damaged: .partialFailure
        case .keyMissing, .encryptionMismatch: .config
        case .wrongKey: .auth
        }
    }

    /// `path` cannot be a name in `tracks/` on this disk (`reason`): the file is skipped.
    static func unusableName(_ path: String, reason: String, errno e: Int32?) -> CacheError {
        CacheError(.unusableName, "The cache's disk cannot hold \(path) (\(reason)): the disk refuses the name, or another "
            + "track's file or folder takes it (names differing only in case, on a disk that ignores case). This file is "
            + "skipped; rename it on the remote, or move cache.dir to a Linux file system such as ext4.", path: path, errno: e)
    }

    /// Maps a failed system call to an error: ENOSPC/EDQUOT become `.diskFull`, the rest `.io`.
    static func system(_ call: String, errno e: Int32, path: String, needing bytes: Int64? = nil,
                       cacheRoot: String) -> CacheError {
        let reason = String(cString: strerror(e))
        if e == ENOSPC || e == EDQUOT {
            let need = bytes.map { " This file needs \(ByteSize.format($0)) in total." } ?? ""
            return CacheError(.diskFull, "No space left for the cache in \(cacheRoot) (\(call) \(path)).\(need) "
                + "Free space, lower cache.max_size and run `cloudsync cache evict`, or move cache.dir.",
                path: path, errno: e)
        }
        if e == EFBIG || (call == "ftruncate" && e == EINVAL) {
            let size = bytes.map { " (\(ByteSize.format($0)))" } ?? ""
            return CacheError(.tooLarge, "The file\(size) is bigger than the filesystem of the cache can hold (\(call) "
                + "\(path): \(reason)); it is skipped. If the size is real, move cache.dir to a filesystem that holds it.",
                path: path, errno: e)
        }
        if (call == "rename" || call == "mkdir") && [EINVAL, EILSEQ, ENAMETOOLONG, EISDIR, ENOTDIR].contains(e) {
            return unusableName(path, reason: "\(call): \(reason)", errno: e)
        }
        return CacheError(.io, "\(call) failed for \(path): \(reason). Check permissions and the disk holding "
            + "\(cacheRoot).", path: path, errno: e)
    }
}
