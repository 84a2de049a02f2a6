#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncCore
import CloudSyncEngine
import CloudSyncHTTP
import CloudSyncServer
import Foundation
import Synchronization
import TestSupport

/// A mutex-protected value that closures can capture.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// Deterministic bytes for a test file.
func sourceBytes(_ count: Int, seed: UInt64) -> Data {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: count)
    for i in 0 ..< count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        bytes[i] = UInt8(truncatingIfNeeded: state)
    }
    return Data(bytes)
}

/// The cloud's content host for tests: serves `/files/<name>` with Range, only with the right bearer token,
/// and counts GETs and bytes per file.
final class Origin: Sendable {
    static let secret = "origin-secret"
    let server: LoopbackHTTPServer
    let files: [String: Data]
    private let stats = Locked<[String: Counts]>([:])
    private let unauthorized = Locked<Int>(0)

    struct Counts: Sendable { var gets = 0, bytes = 0 }

    init(files: [String: Data], delay: Duration = .milliseconds(20)) throws {
        self.files = files
        let stats = self.stats
        let unauthorized = self.unauthorized
        server = try LoopbackHTTPServer { request in
            guard request.method == "GET", request.target.hasPrefix("/files/") else { return .init(status: 404) }
            guard request.headers["authorization"] == "Bearer \(Origin.secret)" else {
                unauthorized.withLock { $0 += 1 }
                return .init(status: 401)
            }
            let name = String(request.target.dropFirst("/files/".count))
            guard let body = files[name] else {
                stats.withLock { $0[name, default: Counts()].gets += 1 }
                return .init(status: 404)
            }
            Thread.sleep(forTimeInterval: Double(delay.components.attoseconds) / 1e18 + Double(delay.components.seconds))
            var slice = 0 ..< body.count
            var status = 200
            var headers: [(String, String)] = [("ETag", "\"v1-\(name.count)\"")]
            if let range = request.headers["range"], range.hasPrefix("bytes=") {
                let parts = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
                if let a = Int(parts[0]), a < body.count {
                    let b = parts.count > 1 ? Int(parts[1]) ?? body.count - 1 : body.count - 1
                    slice = a ..< min(body.count, b + 1)
                    status = 206
                    headers.append(("Content-Range", "bytes \(slice.lowerBound)-\(slice.upperBound - 1)/\(body.count)"))
                } else {
                    return .init(status: 416, headers: [("Content-Range", "bytes */\(body.count)")])
                }
            }
            stats.withLock { $0[name, default: Counts()].gets += 1; $0[name, default: Counts()].bytes += slice.count }
            return .init(status: status, headers: headers, body: body.subdata(in: slice))
        }
    }

    func gets(_ name: String) -> Int { stats.withLock { $0[name]?.gets ?? 0 } }
    func bytes(_ name: String) -> Int { stats.withLock { $0[name]?.bytes ?? 0 } }
    var refused: Int { unauthorized.withLock { $0 } }
}

/// A provider whose files live on an `Origin`; downloads need its bearer token.
struct OriginProvider: Provider {
    let remoteName: String
    let origin: URL
    let files: [RemoteFile]
    var capabilities: ProviderCapabilities { ProviderCapabilities(hashKinds: [.sha256], hasChangeFeed: false) }

    func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        let page = ListingPage(kind: .full, upserts: files)
        return AsyncThrowingStream { continuation in
            continuation.yield(page)
            continuation.finish()
        }
    }

    func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        let name = file.path.replacingOccurrences(of: "/", with: "_")
        return DownloadRequest(url: origin.appendingPathComponent("files/\(name)"), headers: [("Authorization", "Bearer \(Origin.secret)")])
    }
}

/// A cache, an origin with files, the remote "music" indexed, and a running server.
final class Fixture: Sendable {
    let directory: TemporaryDirectory
    let cache: Cache
    let origin: Origin
    let onDemand: OnDemand
    let server: TrackServer
    let contents: [String: Data]
    let logLines = Locked<[String]>([])

    /// `files`: remote path → bytes. Files get a SHA-256 so a completed fetch is verified. Those in `gone` are
    /// indexed but no longer on the origin (deleted since the listing: it answers 404).
    init(files: [String: Data], gone: Set<String> = [], options: ServerOptions = ServerOptions(port: 0),
         onDemandOptions: OnDemandOptions = OnDemandOptions(chunkSize: 256 << 10), checkpointBytes: Int64 = 4 << 20) throws {
        directory = try TemporaryDirectory(prefix: "cloudsync-serve")
        contents = files
        cache = try Cache.open(root: directory.url.appendingPathComponent("cache"),
                               limits: CacheLimits(checkpointBytes: checkpointBytes))
        var originFiles: [String: Data] = [:]
        var remoteFiles: [RemoteFile] = []
        for (path, data) in files {
            if !gone.contains(path) { originFiles[path.replacingOccurrences(of: "/", with: "_")] = data }
            remoteFiles.append(RemoteFile(path: path, size: Int64(data.count), modified: Date(timeIntervalSince1970: 1_700_000_000),
                                          revision: "v1", hashes: [ContentHash(kind: .sha256, value: contentHash(of: data, kind: .sha256))],
                                          mimeType: nil))
        }
        origin = try Origin(files: originFiles)
        try cache.upsert(remote: "music", files: remoteFiles)
        let provider = OriginProvider(remoteName: "music", origin: origin.server.url("/"), files: remoteFiles)
        let logLines = self.logLines
        let logFile = ProcessInfo.processInfo.environment["CLOUDSYNC_TEST_LOG"]
        let logger = Logger(level: .debug) { _, line in
            logLines.withLock { $0.append(line) }
            if let logFile, let handle = FileHandle(forWritingAtPath: logFile) {
                handle.seekToEndOfFile()
                handle.write(Data("\(Date().timeIntervalSince1970) \(line)\n".utf8))
                try? handle.close()
            }
        }
        onDemand = OnDemand(remote: "music", provider: provider, transport: try CurlTransport(), pacer: Pacer(policy: .init(retries: 2)),
                            cache: cache, options: onDemandOptions, logger: logger)
        server = TrackServer(cache: cache, sources: ["music": onDemand], options: options, logger: logger)
        try server.start()
    }

