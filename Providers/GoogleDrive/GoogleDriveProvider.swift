import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// A Google Drive (API v3) remote. See docs/gdrive.md.
///
/// Listing: the `changes` start page token is fetched first, then the root path is resolved to a folder id
/// and the drive is enumerated (``GoogleDriveOptions/ListingStrategy``); the cursor is a JSON ``DriveTree``
/// holding that page token and the folder and audio-file maps of the root's subtree. With a cursor, the change
/// feed is read to its `newStartPageToken`, applied to the tree, and the difference is yielded as `.changes`.
/// Downloads are `GET /drive/v3/files/{id}?alt=media` with the Bearer token (no API call to resolve).
public final class GoogleDriveProvider: Provider {
    /// Upserts per yielded page.
    static let filesPerPage = 1000

    public let options: GoogleDriveOptions
    public var remoteName: String { options.remoteName }

    private let client: APIClient
    /// Like `client`, but hands back a 403 `cannotDownloadAbusiveFile` answer instead of throwing (download probe).
    private let probeClient: APIClient
    private let audio: AudioFilter
    private let logger: Logger

    /// `tokens` supplies and refreshes the Bearer token (an `OAuthRefresher` built with
    /// ``GoogleDriveOptions/oauthClient(clientID:clientSecret:)``); `pacer` retries rate limits (403
    /// `*RateLimitExceeded`, 429) and 5xx with exponential backoff. Nothing is sent before the first call.
    public init(options: GoogleDriveOptions, transport: any Transport, pacer: Pacer, tokens: any TokenSource,
                audio: AudioFilter, logger: Logger) {
        self.options = options
        self.audio = audio
        self.logger = logger
        let name = options.remoteName
        client = APIClient(transport: transport, pacer: pacer, tokens: tokens, auth: .bearer, logger: logger) {
            DriveAPI.classify($0, remoteName: name)
        }
        probeClient = APIClient(transport: transport, pacer: pacer, tokens: tokens, auth: .bearer, logger: logger) { response in
            if response.status == 403, DriveAPI.reason(of: response) == "cannotDownloadAbusiveFile" { return nil }
            return DriveAPI.classify(response, remoteName: name)
        }
    }

    /// MD5 and SHA-256 (`md5Checksum`, `sha256Checksum`) for blob files; a change feed.
    public var capabilities: ProviderCapabilities {
        ProviderCapabilities(hashKinds: [.md5, .sha256], hasChangeFeed: true, supportsRanges: true)
    }

    // MARK: Listing

