import CloudSyncCore
import Foundation

/// How one WebDAV remote is reached and authenticated.
public struct WebDAVOptions: Sendable {
    /// How requests prove who is asking.
    public enum Auth: Sendable, Hashable {
        /// `Authorization: Basic base64(UTF-8 "user:password")`; no header when both are empty.
        case basic
        /// `Authorization: Bearer <token>`.
        case bearer(String)
        /// `Authorization: OAuth <token>` (Yandex's webdav.yandex.ru).
        case oauth(String)
    }

    /// The remote's name from the config, used in messages.
    public var remoteName: String
    /// The collection to mirror, percent-encoded as the user wrote it, e.g.
    /// `https://cloud.example.com/remote.php/dav/files/me/Music/`. A missing trailing slash is added. User info
    /// (`https://me:secret@host/dav/`) is Basic credentials: it fills in `user`/`password` where they are empty,
    /// and is never sent in the URL itself; a value that contradicts `user`/`password`, or any with token auth, is
    /// a configuration error.
    public var url: URL
    /// A subfolder under `url` to mirror, decoded, `/`-separated ("" = all of `url`).
    public var root: String
    public var user: String
    /// Already resolved (the caller runs `password_command`). Never logged.
    public var password: String
    public var auth: Auth
    /// Bounds of the PROPFIND walk: folders visited and depth below the root.
    public var walkLimits: WalkLimits

    public init(remoteName: String, url: URL, root: String = "", user: String = "", password: String = "",
                auth: Auth = .basic, walkLimits: WalkLimits = WalkLimits()) {
        self.remoteName = remoteName
        self.url = url
        self.root = root
        self.user = user
        self.password = password
        self.auth = auth
        self.walkLimits = walkLimits
    }

    /// The `Authorization` header value with the URL's user info taken into account (see ``url``), or nil for
    /// anonymous access. A secret: never log it. Errors never contain the password.
    func resolvedAuthorization() throws -> String? {
        let comps = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let urlUser = comps?.user ?? "", urlPassword = comps?.password ?? ""
        guard !urlUser.isEmpty || !urlPassword.isEmpty else { return authorization }
        guard auth == .basic else {
            throw ProviderError(.configuration, "remote \(remoteName): url carries a user name or password, but the remote uses token auth; remove them from url")
        }
        func merged(_ fromURL: String, _ configured: String, _ what: String) throws -> String {
            if fromURL.isEmpty || configured.isEmpty || fromURL == configured { return configured.isEmpty ? fromURL : configured }
            throw ProviderError(.configuration, "remote \(remoteName): url carries a \(what) that differs from the configured one; keep one of them (better: remove it from url and use user and password_command)")
        }
        var resolved = self
        resolved.user = try merged(urlUser, user, "user name")
        resolved.password = try merged(urlPassword, password, "password")
        return resolved.authorization
    }

    /// The `Authorization` header value, or nil for anonymous access. A secret: never log it.
    var authorization: String? {
        switch auth {
        case .basic:
            if user.isEmpty && password.isEmpty { return nil }
            return "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        case .bearer(let token): return "Bearer \(token)"
        case .oauth(let token): return "OAuth \(token)"
        }
    }
}