    deinit { server.stop() }

    /// Puts every byte of `path` into the cache and promotes it, as a pull would.
    func cacheCompletely(_ path: String) async throws {
        let writer = try cache.openWriter(remote: "music", path: path)
        defer { writer.close() }
        let data = contents[path] ?? Data()
        try data.withUnsafeBytes { try writer.write($0, at: 0) }
        try await writer.complete(expectedHash: nil) { _ in nil }
    }

    /// Puts `ranges` of `path` into the partial file and checkpoints them.
    func cachePartially(_ path: String, _ ranges: [Range<Int>]) throws {
        let writer = try cache.openWriter(remote: "music", path: path)
        defer { writer.close() }
        let data = contents[path] ?? Data()
        for r in ranges {
            try data.subdata(in: r).withUnsafeBytes { try writer.write($0, at: Int64(r.lowerBound)) }
        }
        try writer.checkpoint()
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(server.port)\(path)" }
}

/// A blocking HTTP/1.1 client over one socket, for exact control of what is sent. Reads are bounded (10 s).
/// Used by one thread at a time (it may be handed to a reading thread), hence `@unchecked Sendable`.
final class RawClient: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []

    struct Response {
        var status: Int
        var headers: [String: String]
        var body: Data
    }

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if r != 0 { close(fd); throw TestSupportError("connect to 127.0.0.1:\(port) failed: errno \(errno)") }
    }

    deinit { close(fd) }

    /// Ends the connection as a player does when it stops (the server sees it closed).
    func hangUp() { _ = shutdown(fd, Int32(SHUT_RDWR)) }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            done += n
        }
    }

    func get(_ target: String, headers: [String] = [], method: String = "GET") throws -> Response {
        send("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n")
        do {
            return try readResponse(bodyless: method == "HEAD")
        } catch {
            // Which request failed, so that a timeout under load names what the server was doing.
            throw TestSupportError("\(method) \(target) \(headers): \(error)")
        }
    }

    /// Reads one response (Content-Length framing). Throws when the connection closes first.
    func readResponse(bodyless: Bool = false) throws -> Response {
        let (status, headers) = try readHead()
        let length = bodyless ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        while buffer.count < length { try fill() }
        let body = Data(buffer[0 ..< length])
        buffer.removeFirst(length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Reads one response's head, then its body until Content-Length bytes arrived or the server closed the
    /// connection (a body cut short comes back short).
    func readResponseUntilCut() throws -> Response {
        let (status, headers) = try readHead()
        let length = Int(headers["content-length"] ?? "0") ?? 0
        while buffer.count < length, (try? fill()) != nil {}
        let body = Data(buffer.prefix(length))
        buffer.removeFirst(body.count)
        return Response(status: status, headers: headers, body: body)
    }

    /// Reads a response head: its status and its header fields (names lowercased).
    private func readHead() throws -> (Int, [String: String]) {
        var end: Int?
        while end == nil {
            if let i = find([13, 10, 13, 10]) { end = i + 4; break }
            try fill()
        }
        let head = String(decoding: buffer[0 ..< end!], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeFirst(end!)
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw TestSupportError("bad status line: \(head[0])") }
        var headers: [String: String] = [:]
        for line in head.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers)
    }

    /// Reads until the server closes; returns what arrived.
    func readUntilClosed() -> Data {
        while (try? fill()) != nil {}
        return Data(buffer)
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n <= 0 { throw TestSupportError("connection closed or timed out (recv \(n), errno \(errno)) with \(buffer.count) bytes buffered") }
        buffer += chunk[0 ..< n]
    }

    private func find(_ needle: [UInt8]) -> Int? {
        guard buffer.count >= needle.count else { return nil }
        for i in 0 ... buffer.count - needle.count where buffer[i] == needle[0] && Array(buffer[i ..< i + needle.count]) == needle {
            return i
        }
        return nil
    }
}


/// Failed checks collected off the test's task (a plain thread has no test context); the test then expects
/// the list to be empty.
final class Checks: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: [String] = []

    func expect(_ condition: Bool, _ message: @autoclosure () -> String = "", line: Int = #line) {
        if condition { return }
        let text = "line \(line): " + message()
        lock.lock()
        failures.append(text)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return failures
    }
}

/// Runs blocking socket work on a thread of its own, never on Swift's cooperative pool (which has one thread
/// per core: a blocked test thread there would starve the very fetch tasks being tested).
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
    }
}
