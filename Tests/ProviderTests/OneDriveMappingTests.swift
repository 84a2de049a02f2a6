import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Testing
@testable import OneDrive

private func response(_ status: Int, _ body: String, headers: HTTPHeaders = [:],
                      url: String = "https://graph.microsoft.com/v1.0/me/drive/items/X") -> HTTPResponse {
    HTTPResponse(head: HTTPResponseHead(status: status, headers: headers, url: URL(string: url)!), body: Data(body.utf8))
}

private func graphError(_ code: String, inner: String = "innerError") -> String {
    #"{"error":{"code":"\#(code)","message":"m","\#(inner)":{"code":"inner-\#(code)","request-id":"r"}}}"#
}

struct OneDriveMappingTests {
    struct Case: Sendable, CustomStringConvertible {
        var status: Int
        var body: String
        var headers: [String: String] = [:]
        var url = "https://graph.microsoft.com/v1.0/me/drive/items/X"
        var code: ProviderError.Code
        var retryAfter: TimeInterval?
        var description: String { "\(status) \(body.prefix(40)) → \(code)" }
    }

    static let cases: [Case] = [
        Case(status: 401, body: graphError("InvalidAuthenticationToken"), code: .tokenExpired),
        Case(status: 401, body: "", headers: ["WWW-Authenticate": #"Bearer realm="OneDriveAPI", error="expired_token""#], code: .tokenExpired),
        Case(status: 401, body: graphError("unauthenticated"), code: .unauthorized),
        Case(status: 403, body: graphError("accessDenied"), code: .forbidden),
        Case(status: 404, body: graphError("itemNotFound"), code: .notFound),
        Case(status: 410, body: graphError("resyncRequired"), url: "https://graph.microsoft.com/v1.0/me/drive/root/delta?token=1", code: .cursorReset),
        Case(status: 410, body: graphError("resyncChangesApplyDifferences", inner: "innererror"), code: .cursorReset),
        Case(status: 410, body: graphError("gone"), code: .notFound),
        Case(status: 429, body: graphError("activityLimitReached"), headers: ["Retry-After": "7"], code: .rateLimited, retryAfter: 7),
        Case(status: 503, body: graphError("serviceNotAvailable"), headers: ["Retry-After": "3"], code: .rateLimited, retryAfter: 3),
        Case(status: 503, body: "", code: .rateLimited),
        Case(status: 500, body: graphError("generalException"), code: .transient),
        Case(status: 504, body: "", code: .transient),
        Case(status: 509, body: "", code: .transient),
        Case(status: 507, body: graphError("quotaLimitReached"), code: .quotaExceeded),
        Case(status: 400, body: graphError("invalidRequest"), code: .invalidResponse),
        Case(status: 416, body: "", code: .invalidResponse),
    ]

    @Test("Graph statuses and error codes map to ProviderError codes", arguments: cases)
    func mapping(_ c: Case) throws {
        let error = try #require(GraphAPI.classify(response(c.status, c.body, headers: HTTPHeaders(c.headers.map { ($0.key, $0.value) }), url: c.url), remoteName: "od"))
        #expect(error.code == c.code)
        #expect(error.status == c.status)
        #expect(error.retryAfter == c.retryAfter)
        #expect(error.message.contains("od"))
    }

    @Test("2xx is success; 410 on the delta feed carries the Location of a fresh enumeration")
    func successAndResync() throws {
        #expect(GraphAPI.classify(response(200, "{}"), remoteName: "od") == nil)
        let error = try #require(GraphAPI.classify(response(410, graphError("resyncRequired"), headers: ["Location": "/v1.0/me/drive/root/delta?x=1"],
                                                            url: "https://graph.microsoft.com/v1.0/me/drive/root/delta(token='a')"), remoteName: "od"))
        #expect(error.code == .cursorReset)
        #expect((error.cause as? GraphAPI.ResyncRequired)?.location?.absoluteString == "https://graph.microsoft.com/v1.0/me/drive/root/delta?x=1")
    }

    @Test("error messages never carry the query or the delta token")
    func noSecretsInMessages() throws {
        let error = try #require(GraphAPI.classify(response(404, graphError("itemNotFound"),
                                                            url: "https://graph.microsoft.com/v1.0/me/drive/root/delta(token='SECRET')?tempauth=SECRET2"), remoteName: "od"))
        #expect(!error.message.contains("SECRET"))
    }

    @Test("Graph error bodies decode with innerError or innererror, and OAuth-style string errors")
    func errorBodies() {
        #expect(GraphAPI.ErrorBody(Data(graphError("a", inner: "innererror").utf8))?.innerCode == "inner-a")
        #expect(GraphAPI.ErrorBody(Data(graphError("a", inner: "InnerError").utf8))?.codes == ["a", "inner-a"])
        #expect(GraphAPI.ErrorBody(Data(#"{"error":"invalid_grant","error_description":"d"}"#.utf8))?.code == "invalid_grant")
        #expect(GraphAPI.ErrorBody(Data("<html>".utf8)) == nil)
    }
}

struct OneDriveTreeTests {
    private func item(_ json: String) throws -> GraphAPI.Item {
        try JSONDecoder().decode(GraphAPI.Item.self, from: Data(json.utf8))
    }

