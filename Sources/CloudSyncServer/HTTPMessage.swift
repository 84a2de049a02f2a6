import CloudSyncCore
import Foundation

/// Limits of what a request may look like; anything beyond is refused before it costs memory.
public struct RequestLimits: Sendable, Hashable {
    /// Request line and header fields together, in bytes (431 beyond).
    public var maxHeaderBytes: Int
    /// Request line alone (414 beyond).
    public var maxRequestLine: Int
    /// Header fields (431 beyond).
    public var maxHeaderFields: Int
    /// A request body (a PROPFIND document), in bytes (413 beyond). Only `Content-Length` framing is read.
    public var maxBodyBytes: Int

    public init(maxHeaderBytes: Int = 8192, maxRequestLine: Int = 4096, maxHeaderFields: Int = 64, maxBodyBytes: Int = 64 << 10) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxRequestLine = maxRequestLine
        self.maxHeaderFields = maxHeaderFields
        self.maxBodyBytes = max(0, maxBodyBytes)
    }
}

/// A parsed request head (HTTP/1.0 or 1.1, origin-form target).
struct RequestHead: Sendable {
    var method: String
    /// The target as sent: path and optional query, percent-encoded.
    var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    var minorVersion: Int
    var headers: [(name: String, value: String)]
    /// Bytes of the body that follows the head (`Content-Length`; 0 without one).
    var contentLength = 0

    /// The first value of `name` (case-insensitive).
    func header(_ name: String) -> String? {
        headers.first { ASCII.equalsIgnoringCase($0.name, name) }?.value
    }

    func values(_ name: String) -> [String] {
        headers.filter { ASCII.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// The path part of the target (before `?`), still percent-encoded.
    var path: Substring {
        guard let q = target.firstIndex(of: "?") else { return target[...] }
        return target[..<q]
    }

    /// The query part of the target (after `?`), or "".
    var query: Substring {
        guard let q = target.firstIndex(of: "?") else { return "" }
        return target[target.index(after: q)...]
    }

    /// Whether the connection stays open after the response (HTTP/1.1 unless `Connection: close`; HTTP/1.0 only
    /// with `Connection: keep-alive`).
    var keepAlive: Bool {
        let tokens = values("Connection").flatMap { $0.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        if tokens.contains("close") { return false }
        return minorVersion >= 1 || tokens.contains("keep-alive")
    }
}

/// Why a request head was refused: the status to answer, after which the connection is closed.
struct RequestError: Error, Equatable {
    var status: Int
    var reason: String
}

/// Parses request heads (RFC 9112 §2–5): strict about what could confuse framing (bodies, obs-fold, bad
/// versions), lenient with bare LF line ends.
enum RequestParser {
    /// The index just past the blank line ending the head in `buffer`, or nil if it is not complete yet.
    static func headEnd(in buffer: [UInt8]) -> Int? {
        var i = 0
        while i + 1 < buffer.count {
            if buffer[i] == 0x0A {
                if buffer[i + 1] == 0x0A { return i + 2 }
                if buffer[i + 1] == 0x0D, i + 2 < buffer.count, buffer[i + 2] == 0x0A { return i + 3 }
            }
            i += 1
        }
        return nil
    }

    /// Checks a head still arriving (`buffer` holds no blank line yet) against the limits.
    static func checkPartial(_ buffer: [UInt8], limits: RequestLimits) throws(RequestError) {
        let lineEnd = buffer.firstIndex(of: 0x0A) ?? buffer.count
        if lineEnd > limits.maxRequestLine { throw RequestError(status: 414, reason: "request line longer than \(limits.maxRequestLine) bytes") }
        if buffer.count > limits.maxHeaderBytes { throw RequestError(status: 431, reason: "request head larger than \(limits.maxHeaderBytes) bytes") }
    }

    /// Parses a complete head (`bytes` ends with the blank line).
    static func parse(_ bytes: ArraySlice<UInt8>, limits: RequestLimits) throws(RequestError) -> RequestHead {
        if bytes.contains(0) { throw RequestError(status: 400, reason: "NUL byte in the request head") }
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { line -> ArraySlice<UInt8> in
            line.last == 0x0D ? line.dropLast() : line
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        // Empty lines before the request line are allowed (RFC 9112 §2.2).
        while lines.first?.isEmpty == true { lines.removeFirst() }
        guard let first = lines.first else { throw RequestError(status: 400, reason: "empty request") }
        if first.count > limits.maxRequestLine {
            throw RequestError(status: 414, reason: "request line longer than \(limits.maxRequestLine) bytes")
        }
        if bytes.count > limits.maxHeaderBytes {
            throw RequestError(status: 431, reason: "request head larger than \(limits.maxHeaderBytes) bytes")
        }
        guard let requestLine = String(validating: first, as: UTF8.self) else {
            throw RequestError(status: 400, reason: "request line is not UTF-8")
        }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw RequestError(status: 400, reason: "malformed request line")
        }
        let method = String(parts[0])
        guard method.utf8.allSatisfy(isTokenChar) else { throw RequestError(status: 400, reason: "malformed method") }
        let target = String(parts[1])
        guard target.hasPrefix("/"), target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw RequestError(status: 400, reason: "the request target must be a path of visible ASCII")
        }
        let minor: Int
        switch parts[2] {
        case "HTTP/1.1": minor = 1
        case "HTTP/1.0": minor = 0
        default:
            if parts[2].hasPrefix("HTTP/") { throw RequestError(status: 505, reason: "only HTTP/1.0 and HTTP/1.1 are served") }
            throw RequestError(status: 400, reason: "malformed HTTP version")
        }
        if lines.count - 1 > limits.maxHeaderFields {
            throw RequestError(status: 431, reason: "more than \(limits.maxHeaderFields) header fields")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 0x3A) else { throw RequestError(status: 400, reason: "header line without a colon") }
            let nameBytes = line[line.startIndex ..< colon]
            // Obsolete line folding and whitespace before the colon are refused (RFC 9112 §5.1–5.2).
            guard !nameBytes.isEmpty, nameBytes.allSatisfy(isTokenChar) else {
                throw RequestError(status: 400, reason: "malformed header name")
            }
            let valueBytes = line[(colon + 1)...]
            if valueBytes.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                throw RequestError(status: 400, reason: "control character in a header value")
            }
            headers.append((String(decoding: nameBytes, as: UTF8.self),
                            String(decoding: ASCII.trimmingWhitespace(valueBytes), as: UTF8.self)))
        }
        var head = RequestHead(method: method, target: target, minorVersion: minor, headers: headers)
        if minor == 1, head.values("Host").count != 1 {
            throw RequestError(status: 400, reason: "HTTP/1.1 requests need exactly one Host header")
        }
        if head.header("Transfer-Encoding") != nil {
            throw RequestError(status: 501, reason: "chunked request bodies are not accepted; send Content-Length")
        }
        let lengths = head.values("Content-Length")
        if !lengths.isEmpty {
            // Digits only (no sign, no spaces), and bounded before conversion.
            guard lengths.count == 1, !lengths[0].isEmpty, lengths[0].utf8.count <= 18,
                  lengths[0].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(lengths[0]) else {
                throw RequestError(status: 400, reason: "malformed Content-Length")
            }
            if n > limits.maxBodyBytes {
                throw RequestError(status: 413, reason: "request bodies larger than \(limits.maxBodyBytes) bytes are not accepted")
            }
            head.contentLength = n
        }
        return head
    }

