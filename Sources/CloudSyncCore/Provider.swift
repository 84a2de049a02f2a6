import Foundation

/// A deletion reported by a provider's change feed.
public enum RemoteDeletion: Sendable, Hashable {
    /// The file at this path, or every file under it when it names a folder (path relative to the root).
    case path(String)
    /// The item with this provider id (a file, or a folder: then everything under it).
    case providerID(String)
}

/// Whether a listing enumerates everything or only what changed since a cursor.
public enum ListingKind: Sendable, Hashable {
    /// Every audio file under the root: files not listed no longer exist.
    case full
    /// Only changes since the cursor: files not mentioned are unchanged.
    case changes
}

/// One page of a listing.
public struct ListingPage: Sendable {
    public var kind: ListingKind
    /// Files that are new or may have changed. Within one listing the last mention of a path wins.
    public var upserts: [RemoteFile]
    public var deletions: [RemoteDeletion]
    /// Folders (relative to the root) whose contents could not be read in this listing (403, malformed answer,
    /// too deep). In a `.full` listing the files already known under them are kept, not taken as deleted.
    public var skippedFolders: [String]
    /// Set on the last page only: the opaque state to pass as `cursor` next time (Dropbox cursor, Drive page
    /// token, Graph deltaLink, plus whatever folder map the provider needs to rebuild paths). `nil` when the
    /// provider has no change feed.
    public var cursor: String?

    public init(kind: ListingKind, upserts: [RemoteFile] = [], deletions: [RemoteDeletion] = [], cursor: String? = nil,
                skippedFolders: [String] = []) {
        self.kind = kind
        self.upserts = upserts
        self.deletions = deletions
        self.cursor = cursor
        self.skippedFolders = skippedFolders
    }
}

/// How to GET a file's bytes. Reused for every range of the file until it expires or the content host
/// refuses it (401/403/404/410), then resolved again.
public struct DownloadRequest: Sendable {
    public var method: String
    public var url: URL
    /// Headers to send with every range request (auth included). Never logged.
    public var headers: [(name: String, value: String)]
    /// When the URL stops working, if the provider says.
    public var expiresAt: Date?
    /// Whether auth headers may follow a redirect to another host (Yandex hrefs: yes; OneDrive: never).
    /// Redirects within the same host always keep them.
    public var sendsAuthOnRedirect: Bool
    /// Strong validator for `If-Range`, when known before the first GET.
    public var etag: String?

    public init(method: String = "GET", url: URL, headers: [(name: String, value: String)] = [],
                expiresAt: Date? = nil, sendsAuthOnRedirect: Bool = false, etag: String? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.expiresAt = expiresAt
        self.sendsAuthOnRedirect = sendsAuthOnRedirect
        self.etag = etag
    }
}

/// What a provider can do. Each field is read by the engine, and the conformance suite
/// (Tests/ProviderTests/ConformanceTests.swift) holds every provider to it:
/// - `hasChangeFeed`: a pull passes the stored cursor (and stores the cursor of the last page) only when true;
///   otherwise every pull lists fully, whatever cursor a page carries.
/// - `supportsRanges`: when false the fetcher asks each missing run of a file in one GET (not `chunk_size` pieces,
///   each of which a server without Range would answer with the whole file) and never runs segments.
/// - `hashKinds`: the engine verifies a download with the strongest hash of a declared kind
///   (`hashToVerify(for:)`, CloudSyncEngine); an empty set (declared none up front, as WebDAV) trusts whatever the file carries.
/// - `caseInsensitivePaths`: deletions by path match case-insensitively.
public struct ProviderCapabilities: Sendable, Hashable {
    /// Hash kinds the provider publishes: when not empty, every file carries at least one of them, and only these
    /// are verified.
    public var hashKinds: Set<HashKind>
    /// Whether `listAudio(cursor:)` with a cursor returns only changes.
    public var hasChangeFeed: Bool
    /// Whether content hosts honour Range (all five do; a server that ignores it is still handled).
    public var supportsRanges: Bool
    /// Whether two paths differing only in case name the same file (Dropbox, OneDrive): deletions by path
    /// then match case-insensitively.
    public var caseInsensitivePaths: Bool

