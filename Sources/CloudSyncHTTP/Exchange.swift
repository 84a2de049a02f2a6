import CCurl
import CloudSyncCore
import Foundation
import Synchronization

/// Where the body of one exchange goes.
enum BodyMode {
    /// API calls: the final answer's body goes to `sink` when it accepts the head (more than `limit` bytes fails the
    /// exchange), else up to `errorLimit` bytes are kept for error mapping.
    case stream(sink: any ResponseBodySink, limit: Int, errorLimit: Int)
    /// A ranged download into `sink`; non-2xx bodies are kept up to `errorLimit` bytes.
    case download(range: ClosedRange<Int64>?, sink: any ByteSink, errorLimit: Int, whenRangeIgnored: IgnoredRange)
}

/// What one exchange (one request, one response, no redirect following) produced.
struct ExchangeResult: Sendable {
    var status: Int
    var headers: HTTPHeaders
    /// The kept body (error bodies, or nothing when it was streamed).
    var body: Data
    /// Body bytes received: streamed to a sink or kept in `body`.
    var bodyBytes: Int
    var delivered: Range<Int64>
    var rangeIgnored: Bool
    var totalSize: Int64?
}

/// The transfer was cut after some bytes reached the sink: resume from `delivered.upperBound`.
/// Carried as the `cause` of the `.transient` error thrown by `download`.
public struct InterruptedTransfer: Error, Sendable, CustomStringConvertible {
    /// Bytes handed to the sink before the failure, as absolute offsets (may be empty).
    public var delivered: Range<Int64>
    /// libcurl's error code (`CURLcode`) and its text.
    public var curlCode: Int
    public var detail: String

    public var description: String { "\(detail) (curl error \(curlCode)) after \(delivered.count) bytes" }
}

/// Idle easy handles kept for reuse: a fresh handle allocates (and page-faults) a new receive buffer,
/// which dominates the cost of small files. Handles here are in no multi handle.
///
/// Only handles whose transfer ended cleanly come back (``Exchange``): after some failures — a resolver failure
/// in libcurl 7.88 — a handle keeps its receive buffer through `curl_easy_reset`, and the next `CURLOPT_BUFFERSIZE`
/// on it is refused (`CURLE_BAD_FUNCTION_ARGUMENT`, which read as a too-old libcurl and stopped the remote).
final class EasyHandlePool: Sendable {
    private let idle = Mutex<[UnsafeMutableRawPointerBox]>([])
    private let capacity: Int

    init(capacity: Int = 16) { self.capacity = capacity }

    deinit { idle.withLock { for box in $0 { curl_easy_cleanup(box.pointer) } } }

    /// A reset handle, or a new one (nil when curl_easy_init fails).
    func take() -> UnsafeMutableRawPointer? {
        if let box = idle.withLock({ $0.popLast() }) { return box.pointer }
        return curl_easy_init()
    }

    /// Keeps `handle`, which its owner has reset with `curl_easy_reset` (so no pointer into the owner outlives it).
    func put(_ handle: UnsafeMutableRawPointer) {
        let kept = idle.withLock { list -> Bool in
            guard list.count < capacity else { return false }
            list.append(UnsafeMutableRawPointerBox(pointer: handle))
            return true
        }
        if !kept { curl_easy_cleanup(handle) }
    }
}

/// An easy handle crossing threads while idle; only one owner at a time uses it.
struct UnsafeMutableRawPointerBox: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

/// One request on one easy handle, owned by `CurlLoop` while it runs. Everything after `init` happens on the
/// loop thread except `cancelled`, hence `@unchecked Sendable`. Frees its handle, header list and error
/// buffer in `deinit`.
final class Exchange: @unchecked Sendable {
    let easy: UnsafeMutableRawPointer
    let hostDescription: String
    private let method: String
    /// Method and ``redactedLink(_:)`` of the URL, for messages: built only when one is (parsing the URL again
    /// for every request cost ~2.5 % of a small-file pull's user time).
    var requestDescription: String { "\(method) \(redactedLink(url))" }
    /// The URL asked for (may be signed: never log it whole).
    private let url: URL
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let mode: BodyMode
    /// The file slot a download needs before it starts (``TransferSlot``).
    let slot: TransferSlot?
    private let limiter: BandwidthLimiter?

