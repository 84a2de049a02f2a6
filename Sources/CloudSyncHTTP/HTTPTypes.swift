import CloudSyncCore
import Foundation
import Synchronization

/// Ordered HTTP header fields with case-insensitive lookup. Values may hold secrets: never log them.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }
    public init(dictionaryLiteral elements: (String, String)...) { fields = elements.map { ($0.0, $0.1) } }

    /// The first value of `name`.
    public subscript(name: String) -> String? {
        fields.first { ASCII.equalsIgnoringCase($0.name, name) }?.value
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { ASCII.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// Replaces every field named `name` with one, or removes them when `value` is nil.
    public mutating func set(_ name: String, _ value: String?) {
        remove(name)
        if let value { fields.append((name, value)) }
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    public mutating func remove(_ name: String) {
        fields.removeAll { ASCII.equalsIgnoringCase($0.name, name) }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }
}

/// A request. `body` is small (API calls); downloads stream their responses, never their requests.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: HTTPHeaders
    public var body: Data?
    /// Header names that carry credentials. They are dropped when a redirect leaves the original host
    /// unless `keepsAuthAcrossHosts`. `Authorization` is always among them.
    public var authHeaderNames: Set<String>
    /// Yandex download hrefs need the token on the content host; OneDrive's must never get it.
    public var keepsAuthAcrossHosts: Bool

    public init(method: String = "GET", url: URL, headers: HTTPHeaders = [:], body: Data? = nil,
                authHeaderNames: Set<String> = [], keepsAuthAcrossHosts: Bool = false) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.authHeaderNames = authHeaderNames.union(["authorization"])
        self.keepsAuthAcrossHosts = keepsAuthAcrossHosts
    }
}

/// Status line and headers of a final (non-redirect) response.
public struct HTTPResponseHead: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    /// The URL that answered, after redirects. May be signed: never log it unredacted.
    public var url: URL

    public init(status: Int, headers: HTTPHeaders, url: URL) {
        self.status = status
        self.headers = headers
        self.url = url
    }
}

extension HTTPResponseHead {
    /// Whether the answer is an HTML page: what a network's login page (a captive portal) or a proxy sends in the
    /// cloud's place, never an API's JSON, a WebDAV listing or a track.
    public var isHTMLPage: Bool {
        headers["Content-Type"].map { ASCII.hasPrefixIgnoringCase($0, "text/html") } ?? false
    }

    /// The advice for an answer that may not come from the cloud at all.
    public static let strangerAdvice = "something else may have answered in the cloud's place — a network's login page "
        + "(a hotel's, a train's: log in to it in a browser first) or a proxy"
}

/// A whole, small response (API calls, error bodies).
public struct HTTPResponse: Sendable {
    public var head: HTTPResponseHead
    public var body: Data

    public init(head: HTTPResponseHead, body: Data) {
        self.head = head
        self.body = body
    }

    public var status: Int { head.status }
    public var headers: HTTPHeaders { head.headers }
}

/// Receives downloaded bytes at absolute file offsets. Called on a transport thread, in order of arrival;
/// a thrown error (e.g. ENOSPC) aborts the transfer and is rethrown by the transport unchanged.
public protocol ByteSink: Sendable {
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws
    /// False while the sink cannot take more bytes yet (its durability work lags): the transfer is paused, not
    /// failed, and asked again every few milliseconds. Called on the transport thread before each write.
    func acceptsBytes() -> Bool
    /// Bytes the transport may gather before one `write` (0: every piece as it arrives). libcurl hands a body
    /// over in pieces of at most 16 KiB; a sink writing to a file takes them in bigger writes, which cost the
    /// kernel less per byte (a `pwrite` of 128 KiB instead of eight of 16 KiB: on ext4 0.34 instead of 0.49 s
    /// of CPU per GiB, copy included; on tmpfs 0.53 instead of 0.62). A sink whose bytes a reader waits for
    /// (`serve`'s) keeps 0. The gathered bytes are written when the batch is full and when the transfer ends,
    /// cut or cancelled included, before the outcome is reported.
    var writeBatchBytes: Int { get }
    /// The file slot this download needs (``TransferSlot``); nil (the default) starts at once.
    var slot: TransferSlot? { get }
    /// Called on the transport thread once the final head of a 200 or 206 is in, before any body byte: false
    /// ends the exchange there, nothing written (the outcome has the head and an empty `delivered`). A sink
    /// holding bytes of one version of a file refuses an answer that names another (a new `ETag`, or a
    /// `totalSize` — the 206's `Content-Range` total, the 200's `Content-Length` — other than the file's), so
    /// the two never meet in it, not even until the caller sees the head.
    func acceptsVersion(_ head: HTTPResponseHead, totalSize: Int64?) -> Bool
}

