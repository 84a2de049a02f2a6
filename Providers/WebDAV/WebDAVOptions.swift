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
    /// `https://cloud.example.com/remote.php/dav/files/me/Music/`. A missing trailing slash is added.
    public var url: URL
    /// A subfolder under `url` to mirror, decoded, `/`-separated ("" = all of `url`).
    public var root: String
    public var user: String
    /// Already resolved (the caller runs `password_command`). Never logged.
    public var password: String
    public var auth: Auth

    public init(remoteName: String, url: URL, root: String = "", user: String = "", password: String = "",
                auth: Auth = .basic) {
        self.remoteName = remoteName
        self.url = url
        self.root = root
        self.user = user
        self.password = password
        self.auth = auth
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
