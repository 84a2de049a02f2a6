import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization

/// A generic WebDAV (RFC 4918) remote: Apache mod_dav, nginx dav-ext, rclone serve, Nextcloud/ownCloud, IIS,
/// Synology, webdav.yandex.ru. See docs/webdav.md.
///
/// Listing walks the tree breadth-first with `PROPFIND Depth: 1` (never `infinity`, which Apache, nginx and
/// ownCloud refuse), at most ``maxConcurrentPropfinds`` at once, one request per folder and none per file, within
/// `options.walkLimits`. Each answer is parsed while it arrives (libxml2's push parser) and only the folder's files
/// and subfolders are kept, never the document. There is no change feed: every listing is `.full` and cursors are
/// ignored.
public final class WebDAVProvider: Provider {
    /// PROPFINDs in flight at once during a listing.
    public static let maxConcurrentPropfinds = 4

    public let options: WebDAVOptions
    public var remoteName: String { options.remoteName }

    private let client: APIClient
    /// `options.url` and `options.root` checked and split once; a bad URL fails every call the same way.
    private let base: Result<BaseLocation, ProviderError>
    /// The `Authorization` header (config and the URL's user info), checked once. A secret: never logged.
    private let authorization: Result<String?, ProviderError>
    private let audio: AudioFilter
    private let logger: Logger
    /// Hash kinds seen in `oc:checksums` so far.
    private let seenHashKinds = Mutex<Set<HashKind>>([])

    /// `transport` moves bytes, `pacer` retries 423/425/429/500/502/503/504/509 and cut connections,
    /// `audio` decides which files are listed. Nothing is sent before the first call.
    public init(options: WebDAVOptions, transport: any Transport, pacer: Pacer, audio: AudioFilter, logger: Logger) {
        self.options = options
        self.audio = audio
        self.logger = logger
        base = Result { try Self.baseLocation(options) }.mapError { $0 as? ProviderError ?? ProviderError(.configuration, "\($0)") }
        authorization = Result { try options.resolvedAuthorization() }
            .mapError { $0 as? ProviderError ?? ProviderError(.configuration, "\($0)") }
        let host = options.url.host ?? "<no host>"
        let name = options.remoteName
        let sendsCredentials = (try? options.resolvedAuthorization()).flatMap { $0 } != nil
        self.client = APIClient(transport: transport, pacer: pacer, tokens: nil, logger: logger) { response in
            WebDAVProvider.classify(response, host: host, remoteName: name, sentCredentials: sendsCredentials)
        }
    }

    /// No change feed; SHA-1/MD5 once the server has sent `oc:checksums` (ownCloud, Nextcloud).
    public var capabilities: ProviderCapabilities {
        ProviderCapabilities(hashKinds: seenHashKinds.withLock { $0 }, hasChangeFeed: false, supportsRanges: true)
    }

    // MARK: Listing

