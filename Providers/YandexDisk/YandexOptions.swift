import CloudSyncCore
import Foundation

/// How one Yandex.Disk remote is reached (REST API v1). The token comes from the `TokenSource` given to the
/// provider; refreshing it (`token_url`, client credentials) is the `OAuthRefresher`'s business.
public struct YandexOptions: Sendable {
    /// `https://cloud-api.yandex.net`, the documented API host.
    public static let defaultAPIURL = httpsURL(host: "cloud-api.yandex.net")
    /// Items per listing request. The API's default is 20; larger pages mean fewer calls.
    public static let defaultPageSize = 1000

    /// The remote's name from the config, used in messages.
    public var remoteName: String
    /// The folder to mirror as written in the config: "" (or "/", "disk:/") is the whole disk;
    /// "Music", "/Music/" and "disk:/Music" all name the same folder.
    public var root: String
    /// Base `https://HOST[:PORT]` of the API; `/v1/disk/...` is appended unchanged.
    public var apiURL: URL
    /// `limit` sent with every listing request (at least 1).
    public var pageSize: Int
    /// When the root is the whole disk: true lists with the flat `resources/files?media_type=audio` (one call per
    /// page, files Yandex does not classify as audio are missed); false walks folders like a non-empty root
    /// does (one call per folder page, every extension of the audio filter is found).
    public var flatListing: Bool
    /// Folder pages requested at once during a walk.
    public var maxConcurrentRequests: Int
    /// Bounds of a folder walk: folders visited and depth below the root.
    public var walkLimits: WalkLimits

    public init(remoteName: String, root: String = "", apiURL: URL = YandexOptions.defaultAPIURL,
                pageSize: Int = YandexOptions.defaultPageSize, flatListing: Bool = true, maxConcurrentRequests: Int = 4,
                walkLimits: WalkLimits = WalkLimits()) {
        self.remoteName = remoteName
        self.root = root
        self.apiURL = apiURL
        self.pageSize = max(1, pageSize)
        self.flatListing = flatListing
        self.maxConcurrentRequests = max(1, maxConcurrentRequests)
        self.walkLimits = walkLimits
    }
}

/// `https://host` from a literal host name known to be valid.
private func httpsURL(host: String) -> URL {
    var c = URLComponents()
    c.scheme = "https"
    c.host = host
    // Scheme and host are literals above: building the URL cannot fail.
    return c.url ?? URL(fileURLWithPath: "/")
}
