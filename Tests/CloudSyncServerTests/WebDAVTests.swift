#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncCore
import CloudSyncServer
import CloudSyncXML
import Foundation
import Testing
import TestSupport

/// One `<D:response>` of a 207 answer, as a client reads it.
struct DAVEntry {
    var href: String
    /// `{namespace}name` → text, for properties in a propstat whose status is exactly `HTTP/1.1 200 OK`.
    var found: [String: String] = [:]
    /// `{namespace}name` of properties in other propstats, with their status line.
    var other: [String: String] = [:]
    var isCollection: Bool { found["{DAV:}resourcetype"]?.contains("collection") == true }
}

/// Parses a multistatus document with libxml2 (well-formedness is checked on the way).
final class MultistatusReader: XMLEventHandler {
    var entries: [DAVEntry] = []
    private var current: DAVEntry?
    private var stack: [String] = []
    private var text = ""
    private var props: [(String, String)] = []
    private var inProp = false

    static func parse(_ data: Data) throws -> [DAVEntry] {
        let reader = MultistatusReader()
        let parser = try XMLPushParser(handler: reader)
        try parser.feed(data)
        try parser.finish()
        return reader.entries
    }

    func startElement(namespace: String, name: String, attributes: [XMLAttribute]) throws {
        let key = "{\(namespace)}\(name)"
        if key == "{DAV:}response" { current = DAVEntry(href: "") }
        if key == "{DAV:}propstat" { props = [] }
        if inProp, stack.last == "{DAV:}prop" { props.append((key, "")) }
        if inProp, stack.last == "{DAV:}resourcetype", let last = props.indices.last { props[last].1 += name }
        if key == "{DAV:}prop" { inProp = true }
        stack.append(key)
        text = ""
    }

    func endElement(namespace: String, name: String) throws {
        let key = stack.removeLast()
        switch key {
        case "{DAV:}href": current?.href = text
        case "{DAV:}prop": inProp = false
        case "{DAV:}status":
            for (prop, value) in props {
                if text == "HTTP/1.1 200 OK" { current?.found[prop] = value } else { current?.other[prop] = text }
            }
        case "{DAV:}response":
            if let current { entries.append(current) }
            current = nil
        default:
            if inProp, stack.last == "{DAV:}prop", let last = props.indices.last, props[last].0 == key, props[last].1.isEmpty {
                props[last].1 = text
            }
        }
        text = ""
    }

    func characters(_ utf8: UnsafeRawBufferPointer) throws {
        text += String(decoding: utf8, as: UTF8.self)
    }
}

/// Decodes `%XX` escapes of an href path.
func percentDecoded(_ text: String) -> String? { text.removingPercentEncoding }

@Suite(.serialized) struct WebDAVTests {
    static let names = [
        "Кино/Группа крови/01 - Группа крови.mp3",
        "東京事変/教育/01 丸の内サディスティック.flac",
        "Emoji 🎵/🎧 mix ✨.ogg",
        "Spaces and [brackets]/a & b % c + d # e.mp3",
        "Quotes/it's \"quoted\" <x>.opus",
        "Deep/er/and/deeper/track 100%.m4a",
        "plain.mp3",
    ]

    static func fixture() throws -> Fixture {
        var files: [String: Data] = [:]
        for (i, name) in names.enumerated() { files[name] = sourceBytes(1000 + i * 100, seed: UInt64(i + 1)) }
        return try Fixture(files: files)
    }

    static func propfind(_ port: Int, _ target: String, depth: String?, body: String = "") throws -> RawClient.Response {
        let client = try RawClient(port: port)
        var head = "PROPFIND \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if let depth { head += "Depth: \(depth)\r\n" }
        if !body.isEmpty { head += "Content-Type: application/xml\r\nContent-Length: \(body.utf8.count)\r\n" }
        client.send(head + "\r\n" + body)
        return try client.readResponse()
    }

    static let mpdBody = #"<a:propfind xmlns:a="DAV:"><a:prop><a:resourcetype/><a:getcontenttype/><a:getcontentlength/><a:getlastmodified/></a:prop></a:propfind>"#

