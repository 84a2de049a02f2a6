import CloudSyncHTTP
import Foundation
import Testing
import TestSupport

/// The real binary when the cloud cannot be reached (#20.1, #20.4), and what `-v` shows of download links (#19.10).
@Suite struct NetworkFailureTests {
    static let files: [(String, Int)] = (0 ..< 3).map { ("Album/track \($0).mp3", 50_000 + $0 * 1000) }

    /// A port nothing listens on: bound once, then closed.
    static func closedPort() throws -> Int {
        let listener = try LoopbackHTTPServer { _ in .init() }
        let port = listener.port
        listener.stop()
        return port
    }

    /// An unresolvable name (RFC 6761 `.invalid`: NXDOMAIN, no traffic leaves) and a closed port: every attempt is a
    /// network error, retried, and the pull ends with exit 5 and a message about the network — never the
    /// "libcurl refused option BUFFERSIZE … too old" of a pooled handle reconfigured after a resolver failure (exit 3).
    @Test(arguments: ["nonexistent.invalid", "127.0.0.1:closed"])
    func pullOfAnUnreachableHostIsANetworkError(host: String) throws {
        let authority = host.hasSuffix(":closed") ? "127.0.0.1:\(try Self.closedPort())" : host
        let name = String(authority.prefix { $0 != ":" })
        let env = try Env(url: "http://\(authority)/dav/")
        defer { env.cleanup() }
        let r = try env.run(["pull", "--retries", "2"], timeout: 60)
        #expect(r.status == 5, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("cannot reach \(name) over the network") && r.stderr.contains("check the network connection"),
                "stderr: \(r.stderr)")
        #expect(r.stderr.contains("retry 1/2") && r.stderr.contains("retry 2/2"), "retried like any network error: \(r.stderr)")
        #expect(!r.stderr.contains("BUFFERSIZE") && !r.stderr.contains("libcurl refused"), "stderr: \(r.stderr)")
        let ls = try env.run(["ls", "--retries", "2"], timeout: 60)
        #expect(ls.status == 0, "stderr: \(ls.stderr)")
        #expect(ls.stderr.contains("offline") && ls.stderr.contains("cannot reach \(name)"), "stderr: \(ls.stderr)")
        #expect(ls.stderr.contains("retry 2/2"), "--retries sets how long ls waits for the network: \(ls.stderr)")
    }

    /// #20.4: with the cloud stopped, `ls` answers from the index within seconds (one quick retry), says on stderr
    /// that this is the index's state, and exits 0; `ls --m3u` never touches the network.
    @Test func lsWithTheCloudStoppedShowsTheIndexFast() throws {
        let fixture = try Fixture(seed: 31, files: Self.files)
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull", "Album/track 0.mp3"]).status == 0)
        fixture.server.stop()

        let started = Date()
        let ls = try fixture.env.run(["ls"], timeout: 60)
        let took = Date().timeIntervalSince(started)
        #expect(ls.status == 0, "stderr: \(ls.stderr)")
        // A bound on waiting for the network (ten retries would take minutes), not on speed; `retry 1/1` below.
        #expect(took < 30, "ls took \(took) s offline")
        #expect(ls.stdout.contains("cached") && ls.stdout.contains("Album/track 0.mp3"), "stdout: \(ls.stdout)")
        #expect(ls.stdout.contains("missing") && ls.stdout.contains("Album/track 2.mp3"), "stdout: \(ls.stdout)")
        #expect(ls.stderr.contains("3 tracks") && !ls.stdout.contains("3 tracks"), "the count goes to stderr: \(ls.stdout)")
        let warnings = ls.stderr.split(separator: "\n").filter { $0.contains("warning") }
        #expect(warnings.count == 1 && warnings[0].contains("offline") && warnings[0].contains("index's state"), "stderr: \(ls.stderr)")
        #expect(ls.stderr.contains("retry 1/1"), "one quick retry, not ten: \(ls.stderr)")

        let json = try fixture.env.run(["ls", "--json", "--retries", "0"], timeout: 60)
        #expect(json.status == 0, "stderr: \(json.stderr)")
        #expect(!json.stderr.contains("retry"), "--retries 0: \(json.stderr)")
        let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(rows.count == 3)

        let m3uStarted = Date()
        let m3u = try fixture.env.run(["ls", "--m3u"], timeout: 60)
        #expect(m3u.status == 0, "stderr: \(m3u.stderr)")
        #expect(Date().timeIntervalSince(m3uStarted) < 30)
        #expect(!m3u.stderr.contains("retry") && !m3u.stderr.contains("offline"), "--m3u touched the network: \(m3u.stderr)")
        #expect(m3u.stdout.hasPrefix("#EXTM3U"), "stdout: \(m3u.stdout)")
        for (path, _) in Self.files {
            let encoded = path.replacingOccurrences(of: " ", with: "%20")
            #expect(m3u.stdout.contains("http://127.0.0.1:8765/tracks/lib/\(encoded)"), "stdout: \(m3u.stdout)")
        }
        #expect(m3u.stderr.isEmpty, "--m3u reads the index only, so nothing is tried: \(m3u.stderr)")
    }

    /// #19.10: `-v` logs each request, but of a download link only host and first path segment: Yandex hrefs carry
    /// their credential in the path and query.
    @Test func verbosePullLogsNoLinkPathOrQuery() async throws {
        let fake = try await Env.yandexFake()
        defer { fake.stop() }
        let env = try Env(remoteLines: Env.yandexLines(fake))
        defer { env.cleanup() }
        let r = try env.run(["pull", "-v"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let log = try await CurlTransport().send(HTTPRequest(url: fake.baseURL().appendingPathComponent("_log")))
        let rows = try JSONSerialization.jsonObject(with: log.body) as? [[String: Any]] ?? []
        let hrefs = Set(rows.compactMap { $0["href_id"] as? String })
        #expect(hrefs.count >= 2, "no download link was used; the test proves nothing")
        let downloads = r.stderr.split(separator: "\n").filter { $0.contains("localhost:\(fake.ports[1])") }
        #expect(!downloads.isEmpty, "-v logs the downloads: \(r.stderr)")
        #expect(downloads.allSatisfy { $0.contains("http://localhost:\(fake.ports[1])/disk/… → ") }, "\(downloads)")
        for href in hrefs { #expect(!r.stderr.contains(href), "the log shows link \(href)") }
        for secret in ["?", "test-access-token", "disk%3A", "disk:/Music"] {
            #expect(!r.stderr.contains(secret), "the log shows '\(secret)': \(r.stderr)")
        }
    }
}