    /// tchar of RFC 9110 §5.6.2.
    static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "0") ... UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }
}

/// A response head to write.
struct ResponseHead {
    var status: Int
    var headers: [(String, String)] = []

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 100: "Continue"
        case 206: "Partial Content"
        case 207: "Multi-Status"
        case 301: "Moved Permanently"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 416: "Range Not Satisfiable"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        case 507: "Insufficient Storage"
        default: "Status"
        }
    }

    /// An interim (1xx) response: the status line alone.
    func serializedInterim() -> [UInt8] {
        Array("HTTP/1.1 \(status) \(Self.reason(status))\r\n\r\n".utf8)
    }

    func serialized(keepAlive: Bool) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "Server: cloudsync\r\n"
        text += keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n"
        text += "\r\n"
        return Array(text.utf8)
    }
}

/// The byte range a request asks for, resolved against the file size (RFC 9110 §14).
enum ByteRangeRequest: Equatable {
    /// No usable Range (absent, malformed, multiple ranges, or If-Range does not match): the whole file, 200.
    case whole
    /// One satisfiable range: 206 with `Content-Range: bytes a-b/N`.
    case partial(Range<Int64>)
    /// 416 with `Content-Range: bytes */N`.
    case unsatisfiable

    /// Resolves a `Range` header value for a file of `size` bytes. Multiple ranges are answered with the whole
    /// file (allowed by RFC 9110 §14.2: a server may ignore Range); syntax errors are ignored likewise.
    static func resolve(_ header: String?, size: Int64) -> ByteRangeRequest {
        guard let header else { return .whole }
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return .whole }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        if spec.contains(",") { return .whole }
        guard let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        // Digits only, at most 19 (Int64 rejects values above Int64.max rather than wrapping).
        func number(_ s: String) -> Int64? {
            guard !s.isEmpty, s.utf8.count <= 19, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int64(s)
        }
        // A hostile index may hold any size; never trust it to be sane.
        guard size >= 0 else { return .unsatisfiable }
        if first.isEmpty {
            // Suffix: the last n bytes (size - n cannot overflow: both are non-negative).
            guard let n = number(last) else { return .whole }
            if n == 0 || size == 0 { return .unsatisfiable }
            return .partial(max(0, size - n) ..< size)
        }
        guard let a = number(first) else { return .whole }
        if last.isEmpty {
            return a < size ? .partial(a ..< size) : .unsatisfiable
        }
        guard let b = number(last), b >= a else { return .whole }
        guard a < size else { return .unsatisfiable }
        // b + 1 overflows only for b == Int64.max, which is past any size anyway.
        let (end, overflow) = b.addingReportingOverflow(1)
        return .partial(a ..< (overflow ? size : min(size, end)))
    }
}
