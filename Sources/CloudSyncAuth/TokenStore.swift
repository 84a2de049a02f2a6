import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// What the token store keeps for one remote: OAuth tokens, or a WebDAV user and password.
///
/// On disk (`tokens/NAME.json`, mode 0600) as JSON with snake_case keys: `provider`, `access_token`,
/// `refresh_token`, `expiry` (RFC 3339, like rclone), `token_type`, `user`, `password`, `saved_at`.
public struct StoredCredentials: Codable, Sendable, Hashable {
    public var provider: String?
    public var accessToken: String?
    public var refreshToken: String?
    public var expiresAt: Date?
    public var tokenType: String?
    /// WebDAV basic auth only.
    public var user: String?
    /// WebDAV basic auth only: the password checked by `cloudsync login`.
    public var password: String?
    public var savedAt: Date?

    public init(provider: String? = nil, accessToken: String? = nil, refreshToken: String? = nil, expiresAt: Date? = nil,
                tokenType: String? = nil, user: String? = nil, password: String? = nil, savedAt: Date? = nil) {
        self.provider = provider
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.tokenType = tokenType
        self.user = user
        self.password = password
        self.savedAt = savedAt
    }

    public init(provider: String?, tokens: TokenSet) {
        self.init(provider: provider, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken,
                  expiresAt: tokens.expiresAt, tokenType: tokens.tokenType)
    }

    /// The OAuth part, when there is an access or refresh token.
    public var tokenSet: TokenSet? {
        guard accessToken?.isEmpty == false || refreshToken?.isEmpty == false else { return nil }
        return TokenSet(accessToken: accessToken ?? "", refreshToken: refreshToken, expiresAt: expiresAt, tokenType: tokenType)
    }

    enum CodingKeys: String, CodingKey {
        case provider, user, password
        case accessToken = "access_token", refreshToken = "refresh_token", expiresAt = "expiry"
        case tokenType = "token_type", savedAt = "saved_at"
    }
}

/// The token files of every remote under `$XDG_STATE_HOME/cloudsync/tokens/`: `NAME.json` (mode 0600) in a
/// folder of mode 0700, and `NAME.lock`, the flock that serialises refreshes across processes.
///
/// Writes are atomic and durable: temp file (0600) → write → fsync → rename over `NAME.json` → fsync of the
/// folder. A reader sees the old file or the new one, never a mix; a crash leaves at most a stray temp file.
/// Methods throw `AuthError(.storage)` with the path on I/O errors, never the file's content.
public struct TokenStore: Sendable {
    /// The `tokens` folder.
    public let directory: URL

    /// The store under `stateDirectory` (`$XDG_STATE_HOME/cloudsync`): `stateDirectory/tokens`.
    public init(stateDirectory: URL) {
        directory = stateDirectory.appendingPathComponent("tokens", isDirectory: true)
    }

    /// `tokens/NAME.json`. Names are made safe for a file name: bytes other than `A-Z a-z 0-9 . _ -` and a
    /// leading dot are percent-encoded, so no name can leave the folder and two names never share a file.
    public func fileURL(for remoteName: String) -> URL {
        directory.appendingPathComponent(Self.safeName(remoteName) + ".json")
    }

    public func lockURL(for remoteName: String) -> URL {
        directory.appendingPathComponent(Self.safeName(remoteName) + ".lock")
    }

    static func safeName(_ name: String) -> String {
        var out = ""
        for (index, byte) in name.utf8.enumerated() {
            let c = Character(Unicode.Scalar(byte))
            let plain = (byte < 128) && (c.isLetter || c.isNumber || c == "_" || c == "-" || (c == "." && index > 0))
            out += plain ? String(c) : String(format: "%%%02X", byte)
        }
        return out.isEmpty ? "%" : out
    }

