import CloudSyncCore
import Foundation
import Testing
import TestSupport
@testable import CloudSyncHTTP

/// The provider kit's wire values: dates, entity tags, percent-encoding and URLs (#24).
struct WireDateTests {
    static let nov30 = Date(timeIntervalSince1970: 1_796_072_124)  // Mon, 30 Nov 2026 20:55:24 GMT

    @Test("HTTP-dates in every accepted format", arguments: [
        "Mon, 30 Nov 2026 20:55:24 GMT", "Mon, 30 Nov 2026 21:55:24 +0100", "Mon, 30 Nov 2026 15:55:24 -0500",
        "Monday, 30-Nov-26 20:55:24 GMT", "Mon Nov 30 20:55:24 2026", "Mon Nov 30 20:55:24 UTC 2026",
        "Mon, 30 Nov 2026 20:55:24 UTC", "Mon, 30 NOV 2026 20:55:24 GMT", " Mon, 30 Nov 2026 20:55:24 GMT\r\n",
    ])
    func httpDates(_ text: String) {
        #expect(HTTPDate.parse(text) == Self.nov30)
    }

    @Test("unreadable HTTP-dates are nil", arguments: [
        "", "yesterday", "soon", "-5", "1.5", "Mon, 31 Foo 2026 20:55:24 GMT", "Mon, 30 Nov 2026 25:00:00 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT", "Mon, 30 Nov 2026 20:55 GMT", "Mon, 30 Nov 2026 20:55:24 +01", "2026-11-30T20:55:24Z",
    ])
    func badHTTPDates(_ text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("RFC 3339 with offsets, Z, fractions and the forms servers print", arguments: [
        ("2026-11-30T20:55:24Z", 1_796_072_124.0), ("2026-11-30T22:55:24+02:00", 1_796_072_124),
        ("2026-11-30T20:55:24.000Z", 1_796_072_124), ("2026-11-30 20:55:24z", 1_796_072_124),
        ("2014-04-21T14:57:14+04:00", 1_398_077_834), ("2014-04-21T14:57:14.5+04:00", 1_398_077_834.5),
        ("2017-08-07T16:16:30.7Z", 1_502_122_590.7), ("2015-05-12T15:50:38Z", 1_431_445_838),
        ("2026-01-02T03:04:05.123456789+01:00", 1_767_319_445.123456789), ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59Z", -1),
    ])
    func rfc3339(_ c: (String, Double)) throws {
        let date = try #require(RFC3339.parse(c.0))
        #expect(abs(date.timeIntervalSince1970 - c.1) < 1e-6)
    }

    @Test("unreadable RFC 3339 is nil", arguments: [
        "", "yesterday", "garbage", "2026-13-30T20:55:24Z", "2026-11-30T24:00:00Z", "2026-11-30T20:55:24",
        "2026-11-30T20:55:24.Z", "2026-11-30T20:55:24+0200", "2026-11-30T20:55:24Zjunk", "Mon, 30 Nov 2026 20:55:24 GMT",
    ])
    func badRFC3339(_ text: String) {
        #expect(RFC3339.parse(text) == nil)
    }

    @Test("formatting: IMF-fixdate and RFC 3339 in UTC, clamped to years 1-9999")
    func formats() {
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 1_700_000_000)) == "Tue, 14 Nov 2023 22:13:20 GMT")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 1_700_000_000.9)) == "2023-11-14T22:13:20Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59Z")
        #expect(RFC3339.format(Date.distantFuture.addingTimeInterval(1e12)) == "9999-12-31T23:59:59Z")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -1e15)) == "Mon, 01 Jan 0001 00:00:00 GMT")
        #expect(RFC3339.format(Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00Z")
    }

    /// Every whole second of years 1-9999 formats and parses back to itself in both forms, and agrees with
    /// Foundation's Gregorian calendar.
    @Test("seeded: format and parse round-trip and agree with Foundation")
    func roundTrip() {
        let s = seed("WireDateTests.roundTrip")
        var random = SeededRandom(seed: s)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        for _ in 0..<2000 {
            let seconds = Int64.random(in: CivilTime.earliest...CivilTime.latest, using: &random)
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            #expect(HTTPDate.parse(HTTPDate.format(date)) == date, "seed \(s): \(seconds)")
            #expect(RFC3339.parse(RFC3339.format(date)) == date, "seed \(s): \(seconds)")
            let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            let civil = CivilTime(date)
            if seconds > -12_219_292_800 {  // Foundation switches to the Julian calendar before 1582-10-15
                #expect([c.year, c.month, c.day, c.hour, c.minute, c.second] == [civil.year, civil.month, civil.day, civil.hour, civil.minute, civil.second], "seed \(s): \(seconds)")
            }
        }
    }

    @Test("Retry-After in seconds or as any HTTP-date", arguments: [
        ("120", 120.0), ("Mon, 30 Nov 2026 20:55:24 GMT", 24), ("Mon, 30 Nov 2020 20:55:24 GMT", 0),
        ("Mon, 30 Nov 2026 21:55:24 +0100", 24),
    ])
    func retryAfterDates(_ c: (String, Double)) {
        #expect(retryAfter(from: ["Retry-After": c.0], now: Date(timeIntervalSince1970: 1_796_072_100)) == c.1)
    }
}