    public init(hashKinds: Set<HashKind>, hasChangeFeed: Bool, supportsRanges: Bool = true, caseInsensitivePaths: Bool = false) {
        self.hashKinds = hashKinds
        self.hasChangeFeed = hasChangeFeed
        self.supportsRanges = supportsRanges
        self.caseInsensitivePaths = caseInsensitivePaths
    }
}

/// A cloud storage adapter. Providers list and resolve; they never touch the cache.
public protocol Provider: Sendable {
    /// The remote's name from the config, used in messages.
    var remoteName: String { get }
    var capabilities: ProviderCapabilities { get }

    /// Lists audio files under the remote's root with the fewest API calls the provider allows.
    /// With `cursor` (from a previous listing's last page) a provider with a change feed yields `.changes`
    /// pages; when the cursor is invalid (Dropbox `reset`, Graph 410) it falls back to a `.full` listing.
    /// Pages of one listing all have the same kind. The sequence ends after the page that carries the cursor.
    /// Errors are `ProviderError`.
    func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error>

    /// Resolves how to download `file` (one API call at most, often none). Errors are `ProviderError`.
    func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest

    /// Resolves again after the content host refused `rejected` with `status` (401/403/404/410). See the
    /// default implementation.
    func resolveDownload(for file: RemoteFile, rejected: DownloadRequest, status: Int) async throws -> DownloadRequest
}

extension Provider {
    /// Resolves again after the content host refused `rejected` with `status` (401/403/404/410): providers
    /// whose downloads carry their token refresh it here (`TokenSource.refresh(rejected:)`), link-based ones
    /// ask for a new link. The default resolves afresh.
    public func resolveDownload(for file: RemoteFile, rejected: DownloadRequest, status: Int) async throws -> DownloadRequest {
        try await resolveDownload(for: file)
    }
}

extension ListingPage {
    /// A listing stream fed by `produce`, which calls `yield` for each page in order. The stream finishes when
    /// `produce` returns, fails with what it throws, and cancels it when the consumer stops listening.
    public static func stream(
        _ produce: @escaping @Sendable (_ yield: @escaping @Sendable (ListingPage) -> Void) async throws -> Void
    ) -> AsyncThrowingStream<ListingPage, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await produce { continuation.yield($0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// Bounds of a provider's folder walk (WebDAV PROPFIND, Yandex folder pages, Drive's walk), so a server that reports
/// an endless tree — a symlink loop, a generated tree — ends the listing with a clear error instead of keeping `ls` or
/// `pull` (and its lock) busy for ever.
public struct WalkLimits: Sendable, Hashable {
    /// Folders a listing may visit, the root included. One more ends the listing with ``tooManyFolders(remote:root:)``
    /// (nothing is removed on a listing cut short).
    public var maxFolders: Int
    /// Levels of folders below the root that are listed. A deeper folder is not listed: it is reported in
    /// `ListingPage.skippedFolders` (its known tracks are kept, the pull names it and exits 1).
    public var maxDepth: Int

    public init(maxFolders: Int = 100_000, maxDepth: Int = 64) {
        self.maxFolders = max(1, maxFolders)
        self.maxDepth = max(0, maxDepth)
    }

    /// The error that ends a walk which found more than `maxFolders` folders.
    public func tooManyFolders(remote: String, root: String) -> ProviderError {
        let shown = root.isEmpty ? "the root" : "'\(root)'"
        return ProviderError(.invalidResponse, "remote '\(remote)': the listing found more than \(maxFolders) folders under \(shown) and was stopped (a folder loop on the server, or a root that is not a music folder?); nothing was removed. Set root to the folder that holds the music")
    }

    /// The warning for `folder` (relative to the root), not listed because it lies deeper than `maxDepth`.
    public func tooDeep(remote: String, folder: String) -> String {
        "remote '\(remote)': folder '\(folder)' is not listed: it lies deeper than \(maxDepth) folders under the root (a folder loop on the server?); its cached tracks are kept"
    }
}
