import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 for tests: one thread per connection, one request per connection
/// (`Connection: close`), bodies by Content-Length only. The handler runs on the connection's thread.
public final class LoopbackHTTPServer: @unchecked Sendable {
    public struct Request: Sendable {
        public var method: String
        /// Path and query as sent, e.g. "/a/b?x=1".
        public var target: String
        /// Header names lowercased.
        public var headers: [String: String]
        public var body: Data
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: Data

        public init(status: Int = 200, headers: [(String, String)] = [], body: Data = Data()) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    public let port: Int
    private let listener: Int32
    /// Set once the listener is closed: closing an fd twice could close a socket that reused its number.
    private let stopped = Mutex(false)
    private let handler: @Sendable (Request) -> Response

    public init(handler: @escaping @Sendable (Request) -> Response) throws {
        self.handler = handler
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else { close(fd); throw TestSupportError("bind/listen: errno \(errno)") }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        port = Int(UInt16(bigEndian: addr.sin_port))
        listener = fd
        let thread = Thread { [handler] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }  // listener closed
                Thread.detachNewThread { Self.serve(client, handler) }
            }
        }
        thread.start()
    }

    deinit { stop() }

    /// Closes the listening socket; connections in progress finish.
    public func stop() {
        stopped.withLock { done in
            guard !done else { return }
            done = true
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
        }
    }

    public func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    private static func serve(_ fd: Int32, _ handler: @Sendable (Request) -> Response) {
        defer { close(fd) }
        var data = Data()
        var buf = [UInt8](repeating: 0, count: 65536)
        let separator = Data("\r\n\r\n".utf8)
        var headEnd: Range<Data.Index>?
        while headEnd == nil {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { return }
            data.append(contentsOf: buf[0..<n])
            headEnd = data.range(of: separator)
        }
        guard let headEnd else { return }
        let head = String(decoding: data[..<headEnd.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = head[0].split(separator: " ")
        guard requestLine.count >= 2 else { return }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Data(data[headEnd.upperBound...])
        let length = Int(headers["content-length"] ?? "0") ?? 0
        while body.count < length {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { return }
            body.append(contentsOf: buf[0..<n])
        }
        let response = handler(Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers,
                                       body: body.prefix(length)))
        var text = "HTTP/1.1 \(response.status) X\r\n"
        for (name, value) in response.headers { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        var out = Data(text.utf8)
        out.append(response.body)
        out.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = write(fd, raw.baseAddress! + sent, raw.count - sent)
                if n <= 0 { return }
                sent += n
            }
        }
    }
}
