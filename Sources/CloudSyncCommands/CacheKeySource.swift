#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import Foundation

/// Where the key of an encrypted cache comes from: the first line printed by `cache.key_command`, else the
/// file `cache.key` in the state directory (`$XDG_STATE_HOME/cloudsync`, never inside the cache), made on first
/// use with 32 random bytes (64 hex digits), mode 0600 in a 0700 folder, written atomically. The key is never
/// logged or printed.
struct CacheKeySource {
    let settings: CacheSettings
    let stateDirectory: URL

    var keyFile: URL { stateDirectory.appendingPathComponent("cache.key", isDirectory: false) }

    /// What the key is read from, for messages.
    var origin: String { settings.keyCommand.map { "cache.key_command (\($0))" } ?? keyFile.path }

    /// The key, or nil when there is no key file yet (and no key command). Throws `.keyMissing` (exit 3) when
    /// the command fails or prints something that is not a key, or the file is unreadable, malformed or readable
    /// by others.
    func existingKey() throws -> CacheKey? {
        if let command = settings.keyCommand { return try run(command) }
        var st = stat()
        guard lstat(keyFile.path, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw missing("cannot read \(keyFile.path): \(String(cString: strerror(errno)))")
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw missing("\(keyFile.path) is not a regular file") }
        guard st.st_mode & 0o077 == 0 else {
            throw missing("\(keyFile.path) may be read by other users (mode \(String(st.st_mode & 0o777, radix: 8))); "
                + "run `chmod 600 \(keyFile.path)`")
        }
        guard let data = FileManager.default.contents(atPath: keyFile.path) else {
            throw missing("cannot read \(keyFile.path)")
        }
        guard let key = CacheKey(text: String(decoding: data, as: UTF8.self)) else {
            throw missing("\(keyFile.path) does not hold a cache key (64 hex digits)")
        }
        return key
    }

    /// Makes a new random key and writes it to the key file (0600, folder 0700; a temporary file renamed into
    /// place, so a crash never leaves half a key). Refuses to replace an existing file.
    func createKey() throws -> CacheKey {
        let key = CacheKey.random()
        let dir = stateDirectory.path
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let temporary = keyFile.path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw missing("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let text = Array((key.hexText + "\n").utf8)
        let written = text.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        Glibc.close(fd)
        guard written == text.count, synced else {
            unlink(temporary)
            throw missing("cannot write \(temporary)")
        }
        // link(2) fails if another process made the key meanwhile: then that one is the key.
        if link(temporary, keyFile.path) != 0 {
            let e = errno
            unlink(temporary)
            if e == EEXIST, let theirs = try existingKey() { return theirs }
            throw missing("cannot create \(keyFile.path): \(String(cString: strerror(e)))")
        }
        unlink(temporary)
        let dirFD = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            Glibc.close(dirFD)
        }
        return key
    }

    /// Runs `command` with /bin/sh and reads the key from the first line of its output.
    private func run(_ command: String) throws -> CacheKey {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        do {
            try process.run()
        } catch {
            throw missing("cache.key_command could not be started: \(error.localizedDescription)")
        }
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let first = String(decoding: errors, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
            throw missing("cache.key_command exited with status \(process.terminationStatus)"
                + (first.isEmpty ? "" : ": \(TerminalText.escape(first))"))
        }
        let line = String(decoding: output, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
        guard let key = CacheKey(text: String(line)) else {
            throw missing("the first line cache.key_command printed is not a cache key: it must be 32 bytes as 64 hex "
                + "digits or base64 (make one with `openssl rand -hex 32`)")
        }
        return key
    }

    private func missing(_ reason: String) -> CacheError {
        CacheError(.keyMissing, "No cache key: \(reason).")
    }
}
