#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncCore
import CloudSyncEngine
import Foundation

/// Where a response's bytes come from: a ``TrackStream`` (fetches what is missing) or, for a remote whose
/// provider is unavailable, the cache alone.
protocol ByteSource: AnyObject, Sendable {
    var file: RemoteFile { get }
    func want(_ range: Range<Int64>) throws
    func available(from offset: Int64, limit: Int64) throws -> Range<Int64>
    func read(_ range: Range<Int64>) throws -> Data
    func consumed(upTo offset: Int64)
    func close()
    /// After ``RemoteOffline``: whether the cloud answers again within `timeout` (a probe started now).
    func awaitReachable(within timeout: Duration) -> Bool
}

extension TrackStream: ByteSource {}

/// Serves only what is cached; missing bytes are an error that names why the remote cannot fetch them.
final class CachedOnlySource: ByteSource {
    let reader: EntryReader
    let reason: String
    var file: RemoteFile { reader.file }

    init(reader: EntryReader, reason: String) {
        self.reader = reader
        self.reason = reason
    }

    func want(_ range: Range<Int64>) throws {
        guard try reader.presentRanges().containsAll(range) else {
            throw UnavailableError(message: "\(reader.remote):\(reader.file.path) is not fully cached and its remote cannot fetch it: \(reason)")
        }
    }

    func available(from offset: Int64, limit: Int64) throws -> Range<Int64> {
        try reader.presentRanges().presentPrefix(of: offset ..< min(limit, file.size))
    }

    func read(_ range: Range<Int64>) throws -> Data { try reader.read(range) }
    func consumed(upTo offset: Int64) {}
    func close() { reader.close() }
    func awaitReachable(within timeout: Duration) -> Bool { false }
}

struct UnavailableError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

extension TrackServer {
    /// Bytes sent per write of a body.
    static let sendBlock: Int64 = 256 << 10

    func handle(_ head: RequestHead, body: [UInt8], io: ConnectionIO, state: inout ConnectionState) -> Outcome {
        let path = head.path
        let isDAV = path == "/dav" || path.hasPrefix("/dav/")
        guard head.method == "GET" || head.method == "HEAD" || isDAV else {
            return respond(io, head, status: 405, text: "only GET and HEAD are served here (WebDAV lives under /dav/)",
                           extra: [("Allow", "GET, HEAD")])
        }
        let query = TrackPaths.queryItems(head.query)
        if let token = options.token {
            if !authorized(head, query: query, token: token) {
                return respond(io, head, status: 401,
                               text: "a token is required: add ?token=TOKEN, send Authorization: Bearer TOKEN, or use it as the Basic-auth password",
                               extra: [("WWW-Authenticate", "Basic realm=\"cloudsync\", charset=\"UTF-8\"")])
            }
        } else if !Self.isLoopbackHost(head.header("Host")) {
            // DNS rebinding: a web page whose name now resolves to 127.0.0.1 must not read the library.
            return respond(io, head, status: 403, text: "serve without --token answers only requests addressed to 127.0.0.1, [::1] or "
                + "localhost; start it with --token to reach it by another name")
        }
        if isDAV {
            return dav(io, head, body: body, encoded: path.dropFirst("/dav".count), state: &state)
        }
        do {
            if path == "/" || path == "/index.html" {
                let entries = try cache.entries()
                let remotes = Set(entries.map(\.remote)).union(sources.keys).union(unavailable.keys).sorted()
                let html = IndexPage.html(entries, remotes: remotes, unavailable: unavailable, token: options.token)
                return respond(io, head, status: 200, body: Array(html.utf8), type: "text/html; charset=utf-8")
            }
            if path == "/playlist.m3u" {
                return try playlist(io, head, query: query, baseURL: state.baseURL)
            }
            if path.hasPrefix("/tracks/") {
                switch TrackPaths.parse(afterPrefix: path.dropFirst("/tracks/".count)) {
                case .malformed: return respond(io, head, status: 400, text: "malformed percent-encoding in the path")
                case .refused: return respond(io, head, status: 404, text: "no such track")
                case .track(let remote, let path): return track(io, head, remote: remote, path: path, state: &state)
                }
            }
            return respond(io, head, status: 404, text: "not found: try / or /playlist.m3u")
        } catch {
            logger.warning("serve: \(head.method) \(Self.loggable(path)): \(error)")
            return respond(io, head, status: 500, text: "the cache index could not be read; see the server's log")
        }
    }

