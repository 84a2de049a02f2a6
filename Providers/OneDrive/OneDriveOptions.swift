import CloudSyncHTTP
import Foundation

/// How one OneDrive remote (Microsoft Graph, OneDrive Personal or for Business) is reached.
///
/// There is no `contentURL`: Graph hands out pre-authenticated download URLs on hosts of its own choosing.
public struct OneDriveOptions: Sendable {
    /// `https://graph.microsoft.com`, the global Graph service.
    public static let defaultAPIURL = URL(string: "https://graph.microsoft.com") ?? URL(fileURLWithPath: "/")

    /// The remote's name from the config, used in messages.
    public var remoteName: String
    /// The folder to mirror as written in the config, e.g. "/Music" or "Music/Albums"; "" or "/" = the whole
    /// drive. Matched case-insensitively, like OneDrive itself.
    public var root: String
    /// Base `scheme://host[:port]` of Graph (`api_url`); the client appends `/v1.0/...` unchanged. National
    /// clouds and tests override it. `@odata.nextLink`/`deltaLink` URLs are re-based onto it, so the token
    /// never goes to another host.
    public var apiURL: URL
    /// The OAuth 2 token endpoint (`token_url`) used by the `OAuthRefresher` the caller builds with
    /// ``oauthClient(clientID:clientSecret:)``. The provider itself never calls it.
    public var tokenURL: URL
    /// Scopes sent with every refresh (Microsoft requires them on the refresh_token grant).
    public var scopes: [String]
    /// How long a `@microsoft.graph.downloadUrl` is trusted before it is resolved again. The docs say "a few
    /// minutes" (driveitem-get-content) and "1 hour" (driveItem resource); a refused URL is re-resolved anyway.
    public var downloadLinkLifetime: TimeInterval
    /// `$top` for the delta listing, nil to let the service choose its page size.
    public var pageSize: Int?

    public init(remoteName: String, root: String = "", apiURL: URL = OneDriveOptions.defaultAPIURL,
                tokenURL: URL = OneDriveDescriptor.tokenURL, scopes: [String] = OneDriveDescriptor.scopes,
                downloadLinkLifetime: TimeInterval = 300, pageSize: Int? = nil) {
        self.remoteName = remoteName
        self.root = root
        self.apiURL = apiURL
        self.tokenURL = tokenURL
        self.scopes = scopes
        self.downloadLinkLifetime = downloadLinkLifetime
        self.pageSize = pageSize
    }

    /// The refresh client for an `OAuthRefresher`: `token_url`, the app's client id (and secret for
    /// confidential clients) and `scope`. Microsoft rotates refresh tokens: give the refresher a `persist`
    /// closure that stores the new set atomically.
    public func oauthClient(clientID: String?, clientSecret: String? = nil) -> OAuthRefresher.Client {
        OAuthRefresher.Client(tokenURL: tokenURL, clientID: clientID, clientSecret: clientSecret,
                              extraFields: [("scope", scopes.joined(separator: " "))])
    }

    /// The config root as lowercased path segments (for matching) and as written (for messages).
    var rootSegments: [String] {
        root.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }
}