    /// Yields one `.full` page per folder answer that holds audio files (the root's page always, even when
    /// empty), every page with a nil cursor; `cursor` is ignored. Entries come in no particular order but the
    /// listing is complete when the stream ends without error.
    ///
    /// Errors: on the root, 401 → `.unauthorized`, 404/409 → `.notFound`, 403 → `.forbidden`, a body that is
    /// not a multistatus, over 32 MiB or not finished within the API deadline → `.invalidResponse`;
    /// 423/425/429/500/502/503/504/509 and cut connections are retried by the pacer and surface as
    /// `.rateLimited`/`.transient` once retries are spent, an unreachable host as `.unreachable`. A subfolder
    /// that cannot be read — 403/404/409, malformed XML, over the cap, too slow, too deep — is logged as a warning
    /// and reported in `skippedFolders` (its known files are kept); any other subfolder failure ends the listing with
    /// that error. More folders than `walkLimits.maxFolders` end it with `.invalidResponse`.
    public func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        ListingPage.stream { yield in try await self.walk(yield) }
    }

    private enum FolderOutcome: Sendable {
        case listed(folder: [String], files: [RemoteFile], subfolders: [[String]])
        case skipped(folder: [String])
    }

    private func walk(_ yield: @Sendable (ListingPage) -> Void) async throws {
        let base = try baseLocation()
        _ = try authorization.get()
        var frontier = WalkFrontier(limits: options.walkLimits, remote: remoteName, root: options.root, start: [])
        try await FolderWalk.run(start: [[String]()], concurrency: Self.maxConcurrentPropfinds,
                                 read: { folder in try await self.listFolder(folder, base: base) }) { outcome in
            switch outcome {
            case .skipped(let folder):
                yield(ListingPage(kind: .full, skippedFolders: [folder.joined(separator: "/")]))
                return []
            case .listed(let folder, let files, let subfolders):
                if folder.isEmpty || !files.isEmpty { yield(ListingPage(kind: .full, upserts: files)) }
                let (list, tooDeep) = try frontier.admit(subfolders, depth: \.count, shown: { $0.joined(separator: "/") })
                for folder in tooDeep { logger.warning("webdav: \(frontier.limits.tooDeep(remote: remoteName, folder: folder))") }
                if !tooDeep.isEmpty { yield(ListingPage(kind: .full, skippedFolders: tooDeep)) }
                return list
            }
        }
    }

    /// The encoded URL prefix of the mirrored root (ends with `/`) and its decoded path segments.
    struct BaseLocation: Sendable {
        var urlPrefix: String
        var segments: [String]

        /// URL of the folder or file at `relative` (decoded segments under the root), each segment encoded.
        func url(for relative: [String], isFolder: Bool) -> URL? { URL(string: urlString(for: relative, isFolder: isFolder)) }

        /// ``url(for:isFolder:)``'s text, without parsing it (a listing names every file's URL).
        func urlString(for relative: [String], isFolder: Bool) -> String {
            urlPrefix + relative.map { PercentEncoding.encode($0) }.joined(separator: "/") + (isFolder && !relative.isEmpty ? "/" : "")
        }
    }

    func baseLocation() throws -> BaseLocation { try base.get() }

    private static func baseLocation(_ options: WebDAVOptions) throws -> BaseLocation {
        let url = options.url
        let remoteName = options.remoteName
        guard var comps = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let scheme = comps.scheme?.lowercased(), scheme == "http" || scheme == "https", comps.host?.isEmpty == false else {
            throw ProviderError(.configuration,
                "remote \(remoteName): url '\(redactedURL(url))' is not an http(s) URL; set url to the WebDAV collection, e.g. https://cloud.example.com/remote.php/dav/files/me/Music/")
        }
        comps.query = nil
        comps.fragment = nil
        comps.user = nil
        comps.password = nil
        var path = comps.percentEncodedPath
        guard let urlSegments = WebDAVPath.decodeSegments(ofEncodedPath: Substring(path)) else {
            throw ProviderError(.configuration, "remote \(remoteName): url '\(redactedURL(url))' has a path that is not valid percent-encoded UTF-8; fix url in the config")
        }
        if !path.hasSuffix("/") { path += "/" }
        let rootSegments = options.root.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if rootSegments.contains(where: { $0 == "." || $0 == ".." }) {
            throw ProviderError(.configuration, "remote \(remoteName): root '\(options.root)' may not contain '.' or '..'; name a folder under url")
        }
        comps.percentEncodedPath = path
        guard let prefix = comps.string else {
            throw ProviderError(.configuration, "remote \(remoteName): url '\(redactedURL(url))' cannot be used; fix url in the config")
        }
        let rootTail = rootSegments.map { PercentEncoding.encode($0) + "/" }.joined()
        return BaseLocation(urlPrefix: prefix + rootTail, segments: urlSegments + rootSegments)
    }

    private func listFolder(_ folder: [String], base: BaseLocation) async throws -> FolderOutcome {
        try Task.checkCancellation()
        let shownFolder = folder.joined(separator: "/")
        guard let url = base.url(for: folder, isFolder: true) else {
            logger.warning("webdav \(remoteName): cannot build a URL for folder '\(shownFolder)'; skipped")
            return .skipped(folder: folder)
        }
        var request = HTTPRequest(method: "PROPFIND", url: url, headers: [
            "Depth": "1",
            "Content-Type": "application/xml; charset=utf-8",
            "Accept": "application/xml, text/xml",
        ], body: WebDAVAPI.propfindBody)
        if let auth = try authorization.get() { request.headers.set("Authorization", auth) }
        let isRoot = folder.isEmpty
        let shown = redactedURL(url)
        let contents: FolderContents
        do {
            let (_, reader) = try await client.send(request, streamingInto: { [self] in
                try FolderReader(provider: self, folder: folder, requestURL: url, base: base)
            })
            contents = try reader.finish()
        } catch var error as ProviderError {
            if isRoot {
                switch error.code {
                case .notFound:
                    error.message = "WebDAV collection \(shown) of remote \(remoteName) does not exist (HTTP \(error.status ?? 404)); check url and root in the config"
                case .forbidden:
                    error.message = "WebDAV server refused to list \(shown) of remote \(remoteName) (HTTP 403); check the account's permissions, url and root"
                case .invalidResponse:
                    error.message = "WebDAV remote \(remoteName) cannot list \(shown): \(error.message)"
                default: break
                }
                throw error
            }
            switch error.code {
            case .notFound, .forbidden:
                logger.warning("webdav \(remoteName): cannot read folder '\(shownFolder)' (HTTP \(error.status.map(String.init) ?? "?")); skipped")
                return .skipped(folder: folder)
            case .invalidResponse:
                logger.warning("webdav \(remoteName): cannot read folder '\(shownFolder)': \(error.message); skipped")
                return .skipped(folder: folder)
            default:
                throw error
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            let message = "WebDAV server answered PROPFIND \(shown) of remote \(remoteName) with an unreadable body (\(error)); check that url points at a WebDAV collection"
            if isRoot { throw ProviderError(.invalidResponse, message, status: 207) }
            logger.warning("webdav \(remoteName): \(message); folder skipped")
            return .skipped(folder: folder)
        }
        if !contents.hashKinds.isEmpty { seenHashKinds.withLock { $0.formUnion(contents.hashKinds) } }
        return .listed(folder: folder, files: contents.files, subfolders: contents.subfolders)
    }

    /// Audio files and subfolders among `entries`, the answer for `folder` (each as ``interpret(_:folder:requestPath:base:)``).
    func interpret(_ entries: [WebDAVAPI.Entry], folder: [String], requestURL: URL, base: BaseLocation)
        -> (files: [RemoteFile], subfolders: [[String]]) {
        var contents = FolderContents()
        let requestPath = Self.requestPath(of: requestURL)
        for entry in entries { contents.add(interpret(entry, folder: folder, requestPath: requestPath, base: base)) }
        if !contents.hashKinds.isEmpty { seenHashKinds.withLock { $0.formUnion(contents.hashKinds) } }
        return (contents.files, contents.subfolders)
    }

    /// The percent-encoded path hrefs of an answer to `url` are resolved against.
    static func requestPath(of url: URL) -> String {
        URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? "/"
    }

    /// What one entry of the answer for `folder` is: an audio file, a subfolder, or nothing to list. The folder's
    /// own entry is skipped; hrefs that do not resolve under the mirrored root are logged and skipped. Entries
    /// deeper than one level (servers that ignore `Depth`) are kept: their paths are still right.
    func interpret(_ entry: WebDAVAPI.Entry, folder: [String], requestPath: String, base: BaseLocation) -> ListedEntry? {
        guard let segments = WebDAVPath.resolve(href: entry.href, requestPath: requestPath) else {
            logger.warning("webdav \(remoteName): skipping an entry whose href is not valid percent-encoded UTF-8 in the listing of '\(folder.joined(separator: "/"))'")
            return nil
        }
        guard segments.count >= base.segments.count, Array(segments.prefix(base.segments.count)) == base.segments else {
            logger.warning("webdav \(remoteName): skipping href '/\(segments.joined(separator: "/"))': it is outside the mirrored collection")
            return nil
        }
        let relative = Array(segments.dropFirst(base.segments.count))
        if relative == folder || relative.isEmpty { return nil }
        if entry.isCollection { return .subfolder(relative) }
        let path = relative.joined(separator: "/")
        let mime = entry.contentType.flatMap { $0.isEmpty ? nil : $0 }
        guard audio.isAudio(name: relative[relative.count - 1], mimeType: mime) else { return nil }
        guard let sizeText = entry.contentLength, let size = Int64(sizeText), size >= 0 else {
            logger.warning("webdav \(remoteName): skipping '\(path)': the server gave no usable getcontentlength (\(entry.contentLength.map { "'\($0.prefix(40))'" } ?? "none"))")
            return nil
        }
        let modified: Date
        if let text = entry.lastModified, let date = HTTPDate.parse(text) ?? RFC3339.parse(text) {
            modified = date
        } else {
            logger.debug("webdav \(remoteName): '\(path)' has no readable getlastmodified (\(entry.lastModified ?? "none")); using 1970-01-01")
            modified = Date(timeIntervalSince1970: 0)
        }
        let hashes = WebDAVAPI.hashes(fromChecksums: entry.checksums)
        return .file(RemoteFile(path: path, size: size, modified: modified, revision: entry.etag ?? "",
                                hashes: hashes, mimeType: mime))
    }

    // MARK: Downloads

    /// The resource URL (built from `file.path` under the current url/root, each segment percent-encoded)
    /// with the `Authorization` header, which must not follow a redirect to another host, and the listing's
    /// ETag when it is strong (usable for `If-Range`). No network call. nginx lists no ETag: the engine then
    /// takes the one from the first GET, and size + Last-Modified is the fingerprint.
    public func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        let base = try baseLocation()
        let relative = file.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !relative.isEmpty, !relative.contains(where: { $0 == "." || $0 == ".." }),
              let url = base.url(for: relative, isFolder: false) else {
            throw ProviderError(.notFound, "remote \(remoteName): '\(file.path)' is not a file path under the collection; run `cloudsync pull` again to refresh the listing")
        }
        var headers: [(name: String, value: String)] = []
        if let auth = try authorization.get() { headers.append((name: "Authorization", value: auth)) }
        return DownloadRequest(url: url, headers: headers, sendsAuthOnRedirect: false, etag: EntityTag.ifRangeValidator(file.revision))
    }

    // MARK: Errors

    /// Maps a PROPFIND answer to an error (nil for 207): the kit's ``StatusTable`` (rclone's WebDAV
    /// `retryErrorCodes` and more), refined by RFC 4918: any other 2xx is not a collection's listing; 409 means a
    /// missing parent collection (→ `.notFound`, as 404/410); 405/501 mean no WebDAV there (→ `.configuration`).
    /// `sentCredentials` false (no password anywhere) turns a 401 into a hint to log in or set one.
    static func classify(_ response: HTTPResponse, host: String, remoteName: String,
                         sentCredentials: Bool = true) -> ProviderError? {
        let status = response.status
        let shown = redactedURL(response.head.url)
        let answer = ErrorAnswer(provider: "the WebDAV server", remote: remoteName, call: "WebDAV PROPFIND \(shown)",
                                 status: status, headers: response.headers)
        switch status {
        case 207: return nil
        case 200..<300 where response.head.isHTMLPage:
            return answer.error(.invalidResponse, "an HTML page came where a 207 Multi-Status was due: \(HTTPResponseHead.strangerAdvice); "
                + "else check that url points at a WebDAV collection")
        case 200..<300:
            return answer.error(.invalidResponse, "a 207 Multi-Status was due; check that url points at a WebDAV collection")
        case 401 where !sentCredentials:
            return ProviderError(.unauthorized, "WebDAV server at \(host) asks for a password and remote \(remoteName) has none: run cloudsync login \(remoteName) (or set password / password_command)", status: status)
        case 401:
            return ProviderError(.unauthorized, "WebDAV server at \(host) refused the credentials for remote \(remoteName): check user/password (or password_command)", status: status)
        case 404, 409, 410:
            return answer.error(.notFound, "no such collection on the WebDAV server; check url and root")
        case 405, 501:
            return answer.error(.configuration, "it does not accept PROPFIND: it is not a WebDAV collection; check url")
        default:
            return answer.standard ?? answer.error(.invalidResponse, "neither a listing nor an error; check url")
        }
    }

}