    @Test func optionsAndTheRemotesAtTheTop() async throws {
        let f = try Self.fixture()
        let port = f.server.port
        let (options, root0, root1) = try await offPool {
            (try RawClient(port: port).get("/dav/", method: "OPTIONS"),
             try Self.propfind(port, "/dav/", depth: "0"), try Self.propfind(port, "/dav/", depth: "1", body: Self.mpdBody))
        }
        #expect(options.status == 200)
        #expect(options.headers["dav"] == "1")
        #expect(options.headers["allow"]?.contains("PROPFIND") == true)
        #expect(root0.status == 207)
        #expect(root0.headers["content-type"]?.hasPrefix("application/xml") == true)
        let zero = try MultistatusReader.parse(root0.body)
        #expect(zero.map(\.href) == ["/dav/"])
        #expect(zero.first?.isCollection == true)
        let one = try MultistatusReader.parse(root1.body)
        #expect(one.map(\.href) == ["/dav/", "/dav/music/"])
        #expect(one.last?.isCollection == true)
        #expect(one.last?.other["{DAV:}getcontentlength"] == "HTTP/1.1 404 Not Found", "a folder has no length: \(one)")
    }

    /// Every name (spaces, `#`, `%`, `[ ]`, quotes, Cyrillic, CJK, emoji) comes back from its href, sizes right.
    @Test func hrefsRoundTripHostileNames() async throws {
        let f = try Self.fixture()
        let port = f.server.port
        var seen: [String: Int64] = [:]
        var folders: [String] = [""]
        var requests = 0
        while let folder = folders.popLast() {
            let target = "/dav/music/" + (folder.isEmpty ? "" : PercentEncoding.encode(folder, .path) + "/")
            let response = try await offPool { try Self.propfind(port, target, depth: "1", body: Self.mpdBody) }
            requests += 1
            #expect(response.status == 207)
            let entries = try MultistatusReader.parse(response.body)
            #expect(entries.first?.href == target, "the folder itself first")
            for entry in entries.dropFirst() {
                #expect(entry.href.utf8.allSatisfy { $0 < 0x80 && $0 != 0x20 && $0 != UInt8(ascii: "#") }, "raw characters in \(entry.href)")
                let decoded = try #require(percentDecoded(entry.href))
                #expect(decoded.hasPrefix("/dav/music/"))
                let path = String(decoded.dropFirst("/dav/music/".count))
                if entry.isCollection {
                    #expect(path.hasSuffix("/"))
                    folders.append(String(path.dropLast()))
                } else {
                    seen[path] = Int64(entry.found["{DAV:}getcontentlength"] ?? "")
                    #expect(entry.found["{DAV:}getlastmodified"] == "Tue, 14 Nov 2023 22:13:20 GMT")
                    #expect(entry.found["{DAV:}getcontenttype"]?.contains("/") == true)
                }
            }
        }
        #expect(Set(seen.keys) == Set(Self.names), "\(seen.keys.sorted())")
        for (path, size) in seen { #expect(size == Int64(f.contents[path]?.count ?? -1), "\(path)") }
        #expect(requests == 12)
    }

    @Test func depthPropAllpropPropnameAndErrors() async throws {
        let f = try Self.fixture()
        let port = f.server.port
        let file = "/dav/music/" + PercentEncoding.encode("Spaces and [brackets]/a & b % c + d # e.mp3", .path)
        let c = Checks()
        try await offPool {
            for depth in ["infinity", nil] {
                let r = try Self.propfind(port, "/dav/music/", depth: depth)
                c.expect(r.status == 403, "Depth \(depth ?? "absent"): \(r.status)")
                c.expect(String(decoding: r.body, as: UTF8.self).contains("propfind-finite-depth"))
            }
            c.expect(try Self.propfind(port, "/dav/music/", depth: "2").status == 400)
            // allprop (no body): every live property of a file.
            let all = try MultistatusReader.parse(Self.propfind(port, file, depth: "0").body)
            c.expect(all.count == 1)
            let props = Set(all.first?.found.keys.map { $0 } ?? [])
            c.expect(props == ["{DAV:}resourcetype", "{DAV:}displayname", "{DAV:}getcontentlength", "{DAV:}getlastmodified",
                               "{DAV:}getcontenttype", "{DAV:}getetag", "{DAV:}creationdate"], "\(props)")
            c.expect(all.first?.found["{DAV:}displayname"] == "a & b % c + d # e.mp3")
            c.expect(all.first?.found["{DAV:}creationdate"] == "2023-11-14T22:13:20Z")
            let explicitAll = try MultistatusReader.parse(Self.propfind(port, file, depth: "0",
                body: #"<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>"#).body)
            c.expect(explicitAll.first?.found.count == 7)
            // A prop list with unknown and foreign properties (davfs2, Apache's executable): those in a 404 propstat.
            let davfs = #"<D:propfind xmlns:D="DAV:" xmlns:A="http://apache.org/dav/props/"><D:prop><D:getetag/><A:executable/><D:quota-available-bytes/></D:prop></D:propfind>"#
            let listed = try MultistatusReader.parse(Self.propfind(port, file, depth: "0", body: davfs).body)
            c.expect(listed.first?.found.keys.sorted() == ["{DAV:}getetag"], "\(listed)")
            c.expect(listed.first?.other["{http://apache.org/dav/props/}executable"] == "HTTP/1.1 404 Not Found")
            c.expect(listed.first?.other["{DAV:}quota-available-bytes"] == "HTTP/1.1 404 Not Found")
            // propname: names only.
            let names = try Self.propfind(port, file, depth: "0", body: #"<propfind xmlns="DAV:"><propname/></propfind>"#)
            let named = try MultistatusReader.parse(names.body)
            c.expect(named.first?.found.count == 7)
            c.expect(named.first?.found["{DAV:}getcontentlength"] == "")
            // Not XML, not a propfind, a DTD: 400.
            for body in ["<propfind", "<foo xmlns=\"DAV:\"/>", "<!DOCTYPE x [<!ENTITY a \"b\">]><propfind xmlns=\"DAV:\"/>"] {
                c.expect(try Self.propfind(port, file, depth: "0", body: body).status == 400, body)
            }
            c.expect(try Self.propfind(port, "/dav/music/nope/", depth: "1").status == 404)
            c.expect(try Self.propfind(port, "/dav/music/%zz/", depth: "1").status == 400)
            c.expect(try Self.propfind(port, "/dav/music/../../etc/", depth: "1").status == 404)
            // A body over the limit: 413, the connection closes.
            let big = try RawClient(port: port)
            big.send("PROPFIND /dav/ HTTP/1.1\r\nHost: 127.0.0.1\r\nDepth: 0\r\nContent-Length: 100000\r\n\r\n")
            c.expect(try big.readResponse().status == 413)
            // Expect: 100-continue is answered before the body is sent.
            let polite = try RawClient(port: port)
            polite.send("PROPFIND /dav/ HTTP/1.1\r\nHost: 127.0.0.1\r\nDepth: 0\r\nExpect: 100-continue\r\nContent-Length: \(Self.mpdBody.utf8.count)\r\n\r\n")
            c.expect(try polite.readResponse(bodyless: true).status == 100)
            polite.send(Self.mpdBody)
            c.expect(try polite.readResponse().status == 207)
        }
        #expect(c.all.isEmpty, "\(c.all)")
    }

    /// GET and HEAD with Range as on /tracks/; every method that writes is refused and changes nothing.
    @Test func readsWorkAndWritesAreRefused() async throws {
        let f = try Self.fixture()
        try await f.cacheCompletely("plain.mp3")
        try await f.cacheCompletely("Emoji 🎵/🎧 mix ✨.ogg")
        let port = f.server.port
        let before = try f.cache.entries()
        let c = Checks()
        try await offPool {
            let range = try RawClient(port: port).get("/dav/music/plain.mp3", headers: ["Range: bytes=10-19"])
            c.expect(range.status == 206)
            c.expect(range.body == f.contents["plain.mp3"]?.subdata(in: 10 ..< 20))
            let whole = try RawClient(port: port).get("/dav/music/" + PercentEncoding.encode("Emoji 🎵/🎧 mix ✨.ogg", .path))
            c.expect(whole.status == 200)
            c.expect(whole.body == f.contents["Emoji 🎵/🎧 mix ✨.ogg"])
            c.expect(try RawClient(port: port).get("/dav/music/Quotes/.mpdignore").status == 404)
            c.expect(try RawClient(port: port).get("/dav/music/plain.mp3", method: "HEAD").headers["content-length"] == "1600")
            for method in ["PUT", "DELETE", "MKCOL", "COPY", "MOVE", "PROPPATCH", "LOCK", "UNLOCK", "POST"] {
                let client = try RawClient(port: port)
                client.send("\(method) /dav/music/plain.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\nDestination: http://127.0.0.1:\(port)/dav/music/x.mp3\r\n"
                    + "Content-Length: 4\r\n\r\nabcd")
                let r = try client.readResponse()
                c.expect(r.status == 405, "\(method): \(r.status)")
                c.expect(r.headers["allow"] == "OPTIONS, GET, HEAD, PROPFIND")
            }
            let after = try RawClient(port: port).get("/dav/music/plain.mp3")
            c.expect(after.body == f.contents["plain.mp3"])
        }
        #expect(c.all.isEmpty, "\(c.all)")
        #expect(try f.cache.entries().map(\.path) == before.map(\.path))
        #expect(try f.cache.entry(remote: "music", path: "plain.mp3")?.state == .complete)
    }

    /// 20,000 tracks in one folder: a Depth 1 listing is read by index ranges; its time is printed.
    @Test func aFolderOfTwentyThousandTracks() async throws {
        let f = try Fixture(files: [:])
        let count = 20_000
        var files: [RemoteFile] = []
        for i in 0 ..< count {
            files.append(RemoteFile(path: "Big/Track \(String(format: "%05d", i)).flac", size: Int64(1000 + i),
                                    modified: Date(timeIntervalSince1970: 1_700_000_000), revision: "r\(i)"))
        }
        files.append(RemoteFile(path: "Big/Sub/one.mp3", size: 1, modified: Date(timeIntervalSince1970: 1_700_000_500), revision: "s"))
        for chunk in stride(from: 0, to: files.count, by: 2000) {
            _ = try f.cache.upsert(remote: "music", files: files[chunk ..< min(files.count, chunk + 2000)])
        }
        let port = f.server.port
        _ = try await offPool { try Self.propfind(port, "/dav/music/Big/", depth: "1", body: Self.mpdBody) }  // warm up
        let (response, seconds) = try await offPool { try timed { try Self.propfind(port, "/dav/music/Big/", depth: "1", body: Self.mpdBody) } }
        #expect(response.status == 207)
        let entries = try MultistatusReader.parse(response.body)
        #expect(entries.count == count + 2)
        #expect(entries[1].href == "/dav/music/Big/Sub/" && entries[1].isCollection)
        #expect(entries.last?.found["{DAV:}getcontentlength"] == String(1000 + count - 1))
        let (root, rootSeconds) = try await offPool { try timed { try Self.propfind(port, "/dav/music/", depth: "1") } }
        #expect(try MultistatusReader.parse(root.body).map(\.href) == ["/dav/music/", "/dav/music/Big/"])
        let served = f.logLines.withLock { $0 }.last { $0.contains("PROPFIND /dav/music/Big/ 207") } ?? ""
        print("webdav: PROPFIND Depth 1 of a folder of \(count) tracks: \(String(format: "%.0f", seconds * 1000)) ms at the client, "
            + "\(response.body.count / 1024) KiB (serve's log: \(served.split(separator: " ").suffix(2).joined(separator: " "))); "
            + "the remote's root above it: \(String(format: "%.1f", rootSeconds * 1000)) ms")
    }
}
