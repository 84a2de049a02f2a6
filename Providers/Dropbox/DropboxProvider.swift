import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// A Dropbox account (API v2). See docs/dropbox.md.
///
/// Listing is one recursive `list_folder` walk of the root (`limit` 2000, then `list_folder/continue` while
/// `has_more`): about one call per 2000 entries, files and folders alike. Its final cursor, with the root it was
/// made for, is the cursor handed back; with it, `list_folder/continue` returns only what changed. Downloads are
/// `POST /2/files/download` with `Dropbox-API-Arg: {"path":"rev:<rev>"}`, so every range of one file reads the
/// same revision. Files carry `content_hash` (``HashKind/dropbox``).
public final class DropboxProvider: TokenDownloadProvider {
    public let options: DropboxOptions
    public var remoteName: String { options.remoteName }

    private let client: APIClient
    /// The client whose token downloads carry (the kit's re-resolution refreshes it on a 401).
    public var apiClient: APIClient { client }
    private let audio: AudioFilter
    private let logger: Logger

    /// `transport` moves bytes, `pacer` retries 429/5xx and cut connections (honouring `Retry-After` or the body's
    /// `retry_after`), `tokens` gives the bearer token and refreshes it once when Dropbox says
    /// `expired_access_token`. Nothing is sent before the first call.
    public init(options: DropboxOptions, transport: any Transport, pacer: Pacer, tokens: any TokenSource,
                audio: AudioFilter, logger: Logger) {
        self.options = options
        self.audio = audio
        self.logger = logger
        let name = options.remoteName
        client = APIClient(transport: transport, pacer: pacer, tokens: tokens, auth: .bearer, logger: logger) { response in
            DropboxProvider.classify(status: response.status, headers: response.headers, body: response.body,
                                     route: DropboxProvider.route(of: response.head.url), remoteName: name)
        }
    }

    /// `content_hash` on every file, a change feed (cursor), ranges on downloads.
    public var capabilities: ProviderCapabilities {
        ProviderCapabilities(hashKinds: [.dropbox], hasChangeFeed: true, supportsRanges: true, caseInsensitivePaths: true)
    }

    // MARK: Listing

