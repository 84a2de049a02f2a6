#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncCore
import CloudSyncEngine
import Foundation
import Synchronization

/// How `serve` listens and protects itself.
public struct ServerOptions: Sendable {
    /// Numeric address to bind; loopback by default. Anything else requires `token`.
    public var bind: String
    /// TCP port; 0 picks a free one (see ``TrackServer/port``).
    public var port: Int
    /// When set, every request must carry it (`?token=` or `Authorization: Bearer`); compared in constant time.
    public var token: String?
    /// Connections served at once; more are answered 503 and closed.
    public var maxConnections: Int
    /// A request head (or a keep-alive connection's next one) must arrive within this time, else the connection
    /// is closed (slowloris).
    public var headerTimeout: Duration
    /// A client that accepts no bytes for this long is dropped (SO_SNDTIMEO).
    public var sendTimeout: Duration
    /// How long a request for missing bytes waits for the first of them before answering 504.
    public var firstByteTimeout: Duration
    /// How long a response in progress waits for more bytes from the cloud before the connection is closed.
    public var stallTimeout: Duration
    /// How long a response that reached bytes the cache lacks while the cloud cannot be reached waits for the
    /// client to close before it is cut. A library scanner (mpd) reads ahead of what it parses, often past a
    /// track's head, and closes once it has the tags: cut at once, its stream fails and it tries every decoder
    /// again (seconds a track); given a moment, it leaves on its own. A player reading on gets the cut that much
    /// later.
    public var offlineGrace: Duration = .seconds(2)
    public var limits: RequestLimits

    public static let defaultPort = 8765

    public init(bind: String = "127.0.0.1", port: Int = ServerOptions.defaultPort, token: String? = nil,
                maxConnections: Int = 256, headerTimeout: Duration = .seconds(30), sendTimeout: Duration = .seconds(60),
                firstByteTimeout: Duration = .seconds(60), stallTimeout: Duration = .seconds(120),
                limits: RequestLimits = RequestLimits()) {
        self.bind = bind
        self.port = port
        self.token = token
        self.maxConnections = max(1, maxConnections)
        self.headerTimeout = headerTimeout
        self.sendTimeout = sendTimeout
        self.firstByteTimeout = firstByteTimeout
        self.stallTimeout = stallTimeout
        self.limits = limits
    }

    /// Fewest characters a token may have: guessing it must be out of reach.
    public static let minimumTokenLength = 16

    /// Throws `.usage` when a non-loopback address is bound without a token, or the token is unusable.
    public func validate() throws {
        if let token {
            if token.isEmpty || !token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) {
                throw ServerError(.usage, "--token must be visible ASCII without spaces")
            }
            if token.count < Self.minimumTokenLength {
                throw ServerError(.usage, "--token must have at least \(Self.minimumTokenLength) characters (it has \(token.count)); "
                    + "make one with `openssl rand -hex 16` and pass it as env:VAR or file:PATH")
            }
        }
        if !ListeningSocket.isLoopback(bind), token == nil {
            throw ServerError(.usage, "binding \(bind) exposes the cache beyond this machine: give --token (a long random string) "
                + "so every request must carry it, or bind 127.0.0.1")
        }
    }

    /// The bound address as it goes into a URL: IPv6 in brackets (given with or without them).
    public var urlHost: String {
        let bare = bind.hasPrefix("[") && bind.hasSuffix("]") ? String(bind.dropFirst().dropLast()) : bind
        return bare.contains(":") ? "[\(bare)]" : bare
    }
}