struct EntityTagTests {
    @Test("parsing", arguments: [
        ("\"abc\"", "abc", false), ("W/\"abc\"", "abc", true), ("  \"x-y\" ", "x-y", false), ("\"\"", "", false),
        ("\"cs-40-1f\"", "cs-40-1f", false), ("W/\"\"", "", true),
    ])
    func parses(_ c: (String, String, Bool)) throws {
        let tag = try #require(EntityTag(parsing: c.0))
        #expect(tag.opaque == c.1)
        #expect(tag.isWeak == c.2)
        #expect(EntityTag(parsing: tag.description) == tag)
    }

    @Test("not entity tags", arguments: ["", "abc", "\"", "\"abc", "abc\"", "W/abc", "w/\"abc\"", "\"a\"b\"", "\"a\", \"b\"", "\"a\u{1}\""])
    func rejects(_ text: String) {
        #expect(EntityTag(parsing: text) == nil)
        #expect(EntityTag.ifRangeValidator(text) == nil)
    }

    /// RFC 9110 §13.1.5: If-Range needs a strong validator. The rule the client (CurlTransport), the engine
    /// (FileFetcher) and WebDAV's download requests all use.
    @Test("If-Range carries strong tags only", arguments: [
        ("\"abc\"", "\"abc\""), (" \"abc\" ", "\"abc\""), ("W/\"abc\"", nil), ("abc", nil), ("d41d8cd98f00b204e9800998ecf8427e", nil),
    ] as [(String, String?)])
    func ifRangeValidator(_ c: (String, String?)) {
        #expect(EntityTag.ifRangeValidator(c.0) == c.1)
    }

    @Test("comparison: strong needs both strong, weak only the same opaque tag")
    func comparison() throws {
        let a = EntityTag(opaque: "x"), weakA = EntityTag(opaque: "x", isWeak: true), b = EntityTag(opaque: "y")
        #expect(a.strongMatches(a))
        #expect(!a.strongMatches(weakA) && !weakA.strongMatches(a) && !weakA.strongMatches(weakA))
        #expect(a.weakMatches(weakA) && weakA.weakMatches(a))
        #expect(!a.strongMatches(b) && !a.weakMatches(b))
    }

    @Test("a received If-Range still names the version", arguments: [
        ("\"v1\"", true), ("\"v2\"", false), ("W/\"v1\"", false), ("Tue, 14 Nov 2023 22:13:20 GMT", true),
        ("Tue, 14 Nov 2023 22:13:21 GMT", false), ("\"v1", false), ("", false),
    ])
    func ifRangeMatches(_ c: (String, Bool)) {
        #expect(EntityTag.ifRangeMatches(c.0, current: EntityTag(opaque: "v1"), lastModified: Date(timeIntervalSince1970: 1_700_000_000.5)) == c.1)
    }
}