    /// Without a usable cursor (none, unreadable, made for another root, or refused by Dropbox with 409 `reset`)
    /// yields `.full` pages, one per `list_folder` answer, in Dropbox's order; the last carries the cursor.
    /// With a usable cursor yields `.changes`: the whole feed is read first (entries applied in order, so a file
    /// added and then deleted in the same feed is not reported), then at most one page of deletions (`.path`,
    /// a file or a whole folder, relative to the root; "" when the root itself went) followed by one page of
    /// upserts carrying the new cursor. Deletions therefore always apply before upserts.
    ///
    /// Skipped: folders, files that are not audio, `is_downloadable: false` files, and the root folder's own
    /// entry. Errors: 401 → `.unauthorized` (after one refresh for `expired_access_token`), root missing →
    /// `.notFound`, root is a file or malformed → `.configuration`, 429/5xx → retried, then `.rateLimited` /
    /// `.transient`; an answer that is not a `ListFolderResult` → `.invalidResponse`.
    public func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        ListingPage.stream { yield in try await self.list(cursor: cursor, yield: yield) }
    }

    private func list(cursor: String?, yield: @Sendable (ListingPage) -> Void) async throws {
        let root = Root(try options.normalizedRoot())
        switch cursor.map(DropboxCursor.open) {
        case .success(let state) where state.root == root.lower:
            do {
                try await listChanges(since: state.cursor, root: root, yield: yield)
                return
            } catch let error as ProviderError where error.code == .cursorReset {
                logger.info("dropbox \(remoteName): the change cursor was reset by Dropbox; listing everything again")
            }
        case .success(let state):
            logger.info("dropbox \(remoteName): the stored cursor belongs to another root ('\(state.root)'); listing everything again")
        case .failure(let refusal):
            logger.info("dropbox \(remoteName): \(refusal)")
        case nil:
            break
        }
        try await listFull(root: root, yield: yield)
    }

    private func listFull(root: Root, yield: @Sendable (ListingPage) -> Void) async throws {
        let arg = DropboxAPI.ListFolderArg(path: root.path, recursive: true, limit: min(2000, max(1, options.pageLimit)),
                                           include_non_downloadable_files: false)
        var result: DropboxAPI.ListFolderResult
        do {
            result = try await call("files/list_folder", arg)
        } catch var error as ProviderError {
            let shown = root.path.isEmpty ? "/" : root.path
            switch error.code {
            case .notFound:
                error.message = "the root folder '\(shown)' of Dropbox remote '\(remoteName)' does not exist; check root in the config"
            case .configuration:
                error.message = "the root '\(shown)' of Dropbox remote '\(remoteName)' is not a folder Dropbox can list (\(error.message)); check root in the config"
            default: break
            }
            throw error
        }
        while true {
            var files: [RemoteFile] = []
            for entry in result.entries {
                guard case .file(let meta) = entry, let (file, _) = remoteFile(meta, root: root) else { continue }
                if meta.is_downloadable == false { continue }
                files.append(file)
            }
            if !result.has_more {
                yield(ListingPage(kind: .full, upserts: files,
                                  cursor: try DropboxCursor(root: root.lower, cursor: result.cursor).sealed()))
                return
            }
            yield(ListingPage(kind: .full, upserts: files))
            do {
                result = try await call("files/list_folder/continue", DropboxAPI.ContinueArg(cursor: result.cursor))
            } catch var error as ProviderError where error.code == .cursorReset {
                error.message = "Dropbox invalidated the listing of remote '\(remoteName)' while it was being read (409 reset); run the pull again"
                throw error
            }
        }
    }

    private func listChanges(since cursor: String, root: Root, yield: @Sendable (ListingPage) -> Void) async throws {
        var feed = ChangeFeed()
        var current = cursor
        while true {
            let result = try await call("files/list_folder/continue", DropboxAPI.ContinueArg(cursor: current))
            for entry in result.entries { apply(entry, to: &feed, root: root) }
            current = result.cursor
            if !result.has_more { break }
        }
        if feed.rootGone {
            // The root folder (or an ancestor) was deleted or renamed: not "every track deleted". A full listing
            // tells: the root is back (recreated: what it holds now), or it is gone and the pull fails naming
            // `root`, the cache kept. Before, the cache was emptied and every later pull listed 0 tracks, exit 0.
            logger.info("dropbox \(remoteName): the change feed deletes the root folder itself; listing it again")
            try await listFull(root: root, yield: yield)
            return
        }
        if !feed.deletions.isEmpty { yield(ListingPage(kind: .changes, deletions: feed.deletions)) }
        yield(ListingPage(kind: .changes, upserts: feed.orderedUpserts,
                          cursor: try DropboxCursor(root: root.lower, cursor: current).sealed()))
    }

    /// The net effect of a change feed, entries applied in order.
    struct ChangeFeed {
        var deletions: [RemoteDeletion] = []
        /// The feed deleted the root or an ancestor of it (moved or renamed appears as that too).
        var rootGone = false
        /// By `path_lower`.
        var upserts: [String: RemoteFile] = [:]
        var order: [String] = []

        var orderedUpserts: [RemoteFile] {
            var seen = Set<String>()
            return order.compactMap { key in seen.insert(key).inserted ? upserts[key] : nil }
        }

        mutating func upsert(_ file: RemoteFile, key: String) {
            upserts[key] = file
            order.append(key)
        }

        /// Forgets earlier upserts at `key` or under it, and reports the deletion.
        mutating func delete(_ deletion: RemoteDeletion, key: String) {
            for k in upserts.keys where k == key || k.hasPrefix(key + "/") { upserts[k] = nil }
            deletions.append(deletion)
        }
    }

    func apply(_ entry: DropboxAPI.Metadata, to feed: inout ChangeFeed, root: Root) {
        switch entry {
        case .file(let meta):
            guard let (file, key) = remoteFile(meta, root: root) else { return }
            if meta.is_downloadable == false {
                feed.delete(.path(file.path), key: key)
            } else {
                feed.upsert(file, key: key)
            }
        case .deleted(let meta):
            guard let lower = meta.path_lower else { return }
            if lower == root.lower || root.lower.hasPrefix(lower + "/") {
                feed.rootGone = true
            } else if let relative = root.relative(lower: lower, display: meta.path_display) {
                feed.delete(.path(relative.display), key: lower)
            }
        case .folder, .other:
            return
        }
    }

    /// The `RemoteFile` for an audio file under the root, with its `path_lower` key; nil otherwise.
    func remoteFile(_ meta: DropboxAPI.FileMetadata, root: Root) -> (RemoteFile, String)? {
        guard let lower = meta.path_lower, let relative = root.relative(lower: lower, display: meta.path_display) else {
            logger.debug("dropbox \(remoteName): skipping an entry outside the root or without a path")
            return nil
        }
        guard audio.isAudio(name: meta.name) else { return nil }
        let modified = meta.server_modified.flatMap(RFC3339.parse) ?? meta.client_modified.flatMap(RFC3339.parse) ?? Date(timeIntervalSince1970: 0)
        let hashes = meta.content_hash.map { [ContentHash(kind: .dropbox, value: $0.lowercased())] } ?? []
        let file = RemoteFile(path: relative.display, providerID: meta.id, size: max(0, meta.size), modified: modified,
                              revision: meta.rev, hashes: hashes, mimeType: nil,
                              downloadHint: meta.path_display ?? lower)
        return (file, lower)
    }

    /// The configured root in request form and in lower case, and how paths under it become relative ones.
    struct Root: Sendable {
        /// "" or `/A/B`.
        let path: String
        let lower: String
        let depth: Int

        init(_ path: String) {
            self.path = path
            lower = path.lowercased()
            depth = path.split(separator: "/").count
        }

        /// The path relative to the root in display case (no leading slash), or nil when `lower` is the root
        /// itself or outside it. Membership is decided on `path_lower`; the display form drops as many leading
        /// components as the root has (falling back to `path_lower` when the two disagree in shape).
        func relative(lower: String, display: String?) -> (display: String, lower: String)? {
            guard lower.hasPrefix("/"), lower != self.lower else { return nil }
            if !self.lower.isEmpty && !lower.hasPrefix(self.lower + "/") { return nil }
            let lowerParts = lower.split(separator: "/", omittingEmptySubsequences: true)
            guard lowerParts.count > depth else { return nil }
            let relLower = lowerParts.dropFirst(depth).joined(separator: "/")
            if let display {
                let parts = display.split(separator: "/", omittingEmptySubsequences: true)
                if parts.count == lowerParts.count { return (parts.dropFirst(depth).joined(separator: "/"), relLower) }
            }
            return (relLower, relLower)
        }
    }

    // MARK: Downloads

    /// `POST {content_url}/2/files/download` with no body, `Authorization: Bearer`, an empty `Content-Type` and
    /// `Dropbox-API-Arg` in header-safe JSON: `{"path":"rev:<rev>"}` when the listing gave a revision (so every
    /// range reads the same bytes), else the file's full path. No API call; the request does not expire but
    /// carries the current access token: on a 401 from the content host use
    /// ``resolveDownload(for:rejected:status:)``.
    public func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        let url = try options.url(options.contentURL, route: "/2/files/download")
        let target: String
        if !file.revision.isEmpty {
            target = "rev:" + file.revision
        } else if let hint = file.downloadHint, hint.hasPrefix("/") {
            target = hint
        } else {
            target = try options.normalizedRoot() + "/" + file.path
        }
        return DownloadRequest(method: "POST", url: url, headers: [
            (name: "Authorization", value: try await client.authorization() ?? ""),
            (name: "Dropbox-API-Arg", value: DropboxAPI.pathArg(target)),
            // An empty value: libcurl would otherwise label a POST application/x-www-form-urlencoded, which the
            // content host refuses (it wants no type, an empty one, or application/octet-stream).
            (name: "Content-Type", value: ""),
        ], expiresAt: nil, sendsAuthOnRedirect: false, etag: nil)
    }

    // MARK: Calls and errors

    private func call<Arg: Encodable>(_ route: String, _ arg: Arg) async throws -> DropboxAPI.ListFolderResult {
        let url = try options.url(options.apiURL, route: "/2/" + route)
        return try await client.postJSON(to: url, body: try DropboxAPI.encode(arg), what: "Dropbox remote '\(remoteName)', \(route)")
    }

    /// "files/list_folder" for `https://host/2/files/list_folder`.
    static func route(of url: URL) -> String {
        let path = url.path
        return path.hasPrefix("/2/") ? String(path.dropFirst(3)) : path
    }

    /// Maps a Dropbox answer to an error; nil for 2xx. Statuses follow the kit's ``StatusTable``; the bodies
    /// (SDK `ParseError`: 401 `AuthError`, 409 the route's error union, 429 `RateLimitError`) refine them:
    ///
    /// - 401 `expired_access_token` → `.tokenExpired` (refreshed once); `user_suspended`, `missing_scope` say so.
    /// - 409 `reset` → `.cursorReset`; `not_found`/`not_file` → `.notFound`; `restricted_content`,
    ///   `unsupported_content_type`, `unsupported_file`, `locked` → `.forbidden`; `not_folder`, `malformed_path`
    ///   → `.configuration`; `insufficient_space` → `.quotaExceeded`; `too_many_write_operations` →
    ///   `.rateLimited`; others → `.invalidResponse`.
    /// - 429 → `.rateLimited` with `Retry-After`, else the body's `error.retry_after`, else nil (backoff).
    public static func classify(status: Int, headers: HTTPHeaders, body: Data, route: String, remoteName: String) -> ProviderError? {
        let error = DropboxAPI.ErrorBody(body)
        var answer = ErrorAnswer(provider: "Dropbox", remote: remoteName, call: "Dropbox \(route) for remote '\(remoteName)'",
                                 status: status, headers: headers,
                                 detail: (error?.summary ?? ProviderError.bodyExcerpt(body)).map { ": \($0)" })
        if status == 429 { answer.retryAfter = answer.retryAfter ?? error?.retryAfter }
        guard let error else { return answer.standard }
        switch status {
        case 401 where error.has("expired_access_token"):
            return answer.error(.tokenExpired, "the access token expired; cloudsync refreshes it")
        case 401 where error.has("user_suspended"):
            return answer.error(.unauthorized, "the Dropbox account is suspended; sort it out with Dropbox, then run `cloudsync login \(remoteName)`")
        case 401 where error.has("missing_scope"):
            return answer.error(.unauthorized, "the app lacks a permission it needs (files.metadata.read, files.content.read); run `cloudsync login \(remoteName)`")
        case 409 where error.has("reset"):
            return answer.error(.cursorReset)
        case 409 where error.has("not_found") || error.has("not_file"):
            return answer.error(.notFound)
        case 409 where ["restricted_content", "unsupported_content_type", "unsupported_file", "locked"].contains(where: error.has):
            return answer.error(.forbidden, "Dropbox will not serve this file; it is skipped")
        case 409 where error.has("not_folder") || error.has("malformed_path"):
            return answer.error(.configuration, "the path is not a folder Dropbox can list; check root in the config")
        case 409 where error.has("insufficient_space"):
            return answer.error(.quotaExceeded)
        case 409 where error.has("too_many_write_operations") || error.has("too_many_requests"):
            return answer.error(.rateLimited)
        default:
            return answer.standard
        }
    }
}