/// `cloudsync serve`: a small HTTP/1.1 server for players. One thread per connection (blocking sockets with
/// deadlines); `GET`/`HEAD /tracks/<remote>/<path>` with Range, `/playlist.m3u`, and an HTML index at `/`.
/// Bytes present in the cache are sent from disk; missing ones are fetched by the remote's ``OnDemand`` and
/// streamed as they land. Tracks are found in the index by remote and path — no file path is built from a URL.
public final class TrackServer: Sendable {
    public let options: ServerOptions
    let cache: Cache
    /// Remotes whose missing bytes can be fetched.
    let sources: [String: OnDemand]
    /// Remotes whose provider could not be built, with why (their cached bytes are still served).
    let unavailable: [String: String]
    /// The tracks connections have open now (serve's budget spares them).
    public let openTracks: OpenTracks
    let logger: Logger

    private let listener: Mutex<ListeningSocket?> = Mutex(nil)
    private let connections = Mutex<Set<Int32>>([])
    let stoppedFlag = Atomic<Bool>(false)
    var stopped: Bool { stoppedFlag.load(ordering: .relaxed) }
    private let boundPort = Atomic<Int>(0)

    public init(cache: Cache, sources: [String: OnDemand], unavailable: [String: String] = [:],
                options: ServerOptions = ServerOptions(), openTracks: OpenTracks = OpenTracks(), logger: Logger = .silent) {
        self.cache = cache
        self.sources = sources
        self.unavailable = unavailable
        self.openTracks = openTracks
        self.options = options
        self.logger = logger
    }

    /// The port listened on (after ``start()``).
    public var port: Int { boundPort.load(ordering: .relaxed) }

    /// Connections open now.
    public var openConnections: Int { connections.withLock { $0.count } }

    /// Validates the options, binds and starts accepting on a thread of its own. Returns the bound port.
    /// Throws ``ServerError`` (`.usage`, `.bind`).
    @discardableResult
    public func start() throws -> Int {
        try options.validate()
        let socket = try ListeningSocket(address: options.bind, port: options.port)
        listener.withLock { $0 = socket }
        boundPort.store(socket.port, ordering: .relaxed)
        startThread(named: "serve-accept") { [self] in acceptLoop(socket) }
        // Debug only: `cloudsync serve` announces the URL itself, once.
        logger.debug("serve: listening on \(boundURL)/")
        return socket.port
    }

