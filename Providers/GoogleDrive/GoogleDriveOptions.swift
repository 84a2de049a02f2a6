import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// How one Google Drive remote is reached. See docs/gdrive.md.
public struct GoogleDriveOptions: Sendable {
    /// How a full listing enumerates the drive.
    public enum ListingStrategy: String, Sendable, Hashable {
        /// One flat `files.list` over the whole drive (`trashed=false`), paths rebuilt from `parents`:
        /// ⌈items in the drive / pageSize⌉ requests. The default: music libraries have ~10 files per folder.
        case flat
        /// Breadth-first `('<a>' in parents or ...) and trashed=false`, 50 folders per query, over the root's
        /// subtree only: ≈ folders/50 requests plus pages. Cheaper when the root is a small part of a big drive.
        case walk
    }

    /// The remote's name from the config, used in messages.
    public var remoteName: String
    /// The folder to mirror as a path from the top of My Drive, e.g. "/Music" ("" or "/" = the whole drive).
    public var root: String
    /// API base (`https://www.googleapis.com`); `/drive/v3/...` is appended unchanged.
    public var apiURL: URL
    /// Download base; `/drive/v3/files/{id}?alt=media` is appended. Defaults to `apiURL`.
    public var contentURL: URL?
    /// OAuth token endpoint, for building the `OAuthRefresher` (see ``oauthClient(clientID:clientSecret:)``).
    public var tokenURL: URL
    /// `pageSize` of `files.list` and `changes.list`, 1...1000 (tests force it small).
    public var pageSize: Int
    /// Retry downloads refused with 403 `cannotDownloadAbusiveFile` with `acknowledgeAbuse=true`.
    public var acknowledgeAbuse: Bool
    public var listingStrategy: ListingStrategy
    /// Bounds of the `.walk` strategy: more folders than `maxFolders` end the listing with `.invalidResponse` (the walk
    /// visits each folder id once, so only a server that keeps inventing folders reaches it; depth is not bounded).
    public var walkLimits: WalkLimits

    // Literal URLs always parse; the fallback only satisfies the type checker.
    public static let defaultAPIURL = URL(string: "https://www.googleapis.com") ?? URL(fileURLWithPath: "/")

    public init(remoteName: String, root: String = "", apiURL: URL = GoogleDriveOptions.defaultAPIURL,
                contentURL: URL? = nil, tokenURL: URL = GoogleDriveDescriptor.tokenURL, pageSize: Int = 1000,
                acknowledgeAbuse: Bool = false, listingStrategy: ListingStrategy = .flat, walkLimits: WalkLimits = WalkLimits()) {
        self.remoteName = remoteName
        self.root = root
        self.apiURL = apiURL
        self.contentURL = contentURL
        self.tokenURL = tokenURL
        self.pageSize = max(1, min(1000, pageSize))
        self.acknowledgeAbuse = acknowledgeAbuse
        self.listingStrategy = listingStrategy
        self.walkLimits = walkLimits
    }

    /// The `OAuthRefresher` client for this remote: refresh_token grant at `tokenURL` with client id/secret.
    public func oauthClient(clientID: String?, clientSecret: String? = nil) -> OAuthRefresher.Client {
        OAuthRefresher.Client(tokenURL: tokenURL, clientID: clientID, clientSecret: clientSecret)
    }

    /// Folder names from the top of My Drive to the root, e.g. ["Music", "Rock"]; empty for the whole drive.
    var rootSegments: [String] {
        root.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }
}
