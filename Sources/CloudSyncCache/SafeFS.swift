#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// File-system steps inside the cache root that never follow a symlink: every directory is entered with
/// `openat(…, O_DIRECTORY | O_NOFOLLOW)` from an already-open parent, so a symlink planted anywhere inside the
/// cache cannot redirect a write outside it.
struct SafeFS: Sendable {
    /// Shown in error messages.
    let rootPath: String

    /// Opens (creating when `create`) the directory `components` below `base`, one component at a time.
    /// The caller closes the returned descriptor.
    func openDirectory(_ components: [String], in base: Int32, create: Bool, display: String) throws(CacheError) -> Int32 {
        var current = dup(base)
        guard current >= 0 else { throw error("dup", display) }
        for component in components {
            if create, mkdirat(current, component, 0o755) != 0, errno != EEXIST {
                let e = error("mkdir", display)
                Glibc.close(current)
                throw e
            }
            let next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let savedErrno = errno
            var info = stat()
            // A file, not a link, where a folder should be: a track whose name takes the folder's (on a disk that
            // ignores case), not a damaged cache.
            let plainFile = next < 0 && savedErrno == ENOTDIR && fstatat(current, component, &info, AT_SYMLINK_NOFOLLOW) == 0
                && (info.st_mode & S_IFMT) != S_IFLNK
            Glibc.close(current)
            guard next >= 0 else {
                if plainFile { throw CacheError.unusableName(display, reason: "\(component) is a file", errno: savedErrno) }
                if savedErrno == ELOOP || savedErrno == ENOTDIR {
                    throw CacheError(.corrupt, "\(display) in the cache has a component that is a symlink or not a "
                        + "directory (\(component)); cloudsync never follows links inside \(rootPath). Remove it (to keep "
                        + "the cache on another disk, point cache.dir there, or make cache.dir itself the link).",
                        path: display, errno: savedErrno)
                }
                throw CacheError.system("open", errno: savedErrno, path: display, cacheRoot: rootPath)
            }
            current = next
        }
        return current
    }

    /// Opens a file in directory `dir` without following a symlink.
    func openFile(_ name: String, in dir: Int32, flags: Int32, mode: mode_t = 0o644, display: String) throws(CacheError) -> Int32 {
        let fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else {
            if errno == ELOOP {
                throw CacheError(.corrupt, "\(display) is a symlink; cloudsync never follows links inside \(rootPath). "
                    + "Remove it.", path: display, errno: errno)
            }
            throw error("open", display)
        }
        return fd
    }

    /// Removes `relativePath` (a file under `base`), then each parent directory that became empty, up to but
    /// not including the first `keep` components. Missing files are not an error.
    func removeFile(_ relativePath: String, in base: Int32, keepingParents keep: Int) throws(CacheError) {
        let components = relativePath.split(separator: "/").map(String.init)
        guard let leaf = components.last else { return }
        let (fds, failure) = openFolders(components.dropLast(), in: base)
        defer { for fd in fds { Glibc.close(fd) } }
        if let failure {
            if failure == ENOENT { return }
            throw CacheError.system("open", errno: failure, path: relativePath, cacheRoot: rootPath)
        }
        if unlinkat(fds.last ?? base, leaf, 0) != 0, errno != ENOENT { throw error("unlink", relativePath) }
        prune(components.dropLast(), opened: fds, in: base, keepingParents: keep)
    }

    /// Removes the folder `relativeFolder` under `base` if it is empty, then each parent that became empty, up to
    /// but not including the first `keep` components. Quiet: a folder that is not empty or not there ends it.
    func pruneEmptyFolders(_ relativeFolder: String, in base: Int32, keepingParents keep: Int) {
        let components = relativeFolder.split(separator: "/").map(String.init)
        let (fds, failure) = openFolders(components.dropLast(), in: base)
        defer { for fd in fds { Glibc.close(fd) } }
        if failure == nil { prune(components[...], opened: fds, in: base, keepingParents: keep) }
    }

    /// Opens the folders `components` below `base` one within the other, never following a link; stops at the first
    /// that cannot be opened and returns its errno. The caller closes the descriptors (of the folders opened).
    private func openFolders(_ components: ArraySlice<String>, in base: Int32) -> (fds: [Int32], failure: Int32?) {
        var fds: [Int32] = []
        for component in components {
            let next = openat(fds.last ?? base, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 { return (fds, errno) }
            fds.append(next)
        }
        return (fds, nil)
    }

    /// Removes the empty folders of the path `folders` (each of `opened` the descriptor of one of its folders, from
    /// the top, but the last), deepest first; stops at the first that is not empty or at component `keep`.
    private func prune(_ folders: ArraySlice<String>, opened: [Int32], in base: Int32, keepingParents keep: Int) {
        var index = folders.count - 1
        while index >= keep {
            let parent = index == 0 ? base : opened[index - 1]
            if unlinkat(parent, folders[folders.startIndex + index], AT_REMOVEDIR) != 0 { break }
            index -= 1
        }
    }

    func error(_ call: String, _ display: String, needing bytes: Int64? = nil) -> CacheError {
        CacheError.system(call, errno: errno, path: display, needing: bytes, cacheRoot: rootPath)
    }
}