    /// The stored credentials, nil when there is no file. A file readable by others is tightened to 0600.
    public func load(_ remoteName: String) throws(AuthError) -> StoredCredentials? {
        let url = fileURL(for: remoteName)
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            if !FileManager.default.fileExists(atPath: url.path) { return nil }
            throw AuthError(.storage, "cannot read the token file \(url.path) (\(Self.reason(error))); check its owner and permissions")
        }
        var info = stat()
        if stat(url.path, &info) == 0, info.st_mode & 0o077 != 0 { _ = chmod(url.path, 0o600) }
        do {
            return try Self.decoder.decode(StoredCredentials.self, from: data)
        } catch {
            throw AuthError(.storage, "the token file \(url.path) is damaged; run `cloudsync logout \(remoteName)` and `cloudsync login \(remoteName)`")
        }
    }

    /// The credentials stored for `remoteName` if they were stored for `provider`; nil when none, or when they
    /// belong to another provider (the remote was re-pointed since `login`: those tokens are not this one's).
    public func load(_ remoteName: String, for provider: String) throws(AuthError) -> StoredCredentials? {
        guard let stored = try load(remoteName) else { return nil }
        if let other = stored.provider, !other.isEmpty, other != provider { return nil }
        return stored
    }

    /// Replaces the stored credentials atomically (see the type's contract). Creates the folder (0700).
    public func save(_ credentials: StoredCredentials, for remoteName: String) throws(AuthError) {
        try ensureDirectory()
        var stamped = credentials
        stamped.savedAt = Date()
        let data: Data
        do { data = try Self.encoder.encode(stamped) } catch {
            throw AuthError(.storage, "cannot encode the tokens of remote '\(remoteName)'")
        }
        let target = fileURL(for: remoteName)
        let temp = directory.appendingPathComponent(".\(Self.safeName(remoteName)).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp")
        let fd = open(temp.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw storageError("create", temp) }
        var ok = false
        defer { if !ok { unlink(temp.path) } }
        do {
            defer { close(fd) }
            guard fchmod(fd, 0o600) == 0 else { throw storageError("set the mode of", temp) }
            let written = data.withUnsafeBytes { buffer -> Bool in
                var offset = 0
                while offset < buffer.count {
                    guard let base = buffer.baseAddress else { return false }
                    let n = write(fd, base + offset, buffer.count - offset)
                    if n < 0 { if errno == EINTR { continue }; return false }
                    offset += n
                }
                return true
            }
            guard written else { throw storageError("write", temp) }
            guard fsync(fd) == 0 else { throw storageError("flush", temp) }
        }
        guard rename(temp.path, target.path) == 0 else { throw storageError("replace", target) }
        ok = true
        try syncDirectory()
    }

    /// Removes the stored credentials. Returns false when there were none.
    @discardableResult
    public func delete(_ remoteName: String) throws(AuthError) -> Bool {
        let url = fileURL(for: remoteName)
        if unlink(url.path) != 0 {
            if errno == ENOENT { return false }
            throw storageError("remove", url)
        }
        try syncDirectory()
        return true
    }

    /// Takes the exclusive flock on `tokens/NAME.lock`, waiting (without blocking a thread) up to `timeout`
    /// seconds. Two `TokenFileLock`s contend even inside one process (flock is per open file description).
    public func lock(_ remoteName: String, timeout: TimeInterval = 120) async throws -> TokenFileLock {
        try ensureDirectory()
        let url = lockURL(for: remoteName)
        let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw storageError("open the lock file", url) }
        let lock = TokenFileLock(fd: fd)
        let deadline = Date().addingTimeInterval(timeout)
        var pause: UInt64 = 5_000_000
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw storageError("lock", url) }
            guard Date() < deadline else {
                throw AuthError(.storage, "another cloudsync process has held \(url.path) for over \(Int(timeout)) s while refreshing remote '\(remoteName)'; check for a hung process")
            }
            try await Task.sleep(nanoseconds: pause)
            pause = min(pause * 2, 100_000_000)
        }
        return lock
    }

    private func ensureDirectory() throws(AuthError) {
        var isDir: ObjCBool = false
        if !FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDir) {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw AuthError(.storage, "cannot create \(directory.path) (\(Self.reason(error))); check the permissions of its parent")
            }
        }
        guard chmod(directory.path, 0o700) == 0 else { throw storageError("set the mode of", directory) }
    }

    private func syncDirectory() throws(AuthError) {
        let fd = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw storageError("open", directory) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw storageError("flush", directory) }
    }

    private func storageError(_ verb: String, _ url: URL) -> AuthError {
        let text = String(cString: strerror(errno))
        return AuthError(.storage, "cannot \(verb) \(url.path): \(text); check the permissions and free space of \(directory.path)")
    }

    private static func reason(_ error: any Error) -> String { (error as NSError).localizedDescription }

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.prettyPrinted, .sortedKeys]
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(RFC3339.format(date))
        }
        return e
    }()

    static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let c = try decoder.singleValueContainer()
            let text = try c.decode(String.self)
            guard let date = RFC3339.parse(text) else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "not an RFC 3339 date")
            }
            return date
        }
        return d
    }()
}

/// An exclusive flock held on a token lock file; released by `unlock()` or when the value is freed.
/// Owns its descriptor; not Sendable (one owner at a time).
public final class TokenFileLock {
    private var fd: Int32

    init(fd: Int32) { self.fd = fd }

    /// Releases the lock (closing the descriptor releases the flock). Idempotent.
    public func unlock() {
        if fd >= 0 { close(fd); fd = -1 }
    }

    deinit { unlock() }
}
