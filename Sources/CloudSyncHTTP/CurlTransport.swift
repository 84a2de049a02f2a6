import CCurl
import CloudSyncCore
import Foundation

/// Settings of a `CurlTransport`. Defaults suit cloud APIs and content hosts.
public struct CurlTransportOptions: Sendable {
    /// TCP + TLS connect timeout (`CURLOPT_CONNECTTIMEOUT_MS`).
    public var connectTimeout: TimeInterval = 30
    /// A transfer slower than `lowSpeedLimit` bytes/s for `lowSpeedTime` seconds is aborted as `.transient`
    /// (`CURLOPT_LOW_SPEED_LIMIT` / `_TIME`). With a bandwidth limit the threshold drops to 1/16 of it.
    /// Downloads have no overall timeout: a big file may take as long as it needs while it keeps moving.
    public var lowSpeedLimit: Int = 1024
    public var lowSpeedTime: TimeInterval = 60
    /// Overall deadline of one `send` (API requests: connect, redirects and the whole answer), so an answer that
    /// keeps dripping above the low-speed limit cannot hold a listing (and the pull lock) forever. Missed, it is
    /// `.invalidResponse`, not retried: the same request would drip again. nil = none. Config: `pull.api_timeout`.
    public var apiTimeout: TimeInterval? = 300
    /// libcurl's receive buffer (`CURLOPT_BUFFERSIZE`). 16 KiB (curl's default) costs 13–39 % throughput.
    public var receiveBufferSize: Int = 256 * 1024
    /// Redirects followed before giving up.
    public var maxRedirects: Int = 10
    /// Largest body `send` accepts (API answers).
    public var maxResponseBody: Int = 32 * 1024 * 1024
    /// Largest error body kept by `download`.
    public var maxErrorBody: Int = 64 * 1024
    /// Shared by every transfer of this transport (and of any other transport given the same limiter).
    public var bandwidth: BandwidthLimiter?
    /// `cloudsync/VERSION libcurl/VERSION`: the version `cloudsync --version` prints.
    public var userAgent: String = "cloudsync/\(CloudSyncVersion.string) libcurl/\(CurlTransport.libcurlVersion)"
    /// A PEM file of CA certificates trusted besides the system's (`CURLOPT_CAINFO`; the system's folder,
    /// `CURLOPT_CAPATH`, stays): a remote's `ca_file`.
    public var caFile: String?

    public init() {}
}

/// The `Transport` on libcurl. One multi handle on one dedicated thread carries every transfer, so
/// connections are reused (keep-alive, HTTP/2 multiplexing where offered) and cooperative threads never
/// block. Redirects are followed here, not by curl: at most `maxRedirects`; 303, and 301/302 after a POST,
/// become a GET without body; the request's `authHeaderNames` are dropped when scheme, host or port change
/// unless `keepsAuthAcrossHosts`. Only http and https are spoken: a redirect elsewhere (`file:`, `gopher:`) is
/// `.invalidResponse` for that request only.
///
/// Logs one debug line per exchange: method, scheme, host and first path segment (``redactedLink(_:)``: download
/// links carry credentials in their paths), status, bytes, seconds. Never headers.
public final class CurlTransport: Transport {
    /// The version of the libcurl loaded at run time, e.g. `7.88.1` (`curl_version_info(3)`).
    public static var libcurlVersion: String {
        guard let info = curl_version_info(CURLVERSION_FIRST), let version = info.pointee.version else { return "unknown" }
        return String(cString: version)
    }

    public let options: CurlTransportOptions
    private let logger: Logger
    private let loop: CurlLoop
    private let pool: EasyHandlePool
    /// The transport whose network thread and handles this one shares (``trusting(caFile:)``); it owns the
    /// thread, so it is kept alive as long as this one.
    private let base: CurlTransport?

    public init(options: CurlTransportOptions = CurlTransportOptions(), logger: Logger = .silent) throws {
        self.options = options
        self.logger = logger
        loop = try CurlLoop(limiter: options.bandwidth)
        pool = EasyHandlePool()
        base = nil
    }

    private init(sharing base: CurlTransport, options: CurlTransportOptions) {
        self.options = options
        logger = base.logger
        loop = base.loop
        pool = base.pool
        self.base = base
    }

    deinit {
        if base == nil { loop.shutdown() }
    }

    /// This transport for a remote whose server's certificate is signed by a CA of `caFile` (PEM), trusted besides
    /// the system's: the same network thread, bandwidth limit and handles. libcurl reuses a connection only for
    /// transfers with the same CA settings, so no other remote's requests ride on it.
    public func trusting(caFile: String) -> CurlTransport {
        var options = self.options
        options.caFile = caFile
        return CurlTransport(sharing: base ?? self, options: options)
    }

    public func send(_ request: HTTPRequest, into sink: any ResponseBodySink) async throws -> HTTPResponse {
        let limit = options.maxResponseBody, errorLimit = options.maxErrorBody
        // Clamped to a year, so any configured value converts to whole milliseconds without overflow.
        let deadline = options.apiTimeout.map { ContinuousClock.now + .milliseconds(Int64((min(max($0, 0.001), 366 * 86400) * 1000).rounded(.up))) }
        let (final, result) = try await follow(request, extraHeaders: [], acceptsCompression: true, deadline: deadline) {
            .stream(sink: sink, limit: limit, errorLimit: errorLimit)
        }
        return HTTPResponse(head: HTTPResponseHead(status: result.status, headers: result.headers, url: final.url),
                            body: result.body)
    }