struct URLBuildingTests {
    @Test("unreserved: everything but A-Za-z0-9-._~ is encoded", arguments: [
        ("a b", "a%20b"), ("#%+&", "%23%25%2B%26"), ("[x]", "%5Bx%5D"), ("it's \"q\"", "it%27s%20%22q%22"),
        ("Кино", "%D0%9A%D0%B8%D0%BD%D0%BE"), ("🎵", "%F0%9F%8E%B5"), ("A-z_0.9~", "A-z_0.9~"), ("a/b", "a%2Fb"),
        ("disk:/a+b &#%?=.mp3", "disk%3A%2Fa%2Bb%20%26%23%25%3F%3D.mp3"), ("Рок", "%D0%A0%D0%BE%D0%BA"),
    ])
    func unreserved(_ c: (String, String)) {
        #expect(PercentEncoding.encode(c.0) == c.1)
        #expect(PercentEncoding.decode(c.1) == c.0)
    }

    @Test("path segments keep pchar's sub-delims, : and @, but never / ? # % ;", arguments: [
        ("ABC!123", "ABC!123"), ("a:b@c$&'()*+,=", "a:b@c$&'()*+,="), ("a/b?c#d%e;f", "a%2Fb%3Fc%23d%25e%3Bf"), ("é", "%C3%A9"),
    ])
    func pathSegment(_ c: (String, String)) {
        #expect(PercentEncoding.encode(c.0, .pathSegment) == c.1)
        #expect(PercentEncoding.decode(c.1) == c.0)
    }

    @Test("paths (serve's track URLs) keep / and unreserved characters only", arguments: [
        ("Artist/Album One/01 Tone [A].mp3", "Artist/Album%20One/01%20Tone%20%5BA%5D.mp3"), ("a+b/c:d@e", "a%2Bb/c%3Ad%40e"),
        ("Ёлка/東京 🎵.flac", "%D0%81%D0%BB%D0%BA%D0%B0/%E6%9D%B1%E4%BA%AC%20%F0%9F%8E%B5.flac"), ("A-z_0.9~/", "A-z_0.9~/"),
    ])
    func path(_ c: (String, String)) {
        #expect(PercentEncoding.encode(c.0, .path) == c.1)
        #expect(PercentEncoding.decode(c.1) == c.0)
    }

    @Test("form encoding: letters, digits and *-._ as is, space as +, the rest %XX", arguments: [
        ([("grant_type", "refresh_token"), ("refresh_token", "a/b+c d=&é")], "grant_type=refresh_token&refresh_token=a%2Fb%2Bc+d%3D%26%C3%A9"),
        ([("a*b-c.d_e", "~!'()")], "a*b-c.d_e=%7E%21%27%28%29"), ([("k", "")], "k="), ([], ""),
    ])
    func form(_ c: ([(String, String)], String)) {
        #expect(PercentEncoding.form(c.0) == c.1)
    }

    @Test("bad escapes and invalid UTF-8 do not decode", arguments: ["%", "%4", "%ZZ", "a%g1", "%C3%28", "%FF"])
    func badDecode(_ text: String) {
        #expect(PercentEncoding.decode(text) == nil)
    }

    @Test("seeded: encoding round-trips and leaves no reserved byte")
    func roundTrip() {
        let s = seed("URLBuildingTests.roundTrip")
        var random = SeededRandom(seed: s)
        let alphabet = Array("aZ09-._~ !#$%&'()*+,/:;=?@[]\"\\é€🎵\u{0}\n")
        for _ in 0..<500 {
            let text = String((0..<Int.random(in: 0...24, using: &random)).map { _ in alphabet.randomElement(using: &random) ?? "a" })
            for component in [PercentEncoding.Component.unreserved, .pathSegment] {
                let encoded = PercentEncoding.encode(text, component)
                #expect(PercentEncoding.decode(encoded) == text, "seed \(s): \(text.debugDescription)")
                #expect(!encoded.contains { "/?#[];\" \\".contains($0) } && encoded.utf8.allSatisfy { $0 < 0x80 }, "seed \(s): \(encoded)")
            }
        }
    }

    @Test("API URLs: base without trailing slashes, route as is, query encoded")
    func apiURLs() throws {
        let base = try #require(URL(string: "https://api.example.com/"))
        #expect(APIURL.make(base, path: "/v1/disk/resources", query: [("path", "disk:/a b"), ("limit", "5")])?.absoluteString
            == "https://api.example.com/v1/disk/resources?path=disk%3A%2Fa%20b&limit=5")
        #expect(APIURL.make(try #require(URL(string: "http://127.0.0.1:8080//")), path: "/2/files/download")?.absoluteString
            == "http://127.0.0.1:8080/2/files/download")
        #expect(APIURL.make(try #require(URL(string: "ftp://example.com")), path: "/x") == nil)
        #expect(APIURL.make(URL(fileURLWithPath: "/tmp"), path: "/x") == nil)
        #expect(throws: ProviderError.self) {
            try APIURL.build(URL(fileURLWithPath: "/tmp"), path: "/x", remote: "r", setting: "api_url", example: "https://x")
        }
    }
}

