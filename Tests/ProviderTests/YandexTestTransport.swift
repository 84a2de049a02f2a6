import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// TEMPORARY, test-only `Transport` over URLSession (copied from the WebDAV tests), used while `CurlTransport`
/// cannot read loopback answers: its header callback keeps the CRLF of each line, because "\r\n" is one Swift
/// Character and `hasSuffix("\n")` is false, so the blank line ending the head is never seen and bodies are dropped. It buffers whole
/// bodies and refuses every redirect (FoundationNetworking would forward `Authorization` across them), so
/// it is fit for loopback tests only. Cut connections and timeouts become `ProviderError(.transient)`.
///
/// FoundationNetworking quirks measured here (Swift 6.3.1): a 401 with `WWW-Authenticate` never completes
/// under `.performDefaultHandling` (and `.useCredential` with nil crashes), so the delegate cancels the
/// challenge and the 401 is rebuilt from `challenge.failureResponse`; a connection closed without any answer
/// is only noticed when `timeout` runs out.
final class YandexURLSessionTransport: Transport, @unchecked Sendable {
    private let session: URLSession
    private let delegate = YandexSessionDelegate()

    init(timeout: TimeInterval = 20) {
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.timeoutIntervalForResource = timeout * 3
        config.urlCache = nil
        config.httpShouldSetCookies = false
        session = URLSession(configuration: config, delegate: delegate, delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var r = URLRequest(url: request.url)
        r.httpMethod = request.method
        for field in request.headers { r.addValue(field.value, forHTTPHeaderField: field.name) }
        r.httpBody = request.body
        let (data, response) = try await perform(r)
        return HTTPResponse(head: head(of: response, url: request.url), body: data)
    }

    func download(_ request: HTTPRequest, range: ClosedRange<Int64>?, ifRange: String?, into sink: any ByteSink) async throws -> DownloadOutcome {
        var r = URLRequest(url: request.url)
        r.httpMethod = request.method
        for field in request.headers { r.addValue(field.value, forHTTPHeaderField: field.name) }
        if let range { r.setValue("bytes=\(range.lowerBound)-\(range.upperBound)", forHTTPHeaderField: "Range") }
        if let ifRange { r.setValue(ifRange, forHTTPHeaderField: "If-Range") }
        let (data, response) = try await perform(r)
        let head = head(of: response, url: request.url)
        switch head.status {
        case 206:
            guard let cr = head.headers["Content-Range"], let parsed = Self.parseContentRange(cr),
                  range == nil || parsed.range.lowerBound == range?.lowerBound,
                  Int64(data.count) == parsed.range.upperBound - parsed.range.lowerBound + 1 else {
                throw ProviderError(.invalidResponse, "206 with a Content-Range that does not match the request", status: 206)
            }
            try data.withUnsafeBytes { try sink.write($0, at: parsed.range.lowerBound) }
            let end = parsed.range.lowerBound + Int64(data.count)
            return DownloadOutcome(head: head, delivered: parsed.range.lowerBound..<end, rangeIgnored: false, totalSize: parsed.total)
        case 200:
            let skip = Int(range?.lowerBound ?? 0)
            let start = Int64(min(skip, data.count))
            if start < data.count {
                try data[Int(start)...].withUnsafeBytes { try sink.write($0, at: start) }
            }
            return DownloadOutcome(head: head, delivered: start..<Int64(data.count), rangeIgnored: range != nil, totalSize: Int64(data.count))
        default:
            return DownloadOutcome(head: head, delivered: 0..<0, rangeIgnored: false, totalSize: nil, errorBody: data.prefix(65536))
        }
    }

    /// `bytes a-b/total` → (a...b, total).
    static func parseContentRange(_ value: String) -> (range: ClosedRange<Int64>, total: Int64?)? {
        let v = value.trimmingCharacters(in: .whitespaces)
        guard v.hasPrefix("bytes ") else { return nil }
        let parts = v.dropFirst(6).split(separator: "/")
        guard parts.count == 2 else { return nil }
        let ends = parts[0].split(separator: "-")
        guard ends.count == 2, let a = Int64(ends[0]), let b = Int64(ends[1]), a <= b else { return nil }
        return (a...b, Int64(parts[1]))
    }

    private func perform(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let delegate = self.delegate
        let session = self.session
        let shown = redactedURL(request.url ?? URL(fileURLWithPath: "/"))
        return try await withCheckedThrowingContinuation { continuation in
            let box = YandexTaskIDBox()
            let task = session.dataTask(with: request) { data, response, error in
                let id = box.id.withLock { $0 }
                let refused = id.flatMap { delegate.takeRefusal(taskID: $0) }
                if let http = response as? HTTPURLResponse {
                    continuation.resume(returning: (data ?? Data(), http))
                } else if let refused {
                    continuation.resume(returning: (Data(), refused))
                } else {
                    continuation.resume(throwing: ProviderError(.transient,
                        "network error talking to \(shown): \(error.map { "\($0)" } ?? "no response"); retrying"))
                }
            }
            box.id.withLock { $0 = task.taskIdentifier }
            task.resume()
        }
    }

    private func head(of response: HTTPURLResponse, url: URL) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        for (k, v) in response.allHeaderFields {
            if let k = k as? String, let v = v as? String { headers.add(k, v) }
        }
        return HTTPResponseHead(status: response.statusCode, headers: headers, url: response.url ?? url)
    }
}

private final class YandexTaskIDBox: Sendable {
    let id = Mutex<Int?>(nil)
}

private final class YandexSessionDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    /// 401 responses whose challenge was cancelled, by task identifier.
    private let refusals = Mutex<[Int: HTTPURLResponse]>([:])

    func takeRefusal(taskID: Int) -> HTTPURLResponse? { refusals.withLock { $0.removeValue(forKey: taskID) } }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        if let response = challenge.failureResponse as? HTTPURLResponse {
            refusals.withLock { $0[task.taskIdentifier] = response }
        }
        completionHandler(.cancelAuthenticationChallenge, nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