    /// Stops accepting and shuts every open connection down (their threads end promptly). Idempotent.
    public func stop() {
        guard !stoppedFlag.exchange(true, ordering: .relaxed) else { return }
        listener.withLock { l in
            l?.shutdownAndClose()
            l = nil
        }
        connections.withLock { set in for fd in set { shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    /// `http://ADDRESS:PORT` of the bound socket (for the log; playlists use the connection's local address).
    var boundURL: String { "http://\(options.urlHost):\(port)" }

    // MARK: - Connections

    private func acceptLoop(_ socket: ListeningSocket) {
        while !stopped {
            let fd = accept(socket.fd, nil, nil)
            if fd < 0 {
                if stopped { return }
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    logger.warning("serve: cannot accept more connections (\(String(cString: strerror(errno)))); retrying")
                    usleep(50_000)
                    continue
                }
                if errno == EBADF || errno == EINVAL { return }
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let admitted = connections.withLock { set -> Bool in
                guard set.count < options.maxConnections, !stopped else { return false }
                set.insert(fd)
                return true
            }
            if !admitted {
                let busy = Array("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n".utf8)
                _ = busy.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                Glibc.close(fd)
                logger.warning("serve: over \(options.maxConnections) connections; refused one with 503")
                continue
            }
            startThread(named: "serve-conn", stackSize: 512 << 10) { [self] in
                serve(connection: fd)
                connections.withLock { set in
                    set.remove(fd)
                    Glibc.close(fd)
                }
            }
        }
    }

    /// Serves requests on one connection until it closes, times out, or a response cannot be framed further.
    private func serve(connection fd: Int32) {
        let io = ConnectionIO(fd: fd)
        io.configure(sendTimeout: options.sendTimeout)
        var session = ConnectionState(baseURL: io.localBaseURL() ?? boundURL)
        defer { session.closeStream() }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while !stopped {
            let deadline = ContinuousClock.now + options.headerTimeout
            var end = RequestParser.headEnd(in: buffer)
            while end == nil {
                do {
                    try RequestParser.checkPartial(buffer, limits: options.limits)
                } catch {
                    respondError(io, error, path: "-")
                    return
                }
                switch io.read(into: &chunk, deadline: deadline) {
                case .data(let n):
                    buffer += chunk[0 ..< n]
                    end = RequestParser.headEnd(in: buffer)
                case .timeout:
                    if !buffer.isEmpty { respondError(io, RequestError(status: 408, reason: "request head not received in time"), path: "-") }
                    return
                case .closed, .failed:
                    return
                }
            }
            guard let end else { return }
            let head: RequestHead
            do {
                head = try RequestParser.parse(buffer[0 ..< end], limits: options.limits)
            } catch {
                respondError(io, error, path: "-")
                return
            }
            buffer.removeFirst(end)
            // The body (a PROPFIND document), at most `limits.maxBodyBytes`.
            if head.contentLength > 0 {
                if buffer.count < head.contentLength,
                   head.header("Expect").map({ ASCII.equalsIgnoringCase($0, "100-continue") }) == true,
                   !io.send(ResponseHead(status: 100).serializedInterim()) { return }
                while buffer.count < head.contentLength {
                    switch io.read(into: &chunk, deadline: deadline) {
                    case .data(let n): buffer += chunk[0 ..< n]
                    case .timeout:
                        respondError(io, RequestError(status: 408, reason: "request body not received in time"), path: "-")
                        return
                    case .closed, .failed: return
                    }
                }
            }
            let body = Array(buffer.prefix(head.contentLength))
            buffer.removeFirst(body.count)
            let started = ContinuousClock.now
            let outcome = handle(head, body: body, io: io, state: &session)
            let ms = Double((ContinuousClock.now - started).components.attoseconds) / 1e15
                + Double((ContinuousClock.now - started).components.seconds) * 1000
            logger.info("serve: \(head.method) \(Self.loggable(head.path)) \(outcome.status) \(outcome.bytes) B \(String(format: "%.1f", ms)) ms\(outcome.aborted ? " (aborted)" : "")")
            if outcome.aborted || !outcome.keepAlive || !head.keepAlive { return }
        }
    }

    /// What the access log needs: the path only (the query may hold the token), bounded.
    static func loggable(_ path: Substring) -> String {
        path.count > 300 ? String(path.prefix(300)) + "…" : String(path)
    }

    private func respondError(_ io: ConnectionIO, _ error: RequestError, path: String) {
        let body = Array("\(error.status) \(ResponseHead.reason(error.status)): \(error.reason)\n".utf8)
        let head = ResponseHead(status: error.status, headers: [("Content-Type", "text/plain; charset=utf-8"),
                                                                ("Content-Length", String(body.count))])
        _ = io.send(head.serialized(keepAlive: false) + body)
        logger.info("serve: - \(path) \(error.status) \(body.count) B (\(error.reason))")
    }
}

/// What a connection keeps between requests: the stream of the track it reads, so read-ahead continues across
/// a player's successive range requests and is cancelled when the connection closes.
struct ConnectionState {
    /// `http://ADDRESS:PORT` the client connected to, for URLs in playlists and listings.
    var baseURL: String
    var stream: (any ByteSource)?
    var key: String?
    /// The hold on `stream`'s track (``OpenTracks``).
    var claim: OpenTrack?
    /// The track whose play was recorded on this connection (once per track and connection).
    var playedKey: String?

    /// Closes the stream, if any, and lets go of its track.
    mutating func closeStream() {
        stream?.close()
        claim?.release()
        stream = nil
        claim = nil
        key = nil
    }
}

/// How a response ended.
struct Outcome {
    var status: Int
    var bytes: Int64 = 0
    var keepAlive = true
    /// The connection must close: a body could not be completed.
    var aborted = false
}