struct FolderWalkTests {
    /// A random tree (with links back to earlier folders, as a server loop would report), walked with bounded
    /// concurrency: every reachable folder is read exactly once, never more than `concurrency` reads at once.
    @Test("seeded: every folder once, bounded concurrency, loops cut", arguments: [1, 3, 8])
    func walk(concurrency: Int) async throws {
        let s = seed("FolderWalkTests.walk")
        var random = SeededRandom(seed: s &+ UInt64(concurrency))
        var children: [[String]: [[String]]] = [[]: []]
        var folders: [[String]] = [[]]
        for i in 0..<200 {
            let parent = folders.randomElement(using: &random) ?? []
            let child = parent + ["f\(i)"]
            children[parent, default: []].append(child)
            children[child] = []
            folders.append(child)
            if Int.random(in: 0..<10, using: &random) == 0 {  // a link back up: the frontier must not list it again
                children[child, default: []].append(folders.randomElement(using: &random) ?? [])
            }
        }
        let tree = children
        let counter = ConcurrencyCounter()
        var frontier = WalkFrontier(limits: WalkLimits(maxFolders: 10_000, maxDepth: 1_000), remote: "r", root: "", start: [])
        var read: [[String]] = []
        try await FolderWalk.run(start: [[String]()], concurrency: concurrency, read: { folder in
            await counter.enter()
            await Task.yield()
            await counter.leave()
            return (folder, tree[folder] ?? [])
        }) { outcome in
            read.append(outcome.0)
            return try frontier.admit(outcome.1, depth: \.count, shown: { $0.joined(separator: "/") }).list
        }
        #expect(read.count == folders.count, "seed \(s)")
        #expect(Set(read) == Set(folders), "seed \(s)")
        #expect(await counter.most <= concurrency, "seed \(s)")
    }

    @Test("limits: deeper folders are reported, one folder too many ends the walk")
    func limits() throws {
        var frontier = WalkFrontier(limits: WalkLimits(maxFolders: 4, maxDepth: 1), remote: "r", root: "Music", start: [])
        let first = try frontier.admit([["a"], ["a", "deep"], ["b"], ["a"]], depth: \.count, shown: { $0.joined(separator: "/") })
        #expect(first.list == [["a"], ["b"]])
        #expect(first.tooDeep == ["a/deep"])
        #expect(throws: ProviderError.self) { try frontier.admit([["c"]], depth: \.count, shown: { $0.joined(separator: "/") }) }
    }
}

actor ConcurrencyCounter {
    private var now = 0
    private(set) var most = 0
    func enter() { now += 1; most = max(most, now) }
    func leave() { now -= 1 }
}

/// The one status → ProviderError table, and how a provider extends it.
struct StatusTableTests {
    @Test("statuses map to codes once for every provider", arguments: [
        (200, nil), (206, nil), (302, nil), (400, ProviderError.Code.invalidResponse), (401, .unauthorized), (403, .forbidden),
        (404, .notFound), (405, .invalidResponse), (408, .transient), (409, .invalidResponse), (410, .notFound),
        (416, .invalidResponse), (423, .transient), (425, .transient), (429, .rateLimited), (500, .transient),
        (501, .transient), (502, .transient), (503, .rateLimited), (504, .transient), (507, .quotaExceeded), (509, .transient),
    ] as [(Int, ProviderError.Code?)])
    func codes(_ c: (Int, ProviderError.Code?)) {
        #expect(StatusTable.code(for: c.0) == c.1)
        let answer = ErrorAnswer(provider: "Box", remote: "b", call: "Box GET /x", status: c.0, headers: [:])
        #expect(answer.standard?.code == c.1)
        #expect(answer.standard?.status == (c.1 == nil ? nil : c.0))
    }