    /// Without a usable cursor: `.full` pages, sorted by path, the last carrying the cursor (at least one page).
    /// With one: `.changes` pages (upserts = new, modified, moved or renamed files with their current path;
    /// deletions = `.providerID` of files removed, trashed, no longer audio or moved out of the root). A cursor
    /// Drive rejects (400/404/410 on `changes`), of another format, or for another `root` gives a `.full` listing.
    ///
    /// Errors: `.unauthorized` when the token cannot be refreshed, `.notFound` when `root` does not exist,
    /// `.rateLimited`/`.transient` once the pacer's retries are spent, `.invalidResponse` for unreadable answers.
    public func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        ListingPage.stream { yield in try await self.list(cursor: cursor, yield) }
    }

    private var normalizedRoot: String { options.rootSegments.joined(separator: "/") }

    private func list(cursor: String?, _ yield: @Sendable (ListingPage) -> Void) async throws {
        switch cursor.map(DriveTree.open) {
        case .success(let tree) where tree.root == normalizedRoot:
            do {
                try await listChanges(since: tree, yield)
                return
            } catch let error as ProviderError where error.code == .cursorReset {
                logger.info("gdrive \(remoteName): \(error.message)")
            }
        case .success(let tree):
            logger.info("gdrive \(remoteName): the saved cursor was made for root '\(tree.root)'; listing everything")
        case .failure(let refusal):
            logger.info("gdrive \(remoteName): \(refusal)")
        case nil:
            break
        }
        try await listFull(yield)
    }

    private func listFull(_ yield: @Sendable (ListingPage) -> Void) async throws {
        // The start token comes first, so a change made during the listing is seen again next time.
        let token = try await startPageToken()
        let rootID = try await resolveRoot()
        var tree = DriveTree(root: normalizedRoot, rootID: rootID, pageToken: token)
        switch options.listingStrategy {
        case .flat:
            try await query("trashed=false") { absorb($0, into: &tree) }
        case .walk:
            try await walk([rootID], into: &tree)
        }
        tree.prune()
        try emit(kind: .full, upserts: tree.remoteFiles(), deletions: [], tree: tree, yield)
    }

    private func listChanges(since old: DriveTree, _ yield: @Sendable (ListingPage) -> Void) async throws {
        var tree = old
        var newFolders: Set<String> = []
        var pageToken = old.pageToken
        while true {
            try Task.checkCancellation()
            let url = try driveURL(options.apiURL, "/drive/v3/changes", [
                ("pageToken", pageToken), ("pageSize", String(options.pageSize)), ("includeRemoved", "true"),
                ("supportsAllDrives", "true"), ("includeItemsFromAllDrives", "true"), ("fields", DriveAPI.changesFields),
            ])
            let page: DriveAPI.ChangeList
            do {
                page = try await get(url, as: DriveAPI.ChangeList.self)
            } catch var error as ProviderError where [400, 404, 410].contains(error.status ?? 0) {
                error.code = .cursorReset
                error.message = "gdrive \(remoteName): Drive rejected the saved change token (HTTP \(error.status ?? 0)); listing everything again"
                throw error
            }
            for change in page.changes ?? [] {
                guard let id = change.fileId ?? change.file?.id, id != tree.rootID else { continue }
                tree.items.remove(id)
                guard change.removed != true, let file = change.file, file.trashed != true else { continue }
                if file.isFolder, old.folders[id] == nil { newFolders.insert(id) }
                absorb(file, into: &tree)
            }
            if let next = page.newStartPageToken, !next.isEmpty {
                tree.pageToken = next
                break
            }
            guard let next = page.nextPageToken, !next.isEmpty else {
                throw ProviderError(.invalidResponse, "gdrive \(remoteName): a changes page had neither nextPageToken nor newStartPageToken; pull again")
            }
            pageToken = next
        }
        tree.prune()
        // Folders that came into the root (moved in from outside) bring files the feed does not repeat.
        let reachable = tree.paths().folders
        let arrived = newFolders.filter { reachable[$0] != nil }.sorted()
        if !arrived.isEmpty {
            logger.debug("gdrive \(remoteName): listing \(arrived.count) folder(s) new under the root")
            try await walk(arrived, into: &tree)
            tree.prune()
        }
        let diff = tree.changes(since: old)
        try emit(kind: .changes, upserts: diff.upserts, deletions: diff.deletions, tree: tree, yield)
    }

    private func emit(kind: ListingKind, upserts: [RemoteFile], deletions: [RemoteDeletion], tree: DriveTree,
                      _ yield: @Sendable (ListingPage) -> Void) throws {
        let cursor = try tree.sealed()
        var start = 0
        repeat {
            let end = min(upserts.count, start + Self.filesPerPage)
            let last = end == upserts.count
            yield(ListingPage(kind: kind, upserts: Array(upserts[start..<end]), deletions: last ? deletions : [],
                              cursor: last ? cursor : nil))
            start = end
        } while start < upserts.count
    }

    /// Records `file` in `tree`: folders always, audio blobs; skips trashed items, Google-native documents,
    /// shortcuts, and items without a parent (shared with me, other drives' roots).
    private func absorb(_ file: DriveAPI.File, into tree: inout DriveTree) {
        guard file.trashed != true, let parent = file.parents?.first, let name = file.name else { return }
        if file.isFolder {
            tree.items.setFolder(file.id, name: name, parent: parent)
            return
        }
        guard !file.isGoogleNative, audio.isAudio(name: name, mimeType: file.mimeType) else { return }
        guard let size = file.size else {
            logger.debug("gdrive \(remoteName): skipping '\(name)' (\(file.id)): Drive gave no size")
            return
        }
        tree.items.setFile(file.id, DriveTree.File(name: name, parent: parent, size: size, mimeType: file.mimeType,
                                            md5: file.md5Checksum, sha256: file.sha256Checksum,
                                            modified: file.modifiedTime, revision: file.headRevisionId))
    }

    /// Folders asked for in one walk query (rclone's ListR groups 50 the same way), keeping `q` short.
    static let foldersPerQuery = 50

    /// Breadth-first from `start`: `('<a>' in parents or '<b>' in parents ...) and trashed=false` over up to
    /// ``foldersPerQuery`` folders at a time, so the cost is about folders / 50 queries plus extra pages.
    private func walk(_ start: [String], into tree: inout DriveTree) async throws {
        var queue = start
        var seen = Set(start)
        var next = 0
        while next < queue.count {
            let batch = Array(queue[next..<min(queue.count, next + Self.foldersPerQuery)])
            next += batch.count
            var found: [String] = []
            try await query(Self.childrenQuery(of: batch)) { file in
                absorb(file, into: &tree)
                if file.isFolder, file.trashed != true { found.append(file.id) }
            }
            for id in found where seen.insert(id).inserted { queue.append(id) }
            guard seen.count <= options.walkLimits.maxFolders else {
                throw options.walkLimits.tooManyFolders(remote: remoteName, root: options.root)
            }
        }
    }

    /// `'<id>' in parents and trashed=false` for one folder, `(… or …) and trashed=false` for several.
    static func childrenQuery(of folders: [String]) -> String {
        let terms = folders.map { "\(DriveAPI.literal($0)) in parents" }
        let any = terms.count == 1 ? terms[0] : "(" + terms.joined(separator: " or ") + ")"
        return any + " and trashed=false"
    }

    /// Every file matching `q`, page after page until there is no `nextPageToken` (short and empty pages
    /// happen before the end).
    private func query(_ q: String, _ each: (DriveAPI.File) -> Void) async throws {
        var pageToken: String?
        repeat {
            try Task.checkCancellation()
            var items = [("q", q), ("pageSize", String(options.pageSize)), ("fields", DriveAPI.listFields),
                         ("supportsAllDrives", "true"), ("includeItemsFromAllDrives", "true")]
            if let pageToken { items.append(("pageToken", pageToken)) }
            let page = try await get(try driveURL(options.apiURL, "/drive/v3/files", items), as: DriveAPI.FileList.self)
            for file in page.files ?? [] { each(file) }
            pageToken = page.nextPageToken.flatMap { $0.isEmpty ? nil : $0 }
        } while pageToken != nil
    }

    private func startPageToken() async throws -> String {
        let url = try driveURL(options.apiURL, "/drive/v3/changes/startPageToken", [("supportsAllDrives", "true")])
        return try await get(url, as: DriveAPI.StartPageToken.self).startPageToken
    }

    /// The folder id of `options.root`: `files/root` for the whole drive, else one name query per segment.
    /// Among several folders of one name the exact-case one with the smallest id wins (as in local naming).
    private func resolveRoot() async throws -> String {
        struct Root: Decodable { var id: String }
        var parent = "root"
        if options.rootSegments.isEmpty {
            let url = try driveURL(options.apiURL, "/drive/v3/files/root", [("fields", "id"), ("supportsAllDrives", "true")])
            return try await get(url, as: Root.self).id
        }
        var walked: [String] = []
        for segment in options.rootSegments {
            walked.append(segment)
            var matches: [DriveAPI.File] = []
            let q = "name = \(DriveAPI.literal(segment)) and \(DriveAPI.literal(parent)) in parents and mimeType = \(DriveAPI.literal(DriveAPI.folderMimeType)) and trashed=false"
            try await query(q) { matches.append($0) }
            let ordered = matches.sorted { ($0.name != segment ? 1 : 0, $0.id) < ($1.name != segment ? 1 : 0, $1.id) }
            guard let folder = ordered.first else {
                throw ProviderError(.notFound, "gdrive \(remoteName): folder '/\(walked.joined(separator: "/"))' does not exist in My Drive; check root in the config")
            }
            parent = folder.id
        }
        return parent
    }

    /// GETs `url` through the API client and decodes the JSON answer. A token still refused after one
    /// refresh becomes `.unauthorized` (log in again).
    private func get<T: Decodable>(_ url: URL, as type: T.Type) async throws -> T {
        let response = try await send(HTTPRequest(url: url, headers: ["Accept": "application/json"]), via: client)
        return try APIClient.decode(T.self, from: response, what: "Google Drive remote '\(remoteName)'")
    }

    private func send(_ request: HTTPRequest, via client: APIClient) async throws -> HTTPResponse {
        do {
            return try await client.send(request)
        } catch var error as ProviderError where error.code == .tokenExpired {
            error.code = .unauthorized
            error.message = "gdrive \(remoteName): Drive refused the access token even after a refresh; run `cloudsync login \(remoteName)`"
            throw error
        }
    }

    // MARK: Downloads

    /// `GET {content}/drive/v3/files/{id}?alt=media` with the current Bearer token (no API call). The token is
    /// never sent to another host on a redirect.
    public func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        try await request(for: file, acknowledgingAbuse: false)
    }

    /// After the content host refused `rejected`:
    /// - 401: refreshes the token (once per rejected token) and returns the request with the new one;
    /// - 403: probes the first byte through the API client to learn why. Rate limits are waited out by the
    ///   pacer; `cannotDownloadAbusiveFile` gives the request with `acknowledgeAbuse=true` when the remote
    ///   enables `acknowledge_abuse`, else `.forbidden` naming that option; `downloadQuotaExceeded` throws
    ///   `.quotaExceeded` (not retried: hammering does not help);
    /// - 404/410: throws `.notFound` when the file is gone or trashed, else resolves afresh.
    public func resolveDownload(for file: RemoteFile, rejected: DownloadRequest, status: Int) async throws -> DownloadRequest {
        let acknowledged = rejected.url.query?.contains("acknowledgeAbuse=true") ?? false
        switch status {
        case 401:
            try await client.refreshToken(carriedBy: rejected.headers)
            return try await request(for: file, acknowledgingAbuse: acknowledged)
        case 403:
            var probe = HTTPRequest(url: try downloadURL(for: file, acknowledgingAbuse: acknowledged))
            if file.size > 0 { probe.headers.set("Range", "bytes=0-0") }
            let response = try await send(probe, via: probeClient)
            if response.status == 403 {
                guard options.acknowledgeAbuse, !acknowledged else {
                    throw ProviderError(.forbidden, "gdrive \(remoteName): Drive flagged '\(file.path)' as malware or spam (cannotDownloadAbusiveFile); set acknowledge_abuse = true for this remote to download it anyway", status: 403)
                }
                logger.info("gdrive \(remoteName): '\(file.path)' is flagged as abusive; downloading with acknowledgeAbuse=true as configured")
                return try await request(for: file, acknowledgingAbuse: true)
            }
            return try await request(for: file, acknowledgingAbuse: acknowledged)
        default:
            let id = try fileID(file)
            let url = try driveURL(options.apiURL, "/drive/v3/files/\(PercentEncoding.encode(id))",
                                       [("fields", "id,trashed"), ("supportsAllDrives", "true")])
            let meta = try await get(url, as: DriveAPI.File.self)
            if meta.trashed == true {
                throw ProviderError(.notFound, "gdrive \(remoteName): '\(file.path)' was moved to the trash; the next pull removes it", status: status)
            }
            return try await request(for: file, acknowledgingAbuse: acknowledged)
        }
    }

    private func fileID(_ file: RemoteFile) throws -> String {
        guard let id = file.providerID, !id.isEmpty else {
            throw ProviderError(.notFound, "gdrive \(remoteName): '\(file.path)' has no Drive file id; run `cloudsync pull` again to refresh the listing")
        }
        return id
    }

    private func downloadURL(for file: RemoteFile, acknowledgingAbuse: Bool) throws -> URL {
        var items = [("alt", "media"), ("supportsAllDrives", "true")]
        if acknowledgingAbuse { items.append(("acknowledgeAbuse", "true")) }
        return try driveURL(options.contentURL ?? options.apiURL, "/drive/v3/files/\(PercentEncoding.encode(try fileID(file)))", items)
    }

    private func request(for file: RemoteFile, acknowledgingAbuse: Bool) async throws -> DownloadRequest {
        let url = try downloadURL(for: file, acknowledgingAbuse: acknowledgingAbuse)
        return DownloadRequest(url: url, headers: [(name: "Authorization", value: try await client.authorization() ?? "")],
                               sendsAuthOnRedirect: false)
    }
}

extension DriveAPI {
    /// `error.errors[0].reason` of an error answer, if it has one.
    static func reason(of response: HTTPResponse) -> String? {
        (try? JSONDecoder().decode(ErrorBody.self, from: response.body))?.error.errors?.first?.reason
    }
}

extension GoogleDriveProvider {
    /// `base` + `path` + the query, through the kit's one URL builder.
    func driveURL(_ base: URL, _ path: String, _ query: [(String, String)]) throws -> URL {
        try APIURL.build(base, path: path, query: query, remote: remoteName, setting: "api_url", example: "https://www.googleapis.com")
    }
}