/// One entry of a folder's answer, as listed.
enum ListedEntry: Sendable {
    case file(RemoteFile)
    case subfolder([String])
}

/// What one folder's answer holds: all a listing keeps of it.
struct FolderContents: Sendable {
    var files: [RemoteFile] = []
    var subfolders: [[String]] = []
    /// Hash kinds seen in `oc:checksums`.
    var hashKinds: Set<HashKind> = []

    mutating func add(_ entry: ListedEntry?) {
        switch entry {
        case .file(let file):
            files.append(file)
            hashKinds.formUnion(file.hashes.map(\.kind))
        case .subfolder(let segments):
            subfolders.append(segments)
        case nil:
            break
        }
    }
}

/// The sink of one folder's PROPFIND: accepts a 207 and parses it with the streaming parser, turning each
/// `<response>` into a file or subfolder as it is read; ``finish()`` ends the parse. The transport calls `write` on
/// its network thread, one call at a time, and the caller calls `finish` after `send` returned; the lock makes that
/// ordering explicit, hence `@unchecked Sendable` (the parser is a non-Sendable class it owns alone).
///
/// The network thread only gathers the body: a body is parsed once complete, by ``finish()`` on the caller's
/// thread, or, past ``deferredBytes``, in pieces of that size as it arrives, so a folder of any size costs
/// bounded memory. (Parsing every piece on the loop thread was 12 % of its samples in a pull of 2,000 files in 221
/// folders, time the transfers beside it waited for.)
final class FolderReader: ResponseBodySink, @unchecked Sendable {
    static let deferredBytes = 1 << 20
    private let lock = NSLock()
    private let parser: MultistatusParser
    private let contents: ContentsBox
    /// Bytes received and not parsed yet (under `lock`).
    private var pending: [UInt8] = []