    @Test("messages: call, status, what the body said, then advice naming the provider and the remote")
    func messages() throws {
        let answer = ErrorAnswer(provider: "Box", remote: "b", call: "Box GET /x", status: 401, headers: [:], detail: ": bad_token")
        #expect(answer.standard?.message == "Box GET /x: HTTP 401: bad_token — Box refused the credentials; run `cloudsync login b`")
        let anonymous = ErrorAnswer(provider: "the server", remote: nil, call: "GET /x", status: 401, headers: [:])
        #expect(anonymous.standard?.message.contains("`cloudsync login NAME` for this remote") == true)
        let busy = ErrorAnswer(provider: "Box", remote: "b", call: "Box GET /x", status: 503, headers: ["Retry-After": "9"])
        #expect(busy.standard?.retryAfter == 9)
        #expect(busy.standard?.message.hasSuffix("Box is throttling requests; cloudsync waits 9 s (Retry-After) and retries") == true)
    }

    @Test("an HTML page where JSON was due names a network's login page; other bodies say where decoding failed")
    func htmlInsteadOfJSON() throws {
        struct Listing: Decodable { let entries: [String] }
        let url = try #require(URL(string: "https://api.box.example/2/list?access_token=secret"))
        let page = HTTPResponse(head: HTTPResponseHead(status: 200, headers: ["Content-Type": "Text/HTML; charset=utf-8"], url: url),
                                body: Data("<html><body>Log in to use this network</body></html>".utf8))
        let error = try #require(throws: ProviderError.self) { try APIClient.decode(Listing.self, from: page, what: "Box answered the list") }
        #expect(error.code == .invalidResponse && error.status == 200)
        #expect(error.message.hasPrefix("Box answered the list: https://api.box.example/2/list answered an HTML page, not the documented JSON: "))
        #expect(error.message.contains("login page") && !error.message.contains("secret"))
        let json = HTTPResponse(head: HTTPResponseHead(status: 200, headers: ["Content-Type": "application/json"], url: url),
                                body: Data(#"{"entries": 3}"#.utf8))
        let other = try #require(throws: ProviderError.self) { try APIClient.decode(Listing.self, from: json, what: "Box answered the list") }
        #expect(other.message.contains("(bad value at entries)") && !other.message.contains("login page"))
    }

    @Test("a provider's body rule keeps the status, the wait and the table's advice unless it words its own")
    func providerExtension() throws {
        let answer = ErrorAnswer(provider: "Box", remote: "b", call: "Box GET /x", status: 403, headers: ["Retry-After": "4"],
                                 detail: " rateLimitExceeded")
        let throttled = answer.error(.rateLimited)
        #expect(throttled.code == .rateLimited && throttled.status == 403 && throttled.retryAfter == 4 && throttled.isRetryable)
        #expect(throttled.message == "Box GET /x: HTTP 403 rateLimitExceeded — Box is throttling requests; cloudsync waits 4 s (Retry-After) and retries")
        let own = answer.error(.forbidden, "flagged as malware")
        #expect(own.message == "Box GET /x: HTTP 403 rateLimitExceeded — flagged as malware")
    }
}

/// A file of the tests' trees: a name, a parent and a version standing for the metadata.
struct TestTreeFile: TreeFile {
    var n: String
    var p: String?
    var rev = 1
    var itemName: String { n }
    var parentID: String? { p }
}

/// The kit's id → (name, parent) tree: paths from parent chains, whatever order items came in.
struct ItemTreeTests {
    typealias Tree = ItemTree<TestTreeFile>

    /// One step of a change feed: a folder or file (re)stated with its current name and parent, or removed.
    enum Step: Sendable, CustomTestStringConvertible {
        case folder(String, String, parent: String?)
        case file(String, String, parent: String?)
        case remove(String)
        var testDescription: String { "\(self)" }
    }

    static func apply(_ steps: [Step], to tree: inout Tree) {
        for step in steps {
            switch step {
            case .folder(let id, let name, let parent): tree.setFolder(id, name: name, parent: parent)
            case .file(let id, let name, let parent): tree.setFile(id, TestTreeFile(n: name, p: parent))
            case .remove(let id): tree.remove(id)
            }
        }
    }

    static func filePaths(_ steps: [Step]) -> [String: String] {
        var tree = Tree(rootID: "R")
        apply(steps, to: &tree)
        return tree.paths().files.mapValues { $0.joined(separator: "/") }
    }

    @Test("paths from parent chains", arguments: [
        ("children before their parents", [Step.file("f", "a.mp3", parent: "B"), .folder("B", "Beta", parent: "A"),
                                           .folder("A", "Alpha", parent: "R")], ["f": "Alpha/Beta/a.mp3"]),
        ("a renamed folder renames every path below it", [.folder("A", "Alpha", parent: "R"), .file("f", "a.mp3", parent: "A"),
                                                          .folder("A", "Renamed", parent: "R")], ["f": "Renamed/a.mp3"]),
        ("a moved folder moves its subtree", [.folder("A", "A", parent: "R"), .folder("B", "B", parent: "R"), .folder("C", "C", parent: "A"),
                                              .file("f", "f.mp3", parent: "C"), .folder("C", "C", parent: "B")], ["f": "B/C/f.mp3"]),
        ("a deleted folder takes its subtree out", [.folder("A", "A", parent: "R"), .folder("B", "B", parent: "A"),
                                                    .file("f", "f.mp3", parent: "B"), .file("g", "g.mp3", parent: "R"), .remove("A")], ["g": "g.mp3"]),
        ("a parent cycle and an unknown parent are unreachable", [.folder("A", "A", parent: "B"), .folder("B", "B", parent: "A"),
                                                                 .file("f", "f.mp3", parent: "A"), .file("g", "g.mp3", parent: "nowhere"),
                                                                 .file("h", "h.mp3", parent: nil), .file("i", "i.mp3", parent: "R")], ["i": "i.mp3"]),
        ("a folder that became a file loses its children", [.folder("A", "A", parent: "R"), .file("f", "f.mp3", parent: "A"),
                                                           .file("A", "A.mp3", parent: "R")], ["A": "A.mp3"]),
        ("the root's own entry is no child", [.folder("R", "Music", parent: "X"), .file("f", "f.mp3", parent: "R")], ["f": "f.mp3"]),
    ] as [(String, [Step], [String: String])])
    func paths(_ c: (String, [Step], [String: String])) {
        #expect(Self.filePaths(c.1) == c.2, "\(c.0)")
    }

    @Test("no root, nothing reachable; distinct naming keeps one name per folder")
    func rootAndNaming() {
        var tree = Tree()
        Self.apply([.folder("A", "A", parent: "R"), .file("f", "a.mp3", parent: "A")], to: &tree)
        #expect(tree.paths().files.isEmpty && tree.pruned().folders.isEmpty)
        tree.rootID = "R"
        Self.apply([.file("g", "a.mp3", parent: "A"), .file("h", "x/y", parent: "R")], to: &tree)
        #expect(tree.paths().files == ["f": ["A", "a.mp3"], "g": ["A", "a.mp3"], "h": ["x/y"]])
        #expect(tree.paths(naming: .distinct).files == ["f": ["A", "a.mp3"], "g": ["A", "a (g).mp3"], "h": ["x／y"]])
    }

    @Test("a folder chain deeper than maxDepth is cut there")
    func depth() {
        var tree = Tree(rootID: "R")
        var parent = "R"
        for level in 0...Tree.maxDepth {
            tree.setFolder("d\(level)", name: "d", parent: parent)
            parent = "d\(level)"
        }
        tree.setFile("deep", TestTreeFile(n: "x.mp3", p: parent))
        tree.setFile("ok", TestTreeFile(n: "x.mp3", p: "d\(Tree.maxDepth - 1)"))
        #expect(tree.paths().files.keys.sorted() == ["ok"])
    }

    /// The reference: each item's path found by walking its parent chain up, a cycle or an unknown parent
    /// making it unreachable.
    static func reference(_ tree: Tree) -> [String: [String]] {
        func folderPath(_ id: String, _ seen: Set<String>) -> [String]? {
            if id == tree.rootID { return [] }
            guard !seen.contains(id), let folder = tree.folders[id], let parent = folder.parent,
                  let base = folderPath(parent, seen.union([id])) else { return nil }
            return base + [folder.name]
        }
        var out: [String: [String]] = [:]
        for (id, file) in tree.files {
            if let parent = file.p, let base = folderPath(parent, []) { out[id] = base + [file.n] }
        }
        return out
    }

    @Test("seeded: random moves, renames, deletes and out-of-order parents agree with walking parent chains")
    func property() {
        let s = seed("ItemTreeTests.property")
        var rng = SeededRandom(seed: s)
        for round in 0..<200 {
            var tree = Tree(rootID: "R")
            var before = tree
            let folderIDs = (0..<8).map { "F\($0)" }
            let fileIDs = (0..<12).map { "f\($0)" }
            for _ in 0..<Int.random(in: 5...60, using: &rng) {
                let parent = Bool.random(using: &rng) ? "R" : (folderIDs + ["gone"]).randomElement(using: &rng)
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<4: tree.setFolder(folderIDs.randomElement(using: &rng) ?? "F0", name: "d\(Int.random(in: 0..<3, using: &rng))", parent: parent)
                case 4..<8: tree.setFile(fileIDs.randomElement(using: &rng) ?? "f0",
                                         TestTreeFile(n: "s\(Int.random(in: 0..<3, using: &rng)).mp3", p: parent, rev: Int.random(in: 0..<3, using: &rng)))
                default: tree.remove((folderIDs + fileIDs).randomElement(using: &rng) ?? "F0")
                }
                if Int.random(in: 0..<5, using: &rng) == 0 { before = tree }
            }
            let paths = tree.paths()
            #expect(paths.files == Self.reference(tree), "seed \(s) round \(round)")
            let pruned = tree.pruned()
            #expect(pruned.paths().files == paths.files && pruned.paths().folders == paths.folders, "seed \(s) round \(round)")
            #expect(Set(pruned.folders.keys) == Set(paths.folders.keys).subtracting(["R"]), "seed \(s) round \(round)")
            // The change feed from `before` to `tree` turns the old listing into the new one.
            func listing(_ t: Tree) -> [String: RemoteFile] {
                var out: [String: RemoteFile] = [:]
                for (id, segments) in t.paths(naming: .distinct).files {
                    out[id] = RemoteFile(path: segments.joined(separator: "/"), providerID: id, size: Int64(t.files[id]?.rev ?? 0),
                                         modified: Date(timeIntervalSince1970: 0))
                }
                return out
            }
            let (old, new) = (listing(before), listing(tree))
            let changes = TreeChanges(from: old, to: new)
            var replayed = old
            for id in changes.removedIDs { replayed[id] = nil }
            for file in changes.upserts { replayed[file.providerID ?? ""] = file }
            #expect(replayed == new, "seed \(s) round \(round)")
            let newPaths = Set(new.values.map(\.path))
            #expect(changes.vacatedPaths.allSatisfy { !newPaths.contains($0) }, "seed \(s) round \(round)")
            #expect(Set(changes.vacatedPaths) == Set(old.values.map(\.path)).subtracting(newPaths), "seed \(s) round \(round)")
        }
    }
}

/// The one spelling of a versioned cursor.
struct CursorEnvelopeTests {
    struct Payload: Codable, Equatable {
        var root: String
        var token: String
    }