    let cancelled = Atomic<Bool>(false)
    /// The transfer ran into the API deadline given to `init` (loop thread; read after completion).
    private(set) var missedDeadline = false
    private let deadline: ContinuousClock.Instant?
    /// The transfer ended cleanly (`CURLE_OK`), so the handle may serve another request.
    private var reusable = false
    var continuation: CheckedContinuation<ExchangeResult, any Error>?
    weak var loop: CurlLoop?

    // Response state (loop thread).
    private var status = 0
    private var headers = HTTPHeaders()
    private var headComplete = false
    private var failure: (any Error)?
    private var body = Data()
    private var bodyBytes = 0
    private var target = Target.discard
    private var deliveredStart: Int64 = 0
    private var rangeIgnored = false
    /// The transfer was ended after the head, on purpose: a 200 to a ranged request with `.stop`, or an answer
    /// the sink refused (``ByteSink/acceptsVersion(_:totalSize:)``).
    private var stoppedAtHead = false
    private var totalSize: Int64?
    /// Body bytes of a `.sink` download gathered for one write (``ByteSink/writeBatchBytes``), allocated on the
    /// first piece: `batched` bytes from `batchOffset`.
    private var batch: UnsafeMutableRawBufferPointer?
    private var batched = 0
    private var batchOffset: Int64 = 0

    private enum Target {
        case discard
        /// Keep at most `limit` bytes in `body`, silently dropping the rest.
        case collect(limit: Int)
        /// Hand the bytes to `sink`; past `limit` in all the answer is refused.
        case stream(any ResponseBodySink, limit: Int)
        /// Writes at `offset`, after skipping `skip` bytes; past `end` (exclusive) the server is lying.
        case sink(any ByteSink, offset: Int64, skip: Int64, end: Int64?)
    }

    private let pool: EasyHandlePool

    /// `deadline` bounds the whole exchange (`CURLOPT_TIMEOUT_MS`); nil for downloads.
    init(request: HTTPRequest, extraHeaders: [(String, String)], mode: BodyMode, options: CurlTransportOptions,
         acceptsCompression: Bool, deadline: ContinuousClock.Instant? = nil, pool: EasyHandlePool) throws {
        self.pool = pool
        self.deadline = deadline
        guard let easy = pool.take() else {
            throw ProviderError(.transient, "curl_easy_init failed (out of memory?)")
        }
        self.easy = easy
        self.mode = mode
        if case .download(_, let sink, _, _) = mode { slot = sink.slot } else { slot = nil }
        self.limiter = options.bandwidth
        hostDescription = request.url.host ?? "<no host>"
        method = request.method
        url = request.url
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        try configure(request: request, extraHeaders: extraHeaders, options: options, acceptsCompression: acceptsCompression)
    }

    deinit {
        // Pointers into this object (callbacks' user data, error buffer, header list) must not outlive it.
        if reusable {
            curl_easy_reset(easy)
            pool.put(easy)
        } else {
            curl_easy_cleanup(easy)
        }
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
        batch?.deallocate()
    }

    private func check(_ rc: CURLcode, _ what: String) throws {
        guard rc == CURLE_OK else {
            throw ProviderError(.configuration, "libcurl refused option \(what): \(String(cString: curl_easy_strerror(rc))); the installed libcurl may be too old (7.85 or later is needed)")
        }
    }

