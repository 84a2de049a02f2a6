import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// A Yandex.Disk remote through the REST API v1 (https://yandex.com/dev/disk-api/doc/en/). See docs/yandex.md.
///
/// Every API call and every GET of a download `href` carries `Authorization: OAuth <token>` (never `Bearer`).
/// Listing is one request per page: the flat `resources/files?media_type=audio` list when the root is the whole
/// disk, else a breadth-first walk of `resources?path=` folder pages. There is no change feed: every listing is
/// `.full` and cursors are ignored; the engine compares fingerprints (size, modified, revision).
public final class YandexDiskProvider: TokenDownloadProvider {
    public let options: YandexOptions
    public var remoteName: String { options.remoteName }

    private let client: APIClient
    /// The client whose token every GET of a download href carries (the kit's re-resolution refreshes it on a 401).
    public var apiClient: APIClient { client }
    private let audio: AudioFilter
    private let logger: Logger
    private let root: [String]

    /// `transport` moves bytes; `pacer` retries 429/503 (honouring `Retry-After`), 5xx and cut connections;
    /// `tokens` supplies the OAuth token and refreshes it once when the API answers `UnauthorizedError`;
    /// `audio` decides which files of a folder walk are listed. Nothing is sent before the first call.
    public init(options: YandexOptions, transport: any Transport, pacer: Pacer, tokens: any TokenSource,
                audio: AudioFilter, logger: Logger) {
        self.options = options
        self.audio = audio
        self.logger = logger
        self.root = YandexAPI.rootSegments(options.root)
        let name = options.remoteName
        self.client = APIClient(transport: transport, pacer: pacer, tokens: tokens, auth: .oauth, logger: logger) {
            YandexDiskProvider.classify($0, remoteName: name)
        }
    }

    /// MD5 and SHA-256 on every file; no change feed; the download host honours Range.
    public var capabilities: ProviderCapabilities {
        ProviderCapabilities(hashKinds: [.md5, .sha256], hasChangeFeed: false, supportsRanges: true)
    }

    /// Whether listings use the flat audio list (root is the whole disk and `flatListing` is on).
    var usesFlatListing: Bool { root.isEmpty && options.flatListing }

    // MARK: Listing