extension ByteSink {
    public func acceptsVersion(_ head: HTTPResponseHead, totalSize: Int64?) -> Bool { true }
    public func acceptsBytes() -> Bool { true }
    public var writeBatchBytes: Int { 0 }
    public var slot: TransferSlot? { nil }
}

/// Bounds how many files a transport downloads at once. A download whose sink names a slot starts when its file
/// is transferring already (another stream of it: segments) or fewer than `files` files are; otherwise it waits
/// in the transport, on its network thread, and starts there the moment a file's last transfer ends: no thread
/// hand-off between one file's end and the next file's start. Downloads of files that transferred lately (a
/// redirect's next hop, a file's next range) start before those of new files, each kind in the order asked.
///
/// So a pull can open more files than it downloads at once: their bookkeeping (opening the entry, analysing
/// a start set, queueing the promotion) overlaps other files' transfers, and the connections never wait for it.
public struct TransferSlot: Sendable {
    /// The file: all of its downloads share one slot.
    public var file: ObjectIdentifier
    /// Most files transferring at once.
    public var files: Int
    /// Called once the transport has the request (before it waits for a slot or starts), on the caller's thread:
    /// what is asked after this reaches the transport after it.
    public var queued: (@Sendable () -> Void)?
    /// Asked, on the network thread, when a download that waited for a slot would start: false (its remote was
    /// paused meanwhile: a 429's `Retry-After`) fails it with ``Deferred`` instead, before any byte is asked for.
    public var startsNow: (@Sendable () -> Bool)?

    /// A download that waited for its slot did not start (``startsNow``): ask again once the remote may be asked.
    /// `Pacer.run` does so without counting an attempt.
    public struct Deferred: Error {}

    public init(file: ObjectIdentifier, files: Int, queued: (@Sendable () -> Void)? = nil,
                startsNow: (@Sendable () -> Bool)? = nil) {
        self.file = file
        self.files = max(1, files)
        self.queued = queued
        self.startsNow = startsNow
    }
}

/// What a ranged download delivered.
public struct DownloadOutcome: Sendable {
    public var head: HTTPResponseHead
    /// Bytes handed to the sink, as absolute offsets. Empty when the status was not 200/206.
    public var delivered: Range<Int64>
    /// The server answered 200 to a ranged request: bytes before the requested start were skipped, and
    /// `delivered` may run to the end of the file.
    public var rangeIgnored: Bool
    /// Total size from `Content-Range` (206 or 416) or `Content-Length` (200), when known.
    public var totalSize: Int64?
    /// Body of a non-2xx answer (bounded), for error mapping.
    public var errorBody: Data

    public init(head: HTTPResponseHead, delivered: Range<Int64>, rangeIgnored: Bool, totalSize: Int64?, errorBody: Data = Data()) {
        self.head = head
        self.delivered = delivered
        self.rangeIgnored = rangeIgnored
        self.totalSize = totalSize
        self.errorBody = errorBody
    }
}