    /// Written by the parser's entry callback, which runs inside `lock`.
    private final class ContentsBox {
        var value = FolderContents()
    }

    init(provider: WebDAVProvider, folder: [String], requestURL: URL, base: WebDAVProvider.BaseLocation) throws {
        let box = ContentsBox()
        let requestPath = WebDAVProvider.requestPath(of: requestURL)
        parser = try MultistatusParser { entry in
            box.value.add(provider.interpret(entry, folder: folder, requestPath: requestPath, base: base))
        }
        contents = box
    }

    func accepts(_ head: HTTPResponseHead) -> Bool { head.status == 207 }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        try lock.withLock {
            pending.append(contentsOf: bytes)
            if pending.count >= Self.deferredBytes { try parsePending() }
        }
    }

    /// Feeds `pending` to the parser (under `lock`).
    private func parsePending() throws {
        if pending.isEmpty { return }
        try pending.withUnsafeBytes { try parser.feed($0) }
        pending.removeAll(keepingCapacity: true)
    }

    /// Ends the document and returns what the folder holds. Throws `WebDAVAPI.ParseError` when it was incomplete or
    /// no multistatus (an empty 207 included).
    func finish() throws -> FolderContents {
        try lock.withLock {
            try parsePending()
            pending = []
            try parser.finish()
            return contents.value
        }
    }
}