    private func apply(_ items: [String], to tree: inout OneDriveTree) throws {
        for json in items { tree.apply(try item(json), audio: AudioFilter()) { _, _ in } }
    }

    @Test("the last mention of an id wins; parents give paths; the root matches case-insensitively")
    func lastWins() throws {
        var tree = OneDriveTree()
        try apply([
            #"{"id":"R","name":"root","root":{},"folder":{}}"#,
            #"{"id":"M","name":"Music","folder":{},"parentReference":{"id":"R"}}"#,
            #"{"id":"f","name":"a.mp3","size":1,"file":{},"parentReference":{"id":"M"}}"#,
            #"{"id":"f","name":"b.mp3","size":2,"file":{"hashes":{"quickXorHash":"Q=","sha1Hash":"ABCD"}},"parentReference":{"id":"M"}}"#,
        ], to: &tree)
        let (files, found) = tree.resolvedFiles(under: ["MUSIC"])
        #expect(found)
        #expect(files.values.map(\.path) == ["b.mp3"])
        #expect(files["f"]?.hashes == [ContentHash(kind: .quickXor, value: "Q="), ContentHash(kind: .sha1, value: "abcd")])
    }

    @Test("a parent cycle or an unknown parent makes files unreachable instead of looping")
    func cycles() throws {
        var tree = OneDriveTree()
        try apply([
            #"{"id":"R","name":"root","root":{}}"#,
            #"{"id":"A","name":"A","folder":{},"parentReference":{"id":"B"}}"#,
            #"{"id":"B","name":"B","folder":{},"parentReference":{"id":"A"}}"#,
            #"{"id":"f","name":"a.mp3","size":1,"file":{},"parentReference":{"id":"A"}}"#,
            #"{"id":"g","name":"g.mp3","size":1,"file":{},"parentReference":{"id":"nowhere"}}"#,
            #"{"id":"h","name":"h.mp3","size":1,"file":{},"parentReference":{"id":"R"}}"#,
        ], to: &tree)
        #expect(tree.resolvedFiles(under: []).files.values.map(\.path) == ["h.mp3"])
        #expect(tree.pruned().files.keys.sorted() == ["h"])
        #expect(tree.pruned().folders.isEmpty)
    }

    @Test("shared files download from their own drive; shared folders and packages are skipped")
    func sharedItems() throws {
        var tree = OneDriveTree()
        try apply([
            #"{"id":"R","name":"root","root":{}}"#,
            #"{"id":"s","name":"shared.mp3","parentReference":{"id":"R"},"remoteItem":{"id":"X!1","size":5,"file":{},"parentReference":{"driveId":"d1"}}}"#,
            #"{"id":"sf","name":"Shared Folder","parentReference":{"id":"R"},"remoteItem":{"id":"X!2","folder":{}}}"#,
            #"{"id":"p","name":"Book.mp3","size":3,"package":{"type":"oneNote"},"parentReference":{"id":"R"}}"#,
        ], to: &tree)
        let files = tree.resolvedFiles(under: []).files
        #expect(files.keys.sorted() == ["s"])
        #expect(files["s"]?.downloadHint == "drives/d1/items/X!1")
        #expect(files["s"]?.size == 5)
        #expect(tree.folders.isEmpty)
    }

    @Test("a cursor as cloudsync stored it before the kit's envelope still opens, with its tree")
    func oldCursor() throws {
        let text = #"{"v":1,"root":"music","audio":"flac,mp3","deltaLink":"https:\/\/graph.microsoft.com\/v1.0\/me\/drive\/root\/delta?token=abc","tree":{"rootID":"R","folders":{"M":{"n":"Music","p":"R"},"A":{"n":"Album"}},"files":{"f":{"n":"a.mp3","p":"M","s":5,"m":0,"r":"q","h":[{"kind":"quickxor","value":"q"}],"t":"audio\/mpeg"}}}}"#
        let state = try OneDriveCursor.open(text).get()
        #expect(state.deltaLink == "https://graph.microsoft.com/v1.0/me/drive/root/delta?token=abc")
        #expect(state.tree.folders["A"] == OneDriveTree.Folder(name: "Album", parent: nil))
        let (files, found) = state.tree.resolvedFiles(under: ["Music"])
        #expect(found && files["f"]?.path == "a.mp3" && files["f"]?.size == 5 && files["f"]?.mimeType == "audio/mpeg")
        #expect(try OneDriveCursor.open(try state.sealed()).get().tree == state.tree)
        #expect(throws: CursorEnvelope.Refusal.version(found: 2, reads: 1)) { try OneDriveCursor.open(#"{"v":2}"#).get() }
    }

    @Test("a moved file leaves a deletion unless another file now holds its old path")
    func changes() {
        func f(_ id: String, _ path: String) -> RemoteFile { RemoteFile(path: path, providerID: id, size: 1, modified: Date(timeIntervalSince1970: 0)) }
        let old = ["1": f("1", "a.mp3"), "2": f("2", "b.mp3"), "3": f("3", "c.mp3")]
        let new = ["1": f("1", "x/a.mp3"), "2": f("2", "b.mp3"), "4": f("4", "c.mp3")]
        let (upserts, deletions) = oneDriveChanges(from: old, to: new)
        #expect(upserts.map(\.path) == ["c.mp3", "x/a.mp3"])
        #expect(deletions == [.path("a.mp3")])
    }
}