    /// Constant-time comparison of the presented token with ours: `?token=`, `Authorization: Bearer TOKEN`, or
    /// the password of `Authorization: Basic` (any user name), so `http://user:TOKEN@host/dav/` works in players
    /// that only speak Basic auth.
    func authorized(_ head: RequestHead, query: [(String, String)], token: String) -> Bool {
        var presented: [String] = query.filter { $0.0 == "token" }.map(\.1)
        if let auth = head.header("Authorization") {
            let lower = auth.lowercased()
            if lower.hasPrefix("bearer ") {
                presented.append(String(auth.dropFirst(7)).trimmingCharacters(in: .whitespaces))
            } else if lower.hasPrefix("basic "),
                      let decoded = Data(base64Encoded: String(auth.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
                      let pair = String(data: decoded, encoding: .utf8), let colon = pair.firstIndex(of: ":") {
                presented.append(String(pair[pair.index(after: colon)...]))
            }
        }
        return presented.contains { Self.constantTimeEqual(Array($0.utf8), Array(token.utf8)) }
    }

    /// Whether a Host header names this machine's loopback: `localhost`, 127.0.0.0/8 or `[::1]`, with an
    /// optional port. A request without Host (HTTP/1.0) is not from a browser and passes.
    static func isLoopbackHost(_ host: String?) -> Bool {
        guard let host else { return true }
        let name: Substring, port: Substring
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            name = host[host.index(after: host.startIndex) ..< close]
            let rest = host[host.index(after: close)...]
            if rest.isEmpty { port = "" } else {
                guard rest.hasPrefix(":") else { return false }
                port = rest.dropFirst()
            }
            guard name.contains(":") else { return false }
        } else {
            let parts = host.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            name = parts[0]
            port = parts.count > 1 ? parts[1] : ""
            if parts.count > 1, port.isEmpty { return false }
        }
        guard port.utf8.count <= 5, port.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        let lower = name.lowercased()
        if lower == "localhost" || lower == "localhost." { return true }
        return ListeningSocket.isLoopback(String(name)) && lower != "localhost"
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var diff = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for i in 0 ..< max(a.count, b.count) {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            diff |= x ^ y
        }
        return diff == 0 && a.count == b.count
    }

    private func playlist(_ io: ConnectionIO, _ head: RequestHead, query: [(String, String)], baseURL: String) throws -> Outcome {
        let remote = query.last { $0.0 == "remote" }?.1
        let cachedOnly = query.contains { $0.0 == "cached" && ($0.1 == "1" || $0.1 == "true" || $0.1 == "yes") }
        var entries = try cache.entries(remote: remote)
        if let remote, entries.isEmpty, sources[remote] == nil, unavailable[remote] == nil {
            return respond(io, head, status: 404, text: "no remote named '\(remote)' is configured or indexed")
        }
        if cachedOnly { entries = entries.filter { $0.state == .complete } }
        let text = Playlist.m3u(entries, baseURL: baseURL, token: options.token)
        return respond(io, head, status: 200, body: Array(text.utf8), type: "audio/x-mpegurl; charset=utf-8")
    }

    // MARK: - Tracks

    /// GET/HEAD of one indexed track (from `/tracks/` or the WebDAV face), with Range.
    func track(_ io: ConnectionIO, _ head: RequestHead, remote: String, path: String, state: inout ConnectionState) -> Outcome {
        let entry: CacheEntryInfo
        do {
            guard let found = try cache.entry(remote: remote, path: path) else {
                if let moved = movedRedirect(io, head, remote: remote, path: path, url: TrackPaths.urlPath) { return moved }
                return respond(io, head, status: 404, text: "no such track in the index; run `cloudsync ls --remote NAME` to refresh it")
            }
            entry = found
        } catch {
            logger.warning("serve: looking up \(remote):\(path): \(error)")
            return respond(io, head, status: 500, text: "the cache index could not be read; see the server's log")
        }
        let file = entry.file
        let size = file.size
        var request = ByteRangeRequest.resolve(head.values("Range").count == 1 ? head.header("Range") : nil, size: size)
        if let ifRange = head.header("If-Range"), !TrackMetadata.ifRangeMatches(ifRange, file: file) {
            request = .whole
        }
        var headers: [(String, String)] = [
            ("Content-Type", TrackMetadata.contentType(for: file)),
            ("Accept-Ranges", "bytes"),
            ("ETag", TrackMetadata.etag(for: file)),
            ("Last-Modified", TrackMetadata.httpDate(file.modified)),
        ]
        let status: Int
        let body: Range<Int64>
        switch request {
        case .unsatisfiable:
            headers.append(("Content-Range", "bytes */\(size)"))
            return respond(io, head, status: 416, body: [], type: nil, extra: headers)
        case .whole:
            status = 200
            body = 0 ..< size
        case .partial(let r):
            status = 206
            body = r
            headers.append(("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(size)"))
        }
        headers.append(("Content-Length", String(body.count)))
        if head.method == "HEAD" || body.isEmpty {
            return send(io, head, ResponseHead(status: status, headers: headers), first: nil)
        }

        // A source for this track: the connection's (read-ahead continues), or a new one.
        let key = "\(remote)\u{0}\(path)\u{0}\(TrackMetadata.etag(for: file))"
        if state.key != key {
            state.closeStream()
            do {
                state.stream = try openSource(remote: remote, path: path)
                state.claim = openTracks.open(RemotePath(remote: remote, path: path))
                state.key = key
            } catch {
                return failure(io, head, error, context: "\(remote):\(path)")
            }
        }
        guard let source = state.stream, source.file.fingerprint == file.fingerprint else {
            state.closeStream()
            return respond(io, head, status: 503, text: "the track changed while opening it; try again", extra: [("Retry-After", "1")])
        }
        // Wait for the first byte before answering, so a failing fetch still gets a proper status.
        var first: Range<Int64>
        do {
            do {
                try source.want(body)
            } catch is RemoteOffline where source.awaitReachable(within: options.offlineGrace) {
                // The network came back since the cloud was last probed: fetch now rather than answer 503.
                try source.want(body)
            }
            first = try waitForBytes(source, io: io, from: body.lowerBound, limit: body.upperBound, timeout: options.firstByteTimeout)
        } catch {
            return failure(io, head, error, context: "\(remote):\(path)")
        }
        if first.isEmpty {
            if io.peerClosed() { return Outcome(status: 499, keepAlive: false, aborted: true) }
            return respond(io, head, status: 504, text: "the cloud did not deliver the first byte in time; try again")
        }
        first = first.lowerBound ..< min(first.upperBound, saturatingAdd(first.lowerBound, Self.sendBlock))
        let firstData: Data
        do {
            firstData = try read(source, first, io: io, timeout: options.firstByteTimeout)
        } catch {
            return failure(io, head, error, context: "\(remote):\(path)")
        }
        if firstData.isEmpty {
            if io.peerClosed() { return Outcome(status: 499, keepAlive: false, aborted: true) }
            return respond(io, head, status: 504, text: "the cloud did not deliver the first byte in time; try again")
        }
        var outcome = send(io, head, ResponseHead(status: status, headers: headers), first: firstData)
        if outcome.aborted { return outcome }
        var position = first.lowerBound + Int64(firstData.count)
        source.consumed(upTo: position)
        // A client that reads past the head (the start set's leading part: tags, cover and the first seconds)
        // is playing the track, not scanning it: the budget planner ranks played tracks first.
        let playedFrom = min(size, entry.startSet?.ranges.first?.upperBound ?? Self.playThreshold)
        func notePlay() {
            guard position > playedFrom, state.playedKey != key else { return }
            state.playedKey = key
            cache.recordPlay(remote: remote, path: path)
        }
        notePlay()
        // A client that freezes when a body ends short (mpd before 0.23.13, ``ClientQuirks``) is never cut while it
        // is there: a stall waits on, a failure holds the response open until it closes (a skip, a stop).
        let client = head.header("User-Agent")
        let neverCut = ClientQuirks.freezesOnCutBody(userAgent: client)
        // Named by the version parsed, not the header (the client's own text stays out of the log); only built
        // for such a client, not on every request.
        let notCut = neverCut ? "not cut, because mpd \(ClientQuirks.mpdVersion(client)?.map(String.init).joined(separator: ".") ?? "?") "
            + "freezes on a cut response (MPD issue #1727, fixed in 0.23.13)" : ""
        /// Nothing arrived in `stallTimeout` (`stall` says what): true to wait on, for a client that freezes on a cut
        /// and is still there; else the response ends, said as a stall, or at info when the client left meanwhile
        /// (a skip, a seek) while `awaited`.
        func waitsOn(_ stall: String, _ awaited: String) -> Bool {
            let left = stopped || io.peerClosed()
            if neverCut, !left {
                logger.warning("serve: \(remote):\(path): \(stall); waiting on at byte \(position), \(notCut)")
                return true
            }
            if left {
                logger.info("serve: \(remote):\(path): the client left at byte \(position) while \(awaited)")
            } else {
                logger.warning("serve: \(remote):\(path): \(stall); closing the response")
            }
            return false
        }
        while position < body.upperBound {
            do {
                let next = try waitForBytes(source, io: io, from: position, limit: min(body.upperBound, saturatingAdd(position, Self.sendBlock)),
                                        timeout: options.stallTimeout)
                if next.isEmpty {
                    if waitsOn("no bytes from the cloud for \(options.stallTimeout)", "it waited for bytes from the cloud") { continue }
                    outcome.aborted = true
                    return outcome
                }
                let data = try read(source, next, io: io, timeout: options.stallTimeout)
                if data.isEmpty {
                    if waitsOn("a damaged block was not fetched again within \(options.stallTimeout)", "a damaged block was fetched again") { continue }
                    outcome.aborted = true
                    return outcome
                }
                guard io.send(data) else {
                    outcome.aborted = true
                    return outcome
                }
                outcome.bytes += Int64(data.count)
                position = next.lowerBound + Int64(data.count)
            } catch let offline as RemoteOffline {
                // Held, probing the cloud: for a client that freezes on a cut, until it closes or the cloud answers
                // (like a network that stalls); for others `offlineGrace` at most — a scanner that read ahead past
                // the head closes on its own meanwhile, rather than see its stream fail.
                if neverCut { logger.info("serve: \(remote):\(path): the body waits at byte \(position), missing while \(offline); \(notCut)") }
                switch waitWhileOffline(source, io: io, until: neverCut ? nil : .now + options.offlineGrace) {
                case .online:
                    logger.info("serve: \(remote):\(path): the cloud answers again; the body goes on from byte \(position)")
                    continue
                case .closed:
                    logger.info("serve: \(remote):\(path): the client closed at byte \(position), missing while \(offline)")
                case .timedOut:
                    logger.info("serve: \(remote):\(path): the body ends at byte \(position), missing while \(offline)")
                }
                outcome.aborted = true
                return outcome
            } catch {
                logger.warning("serve: \(remote):\(path) stopped mid-response: \(error)" + (neverCut ? "; held open until the client closes, \(notCut)" : ""))
                if neverCut { holdUntilClosed(io) }
                outcome.aborted = true
                return outcome
            }
            source.consumed(upTo: position)
            notePlay()
        }
        return outcome
    }

    /// Keeps a response whose body cannot go on open until the client closes or the server stops: for a client
    /// that freezes on a cut (``ClientQuirks``).
    private func holdUntilClosed(_ io: ConnectionIO) {
        while !stopped, !io.waitForPeerClose(timeout: .seconds(1)) {}
    }

    private enum OfflineWait { case online, closed, timedOut }

    /// Holds a response while the cloud cannot be reached, probing it (at most once per probe interval,
    /// ``TrackStream/awaitReachable(within:)``): `.online` once it answers again (asking for the bytes fetches
    /// them; a fetch that then fails ends in the body loop's error path), `.closed` when the client closed or the
    /// server stops, `.timedOut` at `deadline` (nil: none).
    private func waitWhileOffline(_ source: any ByteSource, io: ConnectionIO, until deadline: ContinuousClock.Instant?) -> OfflineWait {
        while !stopped {
            let left = deadline.map { $0 - .now } ?? .seconds(1)
            if left <= .zero { return .timedOut }
            if source.awaitReachable(within: min(left, .seconds(1))) { return .online }
            let slice = min(.milliseconds(250), deadline.map { max(.zero, $0 - .now) } ?? .milliseconds(250))
            if io.waitForPeerClose(timeout: slice) { return .closed }
        }
        return .closed
    }

    /// Where a play starts for a track whose start set is not known: past its first MiB.
    static let playThreshold: Int64 = 1 << 20

    private func openSource(remote: String, path: String) throws -> any ByteSource {
        if let onDemand = sources[remote] { return try onDemand.open(path: path) }
        let reason = unavailable[remote] ?? "the remote is not in the configuration"
        return CachedOnlySource(reader: try cache.openReader(remote: remote, path: path), reason: reason)
    }

    /// Reads `range` (present per `source`), or a prefix of it. Bytes that fail their check (a block of an
    /// encrypted cache, a track cut short on disk) are never sent: the read drops them from the index, so they
    /// are fetched again here, on demand, and the read retried (two refetches at most; bytes damaged again are an
    /// error). Empty when the fetch did not deliver, or a writer holding the entry did not let go, in `timeout`,
    /// or the client left.
    private func read(_ source: any ByteSource, _ range: Range<Int64>, io: ConnectionIO, timeout: Duration) throws -> Data {
        var range = range
        var refetches = 2
        let deadline = ContinuousClock.now + timeout
        var pause: UInt32 = 1000
        while true {
            do {
                return try source.read(range)
            } catch let error as CacheError where error.code == .damaged || error.code == .incomplete {
                // Bytes that fail their check are dropped and fetched again (twice at most: a block that keeps
                // failing is a disk that keeps damaging it); `.incomplete`: another reader dropped them first.
                // Until a writer that holds the entry lets go (a session promoting it, another process's pull),
                // they cannot be dropped and stay present: wait for it, up to `timeout`, rather than count those
                // reads as fetches.
                try source.want(range)
                let ready = try source.available(from: range.lowerBound, limit: range.upperBound)
                if ready.isEmpty {
                    guard refetches > 0 else { throw error }
                    refetches -= 1
                    range = try waitForBytes(source, io: io, from: range.lowerBound, limit: range.upperBound,
                                             timeout: deadline - .now)
                    if range.isEmpty { return Data() }
                } else {
                    if ContinuousClock.now >= deadline || stopped || io.peerClosed() { return Data() }
                    usleep(pause)
                    pause = min(50_000, pause * 2)
                    range = ready
                }
            }
        }
    }

    /// Polls `source` until bytes at `offset` are present (0.1 ms, growing to 2 ms between polls: an in-memory
    /// check while this process fetches, an index read at most every 50 ms otherwise); empty on
    /// timeout or when the client went away.
    private func waitForBytes(_ source: any ByteSource, io: ConnectionIO, from offset: Int64, limit: Int64,
                              timeout: Duration) throws -> Range<Int64> {
        let deadline = ContinuousClock.now + timeout
        var pause: UInt32 = 100
        var lastPeerCheck = ContinuousClock.now
        while true {
            let ready = try source.available(from: offset, limit: limit)
            if !ready.isEmpty { return ready }
            let now = ContinuousClock.now
            if now >= deadline || stopped { return offset ..< offset }
            if now - lastPeerCheck >= .milliseconds(200) {
                if io.peerClosed() { return offset ..< offset }
                lastPeerCheck = now
            }
            usleep(pause)
            pause = min(2000, pause * 2)
        }
    }

    private func failure(_ io: ConnectionIO, _ head: RequestHead, _ error: any Error, context: String) -> Outcome {
        if let cacheError = error as? CacheError {
            switch cacheError.code {
            case .notFound: return respond(io, head, status: 404, text: "no such track in the index")
            case .changed, .busy:
                return respond(io, head, status: 503, text: "\(cacheError.message)", extra: [("Retry-After", "1")])
            case .diskFull:
                // Missing bytes are fetched into the cache, and it has no room: the message says what to do.
                return respond(io, head, status: 507, text: "\(cacheError.message)")
            default: break
            }
        }
        if let providerError = error as? ProviderError, providerError.code == .notFound {
            // Gone from the cloud since the last listing: a player should skip it, not retry.
            return respond(io, head, status: 404, text: "\(context): \(providerError.message)")
        }
        if error is UnavailableError {
            return respond(io, head, status: 503, text: String(describing: error))
        }
        if let offline = error as? RemoteOffline {
            return respond(io, head, status: 503, text: offline.description, extra: [("Retry-After", String(offline.retryAfter))])
        }
        logger.warning("serve: \(context): \(error)")
        return respond(io, head, status: 502, text: "fetching \(context) from the cloud failed: \(error)")
    }

    /// A 301 to where the track at `path` went when it moved on the remote (``Cache/movedPath(remote:from:)``), so a
    /// playlist holding its old URL plays on; `url` makes the new URL's path, the query (a token) is kept. nil when
    /// it did not move.
    func movedRedirect(_ io: ConnectionIO, _ head: RequestHead, remote: String, path: String,
                       url: (_ remote: String, _ path: String) -> String) -> Outcome? {
        guard let moved = try? cache.movedPath(remote: remote, from: path) else { return nil }
        let location = url(remote, moved) + (head.query.isEmpty ? "" : "?" + head.query)
        return respond(io, head, status: 301, text: "moved on the remote to \(location)", extra: [("Location", location)])
    }

    // MARK: - Writing

    func respond(_ io: ConnectionIO, _ head: RequestHead, status: Int, text: String, extra: [(String, String)] = []) -> Outcome {
        respond(io, head, status: status, body: Array((text + "\n").utf8), type: "text/plain; charset=utf-8", extra: extra)
    }

    func respond(_ io: ConnectionIO, _ head: RequestHead, status: Int, body: [UInt8], type: String?,
                         extra: [(String, String)] = []) -> Outcome {
        var headers = extra
        if let type { headers.append(("Content-Type", type)) }
        headers.append(("Content-Length", String(body.count)))
        let keepAlive = head.keepAlive
        var bytes = ResponseHead(status: status, headers: headers).serialized(keepAlive: keepAlive)
        if head.method != "HEAD" { bytes += body }
        guard io.send(bytes) else { return Outcome(status: status, keepAlive: false, aborted: true) }
        return Outcome(status: status, bytes: head.method == "HEAD" ? 0 : Int64(body.count), keepAlive: keepAlive)
    }

    /// Sends the head and, in the same write, the first block of the body.
    private func send(_ io: ConnectionIO, _ head: RequestHead, _ response: ResponseHead, first: Data?) -> Outcome {
        var bytes = response.serialized(keepAlive: head.keepAlive)
        if let first { bytes += first }
        guard io.send(bytes) else { return Outcome(status: response.status, keepAlive: false, aborted: true) }
        return Outcome(status: response.status, bytes: Int64(first?.count ?? 0), keepAlive: head.keepAlive)
    }
}