/// Receives the body of an API answer while it arrives (``Transport/send(_:into:)``), so a large answer — a WebDAV
/// folder of 20,000 tracks — need not be held whole. Called on the transport's network thread, in order of arrival:
/// keep each call short (gather the bytes; parse them on the caller's thread, as WebDAV's `FolderReader` does
/// below 1 MiB).
public protocol ResponseBodySink: Sendable {
    /// Whether the body of this final answer (not a redirect that is followed) streams into this sink. Called once,
    /// before any body byte. When false, the body is returned in ``HTTPResponse/body`` instead, at most the
    /// transport's error-body limit (64 KiB for `CurlTransport`), for error mapping.
    func accepts(_ head: HTTPResponseHead) -> Bool
    /// The next bytes of an accepted body. A thrown error aborts the exchange and is rethrown by `send` unchanged.
    func write(_ bytes: UnsafeRawBufferPointer) throws
}

/// Moves bytes. Implementations follow redirects themselves (at most 10, 303 → GET), dropping the
/// request's auth headers when the host changes unless `keepsAuthAcrossHosts`, and follow only http and https.
/// A host that cannot be reached at all (DNS failure, refused connection, no route, connect timeout) throws
/// `ProviderError` with code `.unreachable`; other network failures `.transient`; any HTTP status is returned,
/// not thrown.
public protocol Transport: Sendable {
    /// Sends an API request. The body of the final answer streams into `sink` when the sink accepts its head (the
    /// returned response's `body` is then empty); otherwise it is returned whole, bounded, for error mapping. An
    /// accepted body over the transport's cap (32 MiB for `CurlTransport`) fails with `.invalidResponse`, as does an
    /// answer that does not end within the transport's API deadline (`CurlTransportOptions.apiTimeout`).
    func send(_ request: HTTPRequest, into sink: any ResponseBodySink) async throws -> HTTPResponse

    /// GETs (or POSTs, for Dropbox) `range` of a file into `sink`. Sends `Range: bytes=a-b` when `range` is
    /// not nil and `If-Range: ifRange` when given. A 206 must carry a `Content-Range` matching the request,
    /// else `.invalidResponse` is thrown before any byte is written. A 200 to a ranged request sets
    /// `rangeIgnored` and bytes before `range.lowerBound` are discarded, never written at a wrong offset.
    /// Other statuses write nothing and return the head and a bounded `errorBody`. Downloads have no overall
    /// deadline: a big file may take as long as it keeps moving.
    ///
    /// `whenRangeIgnored` says what a 200 to a ranged request does: `.skipToOffset` reads the body and
    /// writes from `range.lowerBound` on; `.stop` ends the exchange before any body byte (the outcome has
    /// `rangeIgnored` and nothing delivered), for callers that fetch other ranges of the file in parallel.
    func download(_ request: HTTPRequest, range: ClosedRange<Int64>?, ifRange: String?, whenRangeIgnored: IgnoredRange,
                  into sink: any ByteSink) async throws -> DownloadOutcome
}

extension Transport {
    /// Sends `request` and returns the whole response body, whatever the status (capped like any streamed body).
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let collector = BodyCollector()
        var response = try await send(request, into: collector)
        response.body = collector.body
        return response
    }
}

/// Keeps every body whole: the sink behind ``Transport/send(_:)``.
public final class BodyCollector: ResponseBodySink {
    private let storage = Mutex(Data())

    public init() {}

    public func accepts(_ head: HTTPResponseHead) -> Bool { true }

    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        storage.withLock { $0.append(contentsOf: bytes) }
    }

    /// The bytes received so far.
    public var body: Data { storage.withLock { $0 } }
}

/// What a download does when the server answers a ranged request with the whole representation (200).
public enum IgnoredRange: Sendable {
    /// Discard the bytes before the range, then write the rest at their offsets.
    case skipToOffset
    /// End the exchange before any body byte.
    case stop
}

extension Transport {
    /// A download that reads on when the server ignores Range (`.skipToOffset`).
    public func download(_ request: HTTPRequest, range: ClosedRange<Int64>?, ifRange: String?,
                         into sink: any ByteSink) async throws -> DownloadOutcome {
        try await download(request, range: range, ifRange: ifRange, whenRangeIgnored: .skipToOffset, into: sink)
    }
}