    @Test("sealed cursors open again; the version sits beside the payload's keys")
    func roundTrip() throws {
        let text = try CursorEnvelope.seal(Payload(root: "/m", token: "a/b"), version: 3)
        #expect(text == #"{"root":"/m","token":"a/b","v":3}"#)
        #expect(try CursorEnvelope.open(Payload.self, from: text, version: 3).get() == Payload(root: "/m", token: "a/b"))
    }

    @Test("other versions and foreign text are refused, which means a full listing", arguments: [
        (#"{"root":"/m","token":"t","v":2}"#, CursorEnvelope.Refusal.version(found: 2, reads: 3)),
        (#"{"root":"/m","token":"t","v":4}"#, .version(found: 4, reads: 3)),
        (#"{"version":2,"root":"/m","token":"t"}"#, .unreadable),
        (#"{"root":"/m","v":3}"#, .unreadable),
        ("AAE-a-plain-token", .unreadable),
        ("", .unreadable),
        (#"{"v":"3"}"#, .unreadable),
    ])
    func refusals(_ c: (String, CursorEnvelope.Refusal)) {
        let opened = CursorEnvelope.open(Payload.self, from: c.0, version: 3)
        #expect(throws: c.1) { try opened.get() }
        #expect(c.1.description.hasSuffix("listing everything again"))
    }
}
