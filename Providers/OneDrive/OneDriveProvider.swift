import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// A OneDrive remote (Personal or for Business) through Microsoft Graph v1.0. See docs/onedrive.md.
///
/// Listing uses the drive-root delta feed (`GET /v1.0/me/drive/root/delta`, the only delta Business offers),
/// keeps the items under the configured root, and rebuilds paths from parent ids. The cursor carries the
/// deltaLink and the id → (name, parent) map, so later listings are `.changes` that include folder renames.
/// Downloads use the item's pre-authenticated `@microsoft.graph.downloadUrl`, never sent the token.
public final class OneDriveProvider: TokenDownloadProvider {
    /// Most upserts plus deletions in one yielded page.
    public static let entriesPerPage = 1000

    public let options: OneDriveOptions
    public var remoteName: String { options.remoteName }

    private let client: APIClient
    /// The client whose token the `/content` fallback carries (the kit's re-resolution refreshes it on a 401).
    public var apiClient: APIClient { client }
    private let audio: AudioFilter
    private let logger: Logger

    /// `tokens` supplies `Authorization: Bearer` values (an `OAuthRefresher` built with
    /// `options.oauthClient(clientID:)` in practice); `pacer` retries 429/503 (honouring Retry-After) and
    /// 408/500/502/504/509 and cut connections. Nothing is sent before the first call.
    public init(options: OneDriveOptions, transport: any Transport, pacer: Pacer, tokens: any TokenSource,
                audio: AudioFilter, logger: Logger) {
        self.options = options
        self.audio = audio
        self.logger = logger
        let name = options.remoteName
        client = APIClient(transport: transport, pacer: pacer, tokens: tokens, auth: .bearer, logger: logger) { response in
            GraphAPI.classify(response, remoteName: name)
        }
    }

    /// quickXorHash on every file (Personal and Business); SHA-1/SHA-256 are published too when Graph has them.
    public var capabilities: ProviderCapabilities {
        // quickXor on every file; OneDrive for Business adds SHA-256 and SHA-1, which the engine then prefers.
        ProviderCapabilities(hashKinds: [.quickXor, .sha256, .sha1], hasChangeFeed: true, supportsRanges: true,
                             caseInsensitivePaths: true)
    }

    // MARK: Listing