    /// Yields `.full` pages, one per API answer that holds audio files (at least one page, maybe empty), all with
    /// a nil cursor; `cursor` is ignored. The listing is complete when the stream ends without error.
    ///
    /// Paging: folder pages continue until `offset >= _embedded.total` whatever their length (pages may be
    /// short); the flat list has no `total` in the documents, so it ends at an empty page (a short one may be a
    /// server's cap), or at `offset >= total` when a total is present.
    ///
    /// Errors (`ProviderError`): the root missing → `.notFound` naming it; the root being a file → `.configuration`;
    /// a refused token → `.unauthorized` after one refresh; 429/503/5xx are retried by the pacer and surface as
    /// `.rateLimited`/`.transient` once retries are spent. A subfolder that vanished during the walk is skipped with
    /// a warning (its files are gone too); any other failure ends the listing (a partial `.full` listing would look
    /// like deletions). A walk stays within `options.walkLimits`: a folder deeper than `maxDepth` is not listed and
    /// is reported in `skippedFolders`; more than `maxFolders` folders end the listing with `.invalidResponse`.
    public func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        ListingPage.stream { yield in
            let yielded = self.usesFlatListing ? try await self.listFlat(yield) : try await self.walk(yield)
            if !yielded { yield(ListingPage(kind: .full)) }
        }
    }

    /// `GET /v1/disk/resources/files?media_type=audio&limit&offset&fields`, page after page. Returns whether a page
    /// was yielded.
    private func listFlat(_ yield: @Sendable (ListingPage) -> Void) async throws -> Bool {
        var offset = 0
        var yielded = false
        var pages = 0
        var previous: (first: String?, last: String?)?
        while true {
            try Task.checkCancellation()
            let url = try apiURL("/v1/disk/resources/files", [
                ("media_type", "audio"), ("limit", String(options.pageSize)), ("offset", String(offset)),
                ("fields", YandexAPI.filesFields),
            ])
            let list: YandexAPI.FilesResourceList = try await getJSON(url, what: "the flat list of audio files")
            pages += 1
            let items = list.items ?? []
            // Paging on to an empty page needs a server that pages: one answering another offset, or the same page
            // again, would be read forever.
            let page = (first: items.first?.path, last: items.last?.path)
            if let answered = list.offset, answered != offset {
                throw ProviderError(.invalidResponse, "yandex \(remoteName): the flat list answered offset \(answered) to a request for offset \(offset); it cannot be paged (set flatListing = false to walk the folders)")
            }
            if !items.isEmpty, let previous, previous == page {
                throw ProviderError(.invalidResponse, "yandex \(remoteName): the flat list answered the same page for offset \(offset) as for the one before; it cannot be paged (set flatListing = false to walk the folders)")
            }
            previous = page
            let files = items.compactMap { flatFile($0) }
            if !files.isEmpty {
                yield(ListingPage(kind: .full, upserts: files))
                yielded = true
            }
            offset += items.count
            // Without a total, only an empty page ends the list: a short page may be a server capping its pages
            // below the limit asked (the documents give no maximum) while its answer repeats that limit, and
            // taking it for the end lost every track after it, silently. One request more per listing.
            if items.isEmpty { break }
            if let total = list.total, offset >= total { break }
        }
        logger.debug("yandex \(remoteName): flat audio list read in \(pages) request(s), \(offset) item(s)")
        return yielded
    }

    /// A file of the flat list (already filtered by `media_type=audio` on the server), or nil with a log line.
    func flatFile(_ item: YandexAPI.Resource) -> RemoteFile? {
        if let type = item.type, type != "file" { return nil }
        if let media = item.media_type, media != "audio",
           !audio.isAudio(name: item.name ?? item.path ?? "", mimeType: item.mime_type) { return nil }
        guard let path = item.path, let segments = YandexAPI.segments(ofAPIPath: path), !segments.isEmpty else {
            logger.warning("yandex \(remoteName): skipping a listed file without a usable disk path")
            return nil
        }
        return remoteFile(item, segments: segments)
    }

    private struct FolderTask: Sendable {
        var segments: [String]
        var offset: Int
    }

    private enum FolderOutcome: Sendable {
        case listed(FolderTask, files: [RemoteFile], subfolders: [[String]], next: Int?)
        case skipped
    }

    /// Breadth-first walk from the root, at most `maxConcurrentRequests` folder pages at once; the pages of one
    /// folder are read in order. Returns whether a page was yielded.
    private func walk(_ yield: @Sendable (ListingPage) -> Void) async throws -> Bool {
        var frontier = WalkFrontier(limits: options.walkLimits, remote: remoteName, root: options.root, start: root)
        var yielded = false
        var requests = 0
        let root = root
        try await FolderWalk.run(start: [FolderTask(segments: root, offset: 0)], concurrency: options.maxConcurrentRequests,
                                 read: { task in try await self.listFolderPage(task) }) { outcome in
            requests += 1
            guard case .listed(let task, let files, let subfolders, let nextOffset) = outcome else { return [] }
            if !files.isEmpty {
                yield(ListingPage(kind: .full, upserts: files))
                yielded = true
            }
            var queue = nextOffset.map { [FolderTask(segments: task.segments, offset: $0)] } ?? []
            let (list, tooDeep) = try frontier.admit(subfolders, depth: { $0.count - root.count },
                                                     shown: { $0.dropFirst(root.count).joined(separator: "/") })
            for folder in tooDeep { logger.warning("yandex: \(frontier.limits.tooDeep(remote: remoteName, folder: folder))") }
            queue += list.map { FolderTask(segments: $0, offset: 0) }
            if !tooDeep.isEmpty { yield(ListingPage(kind: .full, skippedFolders: tooDeep)) }
            return queue
        }
        logger.debug("yandex \(remoteName): walked \(frontier.visited.count) folder(s) in \(requests) request(s)")
        return yielded
    }

    /// One page of one folder: `GET /v1/disk/resources?path&limit&offset&fields`.
    private func listFolderPage(_ task: FolderTask) async throws -> FolderOutcome {
        try Task.checkCancellation()
        let isRoot = task.segments == root && task.offset == 0
        let shown = task.segments.joined(separator: "/")
        let url = try apiURL("/v1/disk/resources", [
            ("path", YandexAPI.diskPath(task.segments)), ("limit", String(options.pageSize)),
            ("offset", String(task.offset)), ("fields", YandexAPI.folderFields),
        ])
        let resource: YandexAPI.Resource
        do {
            resource = try await getJSON(url, what: "folder '\(shown)'")
        } catch var error as ProviderError where error.code == .notFound {
            if task.segments == root {
                error.message = "the root folder '\(options.root)' of remote '\(remoteName)' does not exist on Yandex.Disk (DiskNotFoundError); check root in the config"
                throw error
            }
            logger.warning("yandex \(remoteName): folder '\(shown)' disappeared during the listing; skipped")
            return .skipped
        }
        if isRoot, resource.type == "file" {
            throw ProviderError(.configuration, "the root '\(options.root)' of remote '\(remoteName)' is a file, not a folder; set root to the folder that holds the music")
        }
        guard let list = resource._embedded else {
            if resource.type == "dir" || resource.type == nil {
                throw ProviderError(.invalidResponse, "Yandex.Disk answered the listing of folder '\(shown)' of remote '\(remoteName)' without _embedded; check api_url")
            }
            return .listed(task, files: [], subfolders: [], next: nil)
        }
        let items = list.items ?? []
        var files: [RemoteFile] = []
        var subfolders: [[String]] = []
        for item in items {
            guard let segments = childSegments(item, parent: task.segments) else {
                logger.warning("yandex \(remoteName): skipping an entry of folder '\(shown)' without a usable path or name")
                continue
            }
            switch item.type {
            case "dir":
                subfolders.append(segments)
            case "file":
                let name = item.name ?? segments[segments.count - 1]
                guard item.media_type == "audio" || audio.isAudio(name: name, mimeType: item.mime_type) else { continue }
                if let file = remoteFile(item, segments: segments) { files.append(file) }
            default:
                logger.debug("yandex \(remoteName): skipping '\(segments.joined(separator: "/"))' of unknown type \(item.type ?? "none")")
            }
        }
        let following = task.offset + items.count
        var more = false
        if !items.isEmpty {
            if let total = list.total {
                more = following < total
            } else {
                let limit = min(options.pageSize, list.limit.flatMap { $0 > 0 ? $0 : nil } ?? options.pageSize)
                more = items.count >= limit
            }
        }
        return .listed(task, files: files, subfolders: subfolders, next: more ? following : nil)
    }

    /// A child's segments: from its `path` when it lies directly or deeper under `parent`, else `parent + name`.
    private func childSegments(_ item: YandexAPI.Resource, parent: [String]) -> [String]? {
        if let path = item.path, let segments = YandexAPI.segments(ofAPIPath: path),
           segments.count > parent.count, Array(segments.prefix(parent.count)) == parent {
            return segments
        }
        guard let name = item.name, !name.isEmpty, !name.contains("/") else { return nil }
        return parent + [name]
    }

    /// The `RemoteFile` of a file at `segments` (from the disk root), or nil when it lies outside the root or has
    /// no size.
    func remoteFile(_ item: YandexAPI.Resource, segments: [String]) -> RemoteFile? {
        guard segments.count > root.count, Array(segments.prefix(root.count)) == root else { return nil }
        let relative = segments.dropFirst(root.count).joined(separator: "/")
        if segments.contains(where: { $0 == "." || $0 == ".." }) {
            logger.warning("yandex \(remoteName): skipping '\(relative)': '.' or '..' in its path")
            return nil
        }
        guard let size = item.size, size >= 0 else {
            logger.warning("yandex \(remoteName): skipping '\(relative)': the API gave no size")
            return nil
        }
        let modified: Date
        if let text = item.modified, let date = RFC3339.parse(text) {
            modified = date
        } else {
            logger.debug("yandex \(remoteName): '\(relative)' has no readable modified date; using 1970-01-01")
            modified = Date(timeIntervalSince1970: 0)
        }
        var hashes: [ContentHash] = []
        if let sha = item.sha256?.lowercased(), !sha.isEmpty { hashes.append(ContentHash(kind: .sha256, value: sha)) }
        if let md5 = item.md5?.lowercased(), !md5.isEmpty { hashes.append(ContentHash(kind: .md5, value: md5)) }
        let revision = item.revision?.text ?? hashes.first?.value ?? ""
        return RemoteFile(path: relative, providerID: item.resource_id, size: size, modified: modified,
                          revision: revision, hashes: hashes, mimeType: item.mime_type,
                          downloadHint: YandexAPI.diskPath(segments))
    }

    // MARK: Downloads

    /// One API call: `GET /v1/disk/resources/download?path=` → `Link {href, method, templated}`. The request is the
    /// href with `Authorization: OAuth <token>`, kept across the redirect to another host (the documents say to
    /// GET the href "using the same OAuth token"). No `expiresAt`: the href's lifetime is not documented, so the
    /// engine reuses it until the download host refuses it (then ``resolveDownload(for:rejected:status:)``).
    ///
    /// Errors: the file gone → `.notFound` (list again); a templated or unusable href → `.invalidResponse`;
    /// the API's own errors as in listings.
    public func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        let diskPath = try apiPath(of: file)
        let url = try apiURL("/v1/disk/resources/download", [("path", diskPath)])
        let link: YandexAPI.Link
        do {
            link = try await getJSON(url, what: "the download link of '\(file.path)'")
        } catch var error as ProviderError where error.code == .notFound {
            error.message = "'\(file.path)' no longer exists on Yandex.Disk of remote '\(remoteName)'; run `cloudsync pull` again to refresh the listing"
            throw error
        }
        guard link.templated != true else {
            throw ProviderError(.invalidResponse, "Yandex.Disk gave a templated download link for '\(file.path)' of remote '\(remoteName)'; cloudsync cannot fill it in, try again later")
        }
        guard let href = link.href, let target = URL(string: href),
              let scheme = target.scheme?.lowercased(), scheme == "https" || scheme == "http", target.host?.isEmpty == false else {
            throw ProviderError(.invalidResponse, "Yandex.Disk gave no usable download link for '\(file.path)' of remote '\(remoteName)'; try again later or check api_url")
        }
        let method = (link.method?.isEmpty == false ? link.method : nil)?.uppercased() ?? "GET"
        return DownloadRequest(method: method, url: target,
                               headers: [(name: "Authorization", value: try await client.authorization() ?? "")],
                               expiresAt: nil, sendsAuthOnRedirect: true)
    }

    /// The API path of a listed file: the listing's `disk:/...` path, else the root plus `file.path`.
    private func apiPath(of file: RemoteFile) throws -> String {
        if let hint = file.downloadHint, let segments = YandexAPI.segments(ofAPIPath: hint), !segments.isEmpty {
            return YandexAPI.diskPath(segments)
        }
        let relative = file.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !relative.isEmpty, !relative.contains(where: { $0 == "." || $0 == ".." }) else {
            throw ProviderError(.notFound, "remote '\(remoteName)': '\(file.path)' is not a file path under the root; run `cloudsync pull` again to refresh the listing")
        }
        return YandexAPI.diskPath(root + relative)
    }

    // MARK: Requests

    private func apiURL(_ path: String, _ query: [(String, String)]) throws -> URL {
        try APIURL.build(options.apiURL, path: path, query: query, remote: remoteName, setting: "api_url",
                         example: "https://cloud-api.yandex.net")
    }

    /// GETs `url` through the API client and decodes its JSON. A token still refused after the one refresh becomes
    /// `.unauthorized` telling the user to log in again.
    private func getJSON<T: Decodable>(_ url: URL, what: String) async throws -> T {
        let request = HTTPRequest(method: "GET", url: url, headers: ["Accept": "application/json"])
        let response: HTTPResponse
        do {
            response = try await client.send(request)
        } catch var error as ProviderError where error.code == .tokenExpired {
            error.code = .unauthorized
            error.message = "Yandex.Disk refused the token of remote '\(remoteName)' even after refreshing it (UnauthorizedError); run `cloudsync login \(remoteName)`"
            throw error
        }
        return try APIClient.decode(T.self, from: response, what: "Yandex.Disk remote '\(remoteName)', \(what)")
    }
}