    public func download(_ request: HTTPRequest, range: ClosedRange<Int64>?, ifRange: String?,
                         whenRangeIgnored: IgnoredRange, into sink: any ByteSink) async throws -> DownloadOutcome {
        var extra: [(String, String)] = []
        if let range {
            precondition(range.lowerBound >= 0, "ranges are absolute: never suffix ranges")
            extra.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound)"))
            // `If-Range` needs a strong validator (RFC 9110 §13.1.5): with a weak `W/"…"` one every range would come
            // back as 200, so it is not sent.
            if let ifRange, EntityTag.ifRangeValidator(ifRange) != nil { extra.append(("If-Range", ifRange)) }
        }
        let errorLimit = options.maxErrorBody
        let (final, result) = try await follow(request, extraHeaders: extra, acceptsCompression: false, deadline: nil) {
            .download(range: range, sink: sink, errorLimit: errorLimit, whenRangeIgnored: whenRangeIgnored)
        }
        let head = HTTPResponseHead(status: result.status, headers: result.headers, url: final.url)
        let ok = result.status == 200 || result.status == 206
        return DownloadOutcome(head: head, delivered: result.delivered, rangeIgnored: result.rangeIgnored,
                               totalSize: result.totalSize, errorBody: ok ? Data() : result.body)
    }

    /// Sends `original` and follows its redirects. `deadline` bounds everything (API requests): a hop is not even
    /// started once it passed, and each hop gets only the time left.
    private func follow(_ original: HTTPRequest, extraHeaders: [(String, String)], acceptsCompression: Bool,
                        deadline: ContinuousClock.Instant?, mode: () -> BodyMode) async throws -> (HTTPRequest, ExchangeResult) {
        var request = original
        var hops = 0
        while true {
            let started = ContinuousClock.now
            if let deadline, started >= deadline { throw missedDeadline(original) }
            let exchange = try Exchange(request: request, extraHeaders: extraHeaders, mode: mode(), options: options,
                                        acceptsCompression: acceptsCompression, deadline: deadline, pool: pool)
            let result: ExchangeResult
            do {
                result = try await loop.perform(exchange)
            } catch {
                logger.debug("\(request.method) \(redactedLink(request.url)) → failed after \(Self.seconds(since: started)) s")
                if exchange.missedDeadline { throw missedDeadline(original) }
                throw error
            }
            let bytes = result.delivered.isEmpty ? result.bodyBytes : result.delivered.count
            logger.debug("\(request.method) \(redactedLink(request.url)) → \(result.status), \(bytes) B, \(Self.seconds(since: started)) s")
            guard [301, 302, 303, 307, 308].contains(result.status), let location = result.headers["Location"] else {
                return (request, result)
            }
            let host = request.url.host ?? "the server"
            guard let next = URL(string: location, relativeTo: request.url)?.absoluteURL else {
                throw ProviderError(.invalidResponse, "\(host) redirected to an unusable Location; check the remote's URL settings", status: result.status)
            }
            guard let scheme = next.scheme?.lowercased(), scheme == "http" || scheme == "https", next.host?.isEmpty == false else {
                // The answer about this one request is wrong, not the remote's settings: the request fails, others go on.
                let target = next.scheme.map { "a \($0): URL" } ?? "a URL without a scheme"
                throw ProviderError(.invalidResponse, "\(host) redirected \(request.method) \(redactedLink(original.url)) to \(target); cloudsync follows redirects to http and https only, so this request failed (the server's answer is wrong, others go on)", status: result.status)
            }
            hops += 1
            guard hops <= options.maxRedirects else {
                throw ProviderError(.invalidResponse, "more than \(options.maxRedirects) redirects from \(redactedLink(original.url)); check the remote's URL settings", status: result.status)
            }
            request = Self.redirect(request, to: next, status: result.status)
        }
    }

    private func missedDeadline(_ request: HTTPRequest) -> ProviderError {
        let limit = options.apiTimeout.map { String(format: "%g s", $0) } ?? "its deadline"
        return ProviderError(.invalidResponse, "\(request.url.host ?? "the server") did not finish answering \(request.method) \(redactedLink(request.url)) within \(limit); the server is stuck or far too slow. Check it, or raise pull.api_timeout")
    }

    /// The request to send after a `status` redirect to `next` (RFC 9110 §15.4).
    static func redirect(_ request: HTTPRequest, to next: URL, status: Int) -> HTTPRequest {
        var r = request
        if status == 303 && r.method.uppercased() != "HEAD" || (status == 301 || status == 302) && r.method.uppercased() == "POST" {
            r.method = "GET"
            r.body = nil
            r.headers.remove("Content-Type")
            r.headers.remove("Content-Length")
        }
        if !r.keepsAuthAcrossHosts && !sameOrigin(r.url, next) {
            for name in r.authHeaderNames { r.headers.remove(name) }
        }
        r.url = next
        return r
    }

    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func port(_ u: URL) -> Int? { u.port ?? (u.scheme?.lowercased() == "https" ? 443 : u.scheme?.lowercased() == "http" ? 80 : nil) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased()
            && port(a) == port(b)
    }

    private static func seconds(since start: ContinuousClock.Instant) -> String {
        let d = ContinuousClock.now - start
        return String(format: "%.3f", Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18)
    }
}