    private func configure(request: HTTPRequest, extraHeaders: [(String, String)], options: CurlTransportOptions,
                           acceptsCompression: Bool) throws {
        let h = easy
        guard let scheme = request.url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw ProviderError(.configuration, "\(redactedLink(request.url)) is not an http or https URL; check the remote's URL settings")
        }
        try check(cloudsync_curl_setopt_string(h, CURLOPT_URL, request.url.absoluteString), "URL")
        try check(cloudsync_curl_setopt_string(h, CURLOPT_PROTOCOLS_STR, "http,https"), "PROTOCOLS_STR")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_FOLLOWLOCATION, 0), "FOLLOWLOCATION")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1), "NOSIGNAL")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_TCP_NODELAY, 1), "TCP_NODELAY")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_TCP_KEEPALIVE, 1), "TCP_KEEPALIVE")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS), "HTTP_VERSION")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_BUFFERSIZE, options.receiveBufferSize), "BUFFERSIZE")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000)), "CONNECTTIMEOUT_MS")
        if let deadline {
            let left = deadline - ContinuousClock.now
            let ms = max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            try check(cloudsync_curl_setopt_long(h, CURLOPT_TIMEOUT_MS, Int(ms)), "TIMEOUT_MS")
        }
        var lowSpeed = options.lowSpeedLimit
        if let limiter = options.bandwidth {
            // A deliberately slow transfer must not trip the stall detector.
            lowSpeed = min(lowSpeed, Int(limiter.bytesPerSecond / 16))
        }
        if lowSpeed > 0 && options.lowSpeedTime > 0 {
            try check(cloudsync_curl_setopt_long(h, CURLOPT_LOW_SPEED_LIMIT, lowSpeed), "LOW_SPEED_LIMIT")
            try check(cloudsync_curl_setopt_long(h, CURLOPT_LOW_SPEED_TIME, Int(options.lowSpeedTime.rounded(.up))), "LOW_SPEED_TIME")
        }
        try check(cloudsync_curl_setopt_string(h, CURLOPT_USERAGENT, options.userAgent), "USERAGENT")
        try check(cloudsync_curl_setopt_pointer(h, CURLOPT_ERRORBUFFER, errorBuffer), "ERRORBUFFER")
        if let caFile = options.caFile {
            try check(cloudsync_curl_setopt_string(h, CURLOPT_CAINFO, caFile), "CAINFO")
        }
        if acceptsCompression {
            try check(cloudsync_curl_setopt_string(h, CURLOPT_ACCEPT_ENCODING, ""), "ACCEPT_ENCODING")
        }

        let method = request.method.uppercased()
        switch method {
        case "GET":
            try check(cloudsync_curl_setopt_long(h, CURLOPT_HTTPGET, 1), "HTTPGET")
        case "HEAD":
            try check(cloudsync_curl_setopt_long(h, CURLOPT_NOBODY, 1), "NOBODY")
        default:
            if method != "POST" {
                try check(cloudsync_curl_setopt_string(h, CURLOPT_CUSTOMREQUEST, method), "CUSTOMREQUEST")
            }
            if method == "POST" || request.body != nil {
                let body = request.body ?? Data()
                try check(cloudsync_curl_setopt_off(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)), "POSTFIELDSIZE_LARGE")
                // COPYPOSTFIELDS copies `POSTFIELDSIZE_LARGE` bytes now, so `body` need not outlive this call.
                let rc = body.withUnsafeBytes { raw -> CURLcode in
                    let empty: StaticString = ""
                    let pointer = raw.baseAddress ?? UnsafeRawPointer(empty.utf8Start)
                    return cloudsync_curl_setopt_pointer(h, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: pointer))
                }
                try check(rc, "COPYPOSTFIELDS")
            }
        }

        var list: UnsafeMutablePointer<curl_slist>?
        // curl would add "Expect: 100-continue" to larger bodies and wait for the answer; bodies are small.
        var lines = ["Expect:"]
        for (name, value) in request.headers.fields + extraHeaders.map({ (name: $0.0, value: $0.1) }) {
            // "Name;" is curl's spelling of a header with an empty value; "Name:" would remove it.
            lines.append(value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        for line in lines {
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw ProviderError(.transient, "curl_slist_append failed (out of memory?)")
            }
            list = appended
        }
        headerList = list
        try check(cloudsync_curl_setopt_slist(h, CURLOPT_HTTPHEADER, list), "HTTPHEADER")

        let me = Unmanaged.passUnretained(self).toOpaque()
        try check(cloudsync_curl_setopt_header(h) { buffer, size, count, user in
            guard let buffer, let user else { return 0 }
            let exchange = Unmanaged<Exchange>.fromOpaque(user).takeUnretainedValue()
            return exchange.onHeader(UnsafeRawBufferPointer(start: buffer, count: size * count))
        }, "HEADERFUNCTION")
        try check(cloudsync_curl_setopt_pointer(h, CURLOPT_HEADERDATA, me), "HEADERDATA")
        try check(cloudsync_curl_setopt_write(h) { buffer, size, count, user in
            guard let user else { return 0 }
            let exchange = Unmanaged<Exchange>.fromOpaque(user).takeUnretainedValue()
            return exchange.onBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
        }, "WRITEFUNCTION")
        try check(cloudsync_curl_setopt_pointer(h, CURLOPT_WRITEDATA, me), "WRITEDATA")
        try check(cloudsync_curl_setopt_xferinfo(h) { user, _, _, _, _ in
            guard let user else { return 0 }
            let exchange = Unmanaged<Exchange>.fromOpaque(user).takeUnretainedValue()
            return exchange.cancelled.load(ordering: .relaxed) ? 1 : 0
        }, "XFERINFOFUNCTION")
        try check(cloudsync_curl_setopt_pointer(h, CURLOPT_XFERINFODATA, me), "XFERINFODATA")
        try check(cloudsync_curl_setopt_long(h, CURLOPT_NOPROGRESS, 0), "NOPROGRESS")
    }

    // MARK: callbacks (loop thread)

    private func onHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        // Parsed as bytes: Foundation's string trimming cost more CPU than the rest of a small transfer.
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        let line = bytes[0 ..< end]
        if line.starts(with: "HTTP/".utf8) {
            // A new status line ("HTTP/1.1 200 OK", "HTTP/2 200"): an interim 1xx answer is forgotten.
            let parts = line.split(separator: 0x20, maxSplits: 2)
            status = parts.count >= 2 ? Int(String(decoding: parts[1], as: UTF8.self)) ?? 0 : 0
            headers = HTTPHeaders()
            headComplete = false
        } else if line.isEmpty {
            if status >= 100 && status < 200 { return bytes.count }
            headComplete = true
            decideTarget()
            if failure != nil || stoppedAtHead { return 0 }
        } else if let colon = line.firstIndex(of: 0x3A) {
            headers.add(String(decoding: ASCII.trimmingWhitespace(line[..<colon]), as: UTF8.self),
                        String(decoding: ASCII.trimmingWhitespace(line[(colon + 1)...]), as: UTF8.self))
        }
        return bytes.count
    }

    /// Runs once the final head is in, before any body byte: checks ranged answers and picks where bytes go.
    private func decideTarget() {
        switch mode {
        case .stream(let sink, let limit, let errorLimit):
            if (300..<400).contains(status) && headers["Location"] != nil {
                target = .discard
            } else if sink.accepts(HTTPResponseHead(status: status, headers: headers, url: url)) {
                target = .stream(sink, limit: limit)
            } else {
                target = .collect(limit: errorLimit)
            }
        case .download(let range, let sink, let errorLimit, let whenRangeIgnored):
            switch status {
            case 206:
                guard let header = headers["Content-Range"], let cr = ContentRange(header), let got = cr.range else {
                    failure = ProviderError(.invalidResponse, "\(hostDescription) answered 206 without a valid Content-Range; the server is misbehaving, retry later", status: 206)
                    return
                }
                if let range {
                    // The server may end a range early only at the end of the file.
                    let endsEarlyAtEOF = got.upperBound < range.upperBound && cr.total.map { got.upperBound == $0 - 1 } == true
                    guard got.lowerBound == range.lowerBound, got.upperBound == range.upperBound || endsEarlyAtEOF else {
                        failure = ProviderError(.invalidResponse, "\(hostDescription) answered bytes \(got.lowerBound)-\(got.upperBound) to a request for \(range.lowerBound)-\(range.upperBound); nothing was written, retry", status: 206)
                        return
                    }
                }
                totalSize = cr.total
                deliveredStart = got.lowerBound
                guard sink.acceptsVersion(HTTPResponseHead(status: status, headers: headers, url: url), totalSize: totalSize) else {
                    stoppedAtHead = true
                    return
                }
                target = .sink(sink, offset: got.lowerBound, skip: 0, end: got.upperBound + 1)
            case 200:
                rangeIgnored = range != nil
                let skip = range?.lowerBound ?? 0
                deliveredStart = skip
                if headers["Content-Encoding"] == nil, let length = headers["Content-Length"].flatMap({ Int64($0) }) {
                    totalSize = length
                }
                if rangeIgnored && whenRangeIgnored == .stop
                    || !sink.acceptsVersion(HTTPResponseHead(status: status, headers: headers, url: url), totalSize: totalSize) {
                    stoppedAtHead = true
                    return
                }
                target = .sink(sink, offset: 0, skip: skip, end: nil)
            default:
                if status == 416, let header = headers["Content-Range"], let cr = ContentRange(header) {
                    totalSize = cr.total
                }
                target = (300..<400).contains(status) && headers["Location"] != nil
                    ? .discard : .collect(limit: errorLimit)
            }
        }
    }

    /// Whether the download's sink takes bytes now (always, for other answers). Loop thread only.
    var sinkAcceptsBytes: Bool {
        if case .sink(let sink, _, _, _) = target { return sink.acceptsBytes() }
        return true
    }

    private func onBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if failure != nil { return 0 }
        // Before the limiter, which counts what it admits: paused here, nothing was taken.
        if !sinkAcceptsBytes {
            loop?.held.append(self)
            return cloudsync_curl_writefunc_pause()
        }
        if let limiter, !limiter.admit(bytes.count) {
            loop?.paused.append(self)
            return cloudsync_curl_writefunc_pause()
        }
        switch target {
        case .discard:
            return bytes.count
        case .collect(let limit):
            bodyBytes += bytes.count
            body.append(contentsOf: bytes.prefix(max(0, limit - body.count)))
            return bytes.count
        case .stream(let sink, let limit):
            // `bodyBytes` never passes `limit`, so the difference cannot overflow.
            guard bytes.count <= limit - bodyBytes else {
                failure = ProviderError(.invalidResponse, "\(hostDescription) sent an answer larger than \(ByteSize.format(Int64(limit))) to \(requestDescription); cloudsync does not read API answers that big (a folder of that size is not read: split it into smaller folders, or check the remote's URL settings)", status: status)
                return 0
            }
            bodyBytes += bytes.count
            do {
                try sink.write(bytes)
            } catch {
                failure = error
                return 0
            }
            return bytes.count
        case .sink(let sink, var offset, var skip, let end):
            var chunk = bytes[...]
            if skip > 0 {
                let n = Int(min(skip, Int64(chunk.count)))
                chunk = chunk.dropFirst(n)
                skip -= Int64(n)
                offset += Int64(n)
            }
            if !chunk.isEmpty {
                if let end, offset + Int64(chunk.count) > end {
                    failure = ProviderError(.invalidResponse, "\(hostDescription) sent more bytes than its Content-Range announced; retry", status: status)
                    return 0
                }
                do {
                    try write(UnsafeRawBufferPointer(rebasing: chunk), at: offset, to: sink)
                } catch {
                    failure = error
                    return 0
                }
                offset += Int64(chunk.count)
            }
            target = .sink(sink, offset: offset, skip: skip, end: end)
            return bytes.count
        }
    }

    /// Hands `bytes` (which follow the batch's) to `sink`, gathered up to its ``ByteSink/writeBatchBytes``.
    private func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, to sink: any ByteSink) throws {
        let capacity = sink.writeBatchBytes
        if batched > 0 && batched + bytes.count > capacity { try writeBatch(to: sink) }
        guard bytes.count < capacity else {
            try sink.write(bytes, at: offset)
            return
        }
        let buffer = batch ?? .allocate(byteCount: capacity, alignment: 16)
        batch = buffer
        if batched == 0 { batchOffset = offset }
        UnsafeMutableRawBufferPointer(rebasing: buffer[batched...]).copyMemory(from: bytes)
        batched += bytes.count
    }

    private func writeBatch(to sink: any ByteSink) throws {
        guard batched > 0, let batch else { return }
        let count = batched
        batched = 0
        try sink.write(UnsafeRawBufferPointer(rebasing: batch[..<count]), at: batchOffset)
    }

    /// Writes the gathered bytes of a download that ended (loop thread): before its outcome is computed, so
    /// what it reports as delivered is written. A failed write becomes the exchange's failure.
    func finishBody() {
        guard failure == nil, case .sink(let sink, _, _, _) = target else { return }
        do { try writeBatch(to: sink) } catch { failure = error }
    }

    private var deliveredEnd: Int64 {
        if case .sink(_, let offset, _, _) = target { return max(offset, deliveredStart) }
        return deliveredStart
    }

    // MARK: completion (loop thread)

    func result(for code: CURLcode) -> Result<ExchangeResult, any Error> {
        finishBody()
        if let failure { return .failure(failure) }
        if code == CURLE_ABORTED_BY_CALLBACK && cancelled.load(ordering: .relaxed) {
            return .failure(CancellationError())
        }
        if stoppedAtHead {
            return .success(ExchangeResult(status: status, headers: headers, body: Data(), bodyBytes: 0,
                                           delivered: deliveredStart..<deliveredStart, rangeIgnored: rangeIgnored, totalSize: totalSize))
        }
        guard code == CURLE_OK else {
            if code == CURLE_OPERATION_TIMEDOUT, let deadline, ContinuousClock.now + .milliseconds(50) >= deadline {
                missedDeadline = true
            }
            return .failure(networkError(code))
        }
        reusable = true
        var delivered = deliveredStart..<deliveredEnd
        if case .sink = target {} else { delivered = deliveredStart..<deliveredStart }
        return .success(ExchangeResult(status: status, headers: headers, body: body, bodyBytes: bodyBytes, delivered: delivered,
                                       rangeIgnored: rangeIgnored, totalSize: totalSize))
    }

    private func networkError(_ code: CURLcode) -> ProviderError {
        var detail = String(cString: errorBuffer)
        if detail.isEmpty { detail = String(cString: curl_easy_strerror(code)) }
        // curl's messages name hosts and ports, not URLs; strip anything after '?' all the same.
        if let q = detail.firstIndex(of: "?") { detail = String(detail[..<q]) + "…" }
        let host = hostDescription
        let delivered = deliveredStart..<deliveredEnd
        let cause = InterruptedTransfer(delivered: delivered, curlCode: Int(code.rawValue), detail: detail)
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return ProviderError(.configuration, "cannot use the URL for \(host): \(detail); check the remote's URL settings", cause: cause)
        case CURLE_PEER_FAILED_VERIFICATION:
            return ProviderError(.configuration, "TLS with \(host) failed: \(detail); check the URL, the system CA certificates (ca-certificates) "
                + "and the clock; a server with a certificate of its own (a NAS at home) is trusted with its CA certificate as the remote's ca_file; "
                + "on a network that asks you to log in (a hotel's, a train's), its login page answers in the server's place until you do",
                cause: cause)
        case CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return ProviderError(.configuration, "TLS with \(host) failed: \(detail); check the URL, the system CA certificates (ca-certificates) and the clock", cause: cause)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING, CURLE_RANGE_ERROR:
            return ProviderError(.invalidResponse, "\(host) sent a malformed HTTP answer: \(detail); retry later or check the remote's URL", cause: cause)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            return unreachable(host, detail, cause)
        case CURLE_OPERATION_TIMEDOUT where !requestWasSent:
            // Resolving or connecting took too long: nothing reached the server.
            return unreachable(host, detail, cause)
        default:
            return ProviderError(.transient, "network error talking to \(host): \(detail); check the connection, cloudsync retries", cause: cause)
        }
    }

    private func unreachable(_ host: String, _ detail: String, _ cause: InterruptedTransfer) -> ProviderError {
        ProviderError(.unreachable, "cannot reach \(host) over the network: \(detail); check the network connection and that the server is up", cause: cause)
    }

    /// Whether curl sent (some of) the request, i.e. a connection to the server existed (`CURLINFO_REQUEST_SIZE`).
    private var requestWasSent: Bool {
        var size = 0
        return cloudsync_curl_getinfo_long(easy, CURLINFO_REQUEST_SIZE, &size) == CURLE_OK && size > 0
    }

    /// Resumes the waiting task exactly once.
    func complete(with result: Result<ExchangeResult, any Error>) {
        guard let c = continuation else { return }
        continuation = nil
        c.resume(with: result)
    }
}
