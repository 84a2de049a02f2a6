import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// How one Dropbox remote is reached. Tokens come separately, as a `TokenSource` (usually an
/// `OAuthRefresher` built with ``oauthClient(clientID:clientSecret:)``).
public struct DropboxOptions: Sendable {
    /// `https://api.dropboxapi.com`: RPC routes (`/2/files/list_folder`, …).
    public static let defaultAPIURL = fixedURL("https://api.dropboxapi.com")
    /// `https://content.dropboxapi.com`: content routes (`/2/files/download`).
    public static let defaultContentURL = fixedURL("https://content.dropboxapi.com")

    /// The remote's name from the config, used in messages (`cloudsync login NAME`).
    public var remoteName: String
    /// The folder to mirror as written in the config: "" (or "/") is the whole account, "Music" and
    /// "/Music/" both mean `/Music`. Matched case-insensitively, as Dropbox does.
    public var root: String
    /// Base `https://HOST` of the RPC routes; the documented paths (`/2/files/list_folder`) are appended.
    public var apiURL: URL
    /// Base `https://HOST` of the content routes (`/2/files/download`).
    public var contentURL: URL
    /// The token endpoint, for whoever builds the `OAuthRefresher`; the provider itself never calls it.
    public var tokenURL: URL
    /// `limit` sent to `list_folder`, clamped to 1...2000 (Dropbox treats it as approximate).
    public var pageLimit: Int

    public init(remoteName: String, root: String = "", apiURL: URL = DropboxOptions.defaultAPIURL,
                contentURL: URL = DropboxOptions.defaultContentURL, tokenURL: URL = DropboxDescriptor.tokenURL,
                pageLimit: Int = 2000) {
        self.remoteName = remoteName
        self.root = root
        self.apiURL = apiURL
        self.contentURL = contentURL
        self.tokenURL = tokenURL
        self.pageLimit = pageLimit
    }

    /// The refresh client for `OAuthRefresher`: `tokenURL` with the app key (and secret, unless the app
    /// is a PKCE public client).
    public func oauthClient(clientID: String?, clientSecret: String? = nil) -> OAuthRefresher.Client {
        OAuthRefresher.Client(tokenURL: tokenURL, clientID: clientID, clientSecret: clientSecret)
    }

    /// The root as Dropbox spells it in requests: "" for the whole account, else `/A/B` (no trailing slash).
    /// Empty segments and surrounding slashes are dropped; "." and ".." are refused with `.configuration`.
    func normalizedRoot() throws -> String {
        let segments = root.split(separator: "/", omittingEmptySubsequences: true)
        if segments.contains(where: { $0 == "." || $0 == ".." }) {
            throw ProviderError(.configuration, "remote '\(remoteName)': root '\(root)' may not contain '.' or '..'; name a Dropbox folder such as /Music")
        }
        return segments.isEmpty ? "" : "/" + segments.joined(separator: "/")
    }

    /// `base` with the documented route path appended unchanged (a trailing slash on `base` is dropped).
    func url(_ base: URL, route: String) throws -> URL {
        try APIURL.build(base, path: route, remote: remoteName, setting: "api_url / content_url",
                         example: "https://api.dropboxapi.com / https://content.dropboxapi.com")
    }
}

/// A URL from a literal known to be valid.
private func fixedURL(_ text: StaticString) -> URL {
    guard let url = URL(string: "\(text)") else { preconditionFailure("invalid built-in URL \(text)") }
    return url
}