    /// Without a usable cursor: a `.full` listing of every audio file under the root, after following the
    /// delta feed from the drive root to its `@odata.deltaLink` (one API call per delta page).
    /// With a cursor from an earlier listing: `.changes` from its deltaLink — upserts for new, changed and moved
    /// files (including every file under a renamed or moved folder), `.path` deletions for paths no file holds
    /// any more. A cursor made for another root or audio filter, an unreadable one, or Graph answering 410
    /// (`resyncRequired`) gives a `.full` listing instead.
    ///
    /// Pages are yielded only after the whole feed was read (an interrupted listing yields nothing); the last
    /// page carries the cursor. Skipped: packages (OneNote), malware-flagged files, shared folders, non-audio
    /// files. Audio = the `audio` facet, an `audio/*` `file.mimeType`, or the extension.
    ///
    /// Errors: `.notFound` when the configured root is not a folder of the drive; `.tokenExpired`/`.unauthorized`
    /// when the token cannot be refreshed; `.rateLimited`/`.transient` once the pacer's retries are spent;
    /// `.invalidResponse` for answers that do not follow the Graph documents.
    public func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        ListingPage.stream { yield in
            for page in try await self.list(cursor: cursor) { yield(page) }
        }
    }

    func list(cursor: String?) async throws -> [ListingPage] {
        var start = try rootDeltaURL()
        switch cursor.map(OneDriveCursor.open) {
        case .success(let state) where fits(state):
            do {
                var tree = state.tree
                let link = try await enumerate(from: try rebase(state.deltaLink), into: &tree)
                return try pages(kind: .changes, old: state.tree, new: tree, deltaLink: link)
            } catch let error as ProviderError where error.code == .cursorReset {
                logger.info("onedrive \(remoteName): the change token expired (HTTP 410); listing everything again")
                if let location = (error.cause as? GraphAPI.ResyncRequired)?.location { start = try rebase(location.absoluteString) }
            }
        case .success:
            logger.info("onedrive \(remoteName): the stored cursor was made for another root or audio filter; listing everything")
        case .failure(let refusal):
            logger.info("onedrive \(remoteName): \(refusal)")
        case nil:
            break
        }
        var tree = OneDriveTree()
        let link: String
        do {
            link = try await enumerate(from: start, into: &tree)
        } catch let error as ProviderError where error.code == .cursorReset {
            logger.info("onedrive \(remoteName): the delta enumeration was reset (HTTP 410); starting again")
            tree = OneDriveTree()
            link = try await enumerate(from: try rootDeltaURL(), into: &tree)
        }
        return try pages(kind: .full, old: nil, new: tree, deltaLink: link)
    }

    /// `{api_url}/v1.0/me/drive/root/delta?$select=…[&$top=N]`.
    func rootDeltaURL() throws -> URL {
        var text = apiBase() + "/v1.0/me/drive/root/delta?$select=" + GraphAPI.deltaSelect.joined(separator: ",")
        if let top = options.pageSize { text += "&$top=\(top)" }
        guard let url = URL(string: text) else {
            throw ProviderError(.configuration, "OneDrive remote '\(remoteName)': api_url '\(redactedURL(options.apiURL))' cannot be used; set it to https://graph.microsoft.com or a national cloud's Graph host")
        }
        return url
    }

    private func apiBase() -> String {
        var base = options.apiURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }

    /// A link from Graph (`@odata.nextLink`, `@odata.deltaLink`, a 410 `Location`), followed verbatim except
    /// that its origin is replaced by `api_url`'s when they differ: the token only ever goes to `api_url`.
    func rebase(_ link: String) throws -> URL {
        guard let url = URL(string: link, relativeTo: options.apiURL)?.absoluteURL,
              var parts = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let api = URLComponents(url: options.apiURL, resolvingAgainstBaseURL: false) else {
            throw ProviderError(.invalidResponse, "OneDrive remote '\(remoteName)': Graph returned a paging link that is not a URL; run the command again, and report it if it persists")
        }
        if parts.scheme?.lowercased() == api.scheme?.lowercased() && parts.host?.lowercased() == api.host?.lowercased() && parts.port == api.port {
            return url
        }
        logger.debug("onedrive \(remoteName): a paging link points at \(parts.host ?? "?"); sending it to api_url's host instead")
        parts.scheme = api.scheme
        parts.host = api.host
        parts.port = api.port
        guard let rebased = parts.url else {
            throw ProviderError(.invalidResponse, "OneDrive remote '\(remoteName)': cannot re-base a paging link onto api_url; check api_url")
        }
        return rebased
    }

    /// Follows `@odata.nextLink` from `start` until a page carries `@odata.deltaLink`, applying every item to
    /// `tree` in order; returns the deltaLink. Stops on absence of nextLink, never on a short or empty page.
    func enumerate(from start: URL, into tree: inout OneDriveTree) async throws -> String {
        var url = start
        var seen: Set<String> = []
        let name = remoteName
        let log = logger
        while true {
            try Task.checkCancellation()
            guard seen.insert(url.absoluteString).inserted else {
                throw ProviderError(.invalidResponse, "OneDrive remote '\(remoteName)': the delta feed sent the same nextLink twice; run the command again later")
            }
            let page = try await client.getJSON(GraphAPI.DeltaPage.self, from: url, what: "OneDrive remote '\(remoteName)', the delta feed")
            for item in page.value {
                tree.apply(item, audio: audio) { level, message in log.log(level, "onedrive \(name): \(message)") }
            }
            if let next = page.nextLink {
                url = try rebase(next)
            } else if let delta = page.deltaLink {
                return delta
            } else {
                throw ProviderError(.invalidResponse, "OneDrive remote '\(remoteName)': a delta page had neither @odata.nextLink nor @odata.deltaLink; run the command again later")
            }
        }
    }

    /// The listing's pages: `.full` lists every file of `new`; `.changes` the difference from `old`.
    func pages(kind: ListingKind, old: OneDriveTree?, new: OneDriveTree, deltaLink: String) throws -> [ListingPage] {
        let root = options.rootSegments
        let (files, found) = new.resolvedFiles(under: root)
        guard found else {
            throw ProviderError(.notFound, "OneDrive remote '\(remoteName)': the root folder '\(options.root)' does not exist on the drive (renamed or deleted?); set root in the config to an existing folder such as \"/Music\", or \"\" for the whole drive")
        }
        var upserts: [RemoteFile]
        var deletions: [RemoteDeletion] = []
        if let old {
            (upserts, deletions) = oneDriveChanges(from: old.resolvedFiles(under: root).files, to: files)
        } else {
            upserts = files.values.sorted { $0.path < $1.path }
        }
        let cursor = try OneDriveCursor(root: OneDriveCursor.key(root: root), audio: OneDriveCursor.key(audio: audio),
                                        deltaLink: deltaLink, tree: new.pruned()).sealed()
        var result: [ListingPage] = []
        var pendingDeletions = deletions[...]
        var pendingUpserts = upserts[...]
        repeat {
            let d = Array(pendingDeletions.prefix(Self.entriesPerPage))
            pendingDeletions = pendingDeletions.dropFirst(d.count)
            let u = Array(pendingUpserts.prefix(Self.entriesPerPage - d.count))
            pendingUpserts = pendingUpserts.dropFirst(u.count)
            result.append(ListingPage(kind: kind, upserts: u, deletions: d))
        } while !pendingDeletions.isEmpty || !pendingUpserts.isEmpty
        result[result.count - 1].cursor = cursor
        logger.debug("onedrive \(remoteName): \(kind == .full ? "full listing" : "changes"): \(upserts.count) upserts, \(deletions.count) deletions")
        return result
    }

    /// Whether `state` was made for this remote's root and audio filter.
    func fits(_ state: OneDriveCursor) -> Bool {
        state.root == OneDriveCursor.key(root: options.rootSegments) && state.audio == OneDriveCursor.key(audio: audio)
    }

    // MARK: Downloads

    /// One Graph call, `GET /v1.0/me/drive/items/{id}?$select=id,@microsoft.graph.downloadUrl` (shared items:
    /// `/v1.0/drives/{driveId}/items/{id}`), returning the pre-authenticated URL with no headers at all (it must
    /// never get the token) and `expiresAt` = now + `downloadLinkLifetime`; the same URL serves every range.
    /// When Graph leaves the annotation out, falls back to `GET …/items/{id}/content` with `Authorization`,
    /// whose 302 the transport follows without the header (`sendsAuthOnRedirect: false`).
    ///
    /// Errors: `.notFound` when the item is gone (list again); token, throttling and server errors as for listing.
    public func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        let path = try itemPath(for: file)
        guard let lookup = URL(string: apiBase() + "/v1.0/" + path + "?$select=id," + GraphAPI.downloadURLAnnotation),
              let content = URL(string: apiBase() + "/v1.0/" + path + "/content") else {
            throw ProviderError(.configuration, "OneDrive remote '\(remoteName)': cannot build a download URL from api_url '\(redactedURL(options.apiURL))'; fix api_url")
        }
        let response: HTTPResponse
        do {
            response = try await client.send(HTTPRequest(url: lookup, headers: ["Accept": "application/json"]))
        } catch var error as ProviderError where error.code == .notFound {
            error.message = "OneDrive remote '\(remoteName)': '\(file.path)' no longer exists on the drive; run `cloudsync pull` again to refresh the listing"
            throw error
        }
        let item = try? JSONDecoder().decode(GraphAPI.Item.self, from: response.body)
        if let link = item?.downloadURL, let url = URL(string: link),
           let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host?.isEmpty == false {
            return DownloadRequest(url: url, headers: [], expiresAt: Date().addingTimeInterval(options.downloadLinkLifetime),
                                   sendsAuthOnRedirect: false)
        }
        logger.debug("onedrive \(remoteName): no \(GraphAPI.downloadURLAnnotation) for '\(file.path)'; downloading through /content")
        var headers: [(name: String, value: String)] = []
        if let auth = try await client.authorization() { headers.append((name: "Authorization", value: auth)) }
        return DownloadRequest(url: content, headers: headers, expiresAt: nil, sendsAuthOnRedirect: false)
    }

    /// `drives/{driveId}/items/{id}` for shared items, else `me/drive/items/{id}`.
    func itemPath(for file: RemoteFile) throws -> String {
        if let hint = file.downloadHint, hint.hasPrefix("drives/") { return hint }
        guard let id = file.providerID, !id.isEmpty else {
            throw ProviderError(.notFound, "OneDrive remote '\(remoteName)': '\(file.path)' has no item id; run `cloudsync pull` again to refresh the listing")
        }
        return "me/drive/items/" + PercentEncoding.encode(id, .pathSegment)
    }
}
