import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Testing
@testable import Dropbox

@Suite("Dropbox: header-safe JSON, error mapping, cursor, paths")
struct DropboxUnitTests {
    @Test("Dropbox-API-Arg strings are pure printable ASCII with \\uXXXX escapes", arguments: [
        ("/Music/a.mp3", #""/Music/a.mp3""#),
        ("some_üñîcødé_and_\u{7f}", #""some_\u00fc\u00f1\u00eec\u00f8d\u00e9_and_\u007f""#),  // the docs' example
        ("/Кино/Группа крови.mp3", #""/\u041a\u0438\u043d\u043e/\u0413\u0440\u0443\u043f\u043f\u0430 \u043a\u0440\u043e\u0432\u0438.mp3""#),
        ("/東京/曲.flac", #""/\u6771\u4eac/\u66f2.flac""#),
        ("🎵.opus", #""\ud83c\udfb5.opus""#),
        ("a\"b\\c", #""a\"b\\c""#),
        ("tab\tnl\n", #""tab\u0009nl\u000a""#),
        ("e\u{301}", #""e\u0301""#),
        ("rev:a1c10ce0dd78", #""rev:a1c10ce0dd78""#),
    ])
    func headerSafeJSON(input: String, expected: String) throws {
        let encoded = DropboxAPI.headerSafeJSONString(input)
        #expect(encoded == expected)
        #expect(encoded.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F })
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(encoded)]".utf8)) as? [String]
        #expect(decoded == [input])
    }

    @Test("pathArg is a JSON object with one path field")
    func pathArg() throws {
        let arg = DropboxAPI.pathArg("/Ä.mp3")
        #expect(arg == #"{"path":"/\u00c4.mp3"}"#)
        let json = try JSONSerialization.jsonObject(with: Data(arg.utf8)) as? [String: String]
        #expect(json == ["path": "/Ä.mp3"])
    }

    struct ErrorCase: Sendable, CustomTestStringConvertible {
        var status: Int
        var body: String
        var retryAfterHeader: String?
        var code: ProviderError.Code?
        var retryAfter: TimeInterval?
        var testDescription: String { "\(status) \(body.prefix(50))" }
    }

    @Test("statuses and error bodies map to codes", arguments: [
        ErrorCase(status: 200, body: "{}", code: nil),
        ErrorCase(status: 400, body: #"Error in call to API function "files/list_folder": request body: path: bad"#, code: .invalidResponse),
        ErrorCase(status: 401, body: #"{"error_summary": "expired_access_token/..", "error": {".tag": "expired_access_token"}}"#, code: .tokenExpired),
        ErrorCase(status: 401, body: #"{"error_summary": "invalid_access_token/...", "error": {".tag": "invalid_access_token"}}"#, code: .unauthorized),
        ErrorCase(status: 401, body: #"{"error_summary": "missing_scope/..", "error": {".tag": "missing_scope", "required_scope": "files.content.read"}}"#, code: .unauthorized),
        ErrorCase(status: 401, body: "not json", code: .unauthorized),
        ErrorCase(status: 403, body: #"{"error_summary": "invalid_account_type/..", "error": {".tag": "invalid_account_type"}}"#, code: .forbidden),
        ErrorCase(status: 409, body: #"{"error_summary": "reset/..", "error": {".tag": "reset"}}"#, code: .cursorReset),
        ErrorCase(status: 409, body: #"{"error_summary": "path/not_found/..", "error": {".tag": "path", "path": {".tag": "not_found"}}}"#, code: .notFound),
        ErrorCase(status: 409, body: #"{"error_summary": "path/not_file/.", "error": {".tag": "path", "path": {".tag": "not_file"}}}"#, code: .notFound),
        ErrorCase(status: 409, body: #"{"error_summary": "path/restricted_content/", "error": {".tag": "path", "path": {".tag": "restricted_content"}}}"#, code: .forbidden),
        ErrorCase(status: 409, body: #"{"error_summary": "unsupported_file/..", "error": {".tag": "unsupported_file"}}"#, code: .forbidden),
        ErrorCase(status: 409, body: #"{"error_summary": "path/not_folder/..", "error": {".tag": "path", "path": {".tag": "not_folder"}}}"#, code: .configuration),
        ErrorCase(status: 409, body: #"{"error_summary": "path/malformed_path/..", "error": {".tag": "path", "path": {".tag": "malformed_path"}}}"#, code: .configuration),
        ErrorCase(status: 409, body: #"{"error_summary": "other/..", "error": {".tag": "other"}}"#, code: .invalidResponse),
        ErrorCase(status: 429, body: #"{"error_summary": "too_many_requests/..", "error": {"reason": {".tag": "too_many_requests"}, "retry_after": 300}}"#, code: .rateLimited, retryAfter: 300),
        ErrorCase(status: 429, body: #"{"error_summary": "too_many_requests/..", "error": {"reason": {".tag": "too_many_requests"}, "retry_after": 300}}"#, retryAfterHeader: "7", code: .rateLimited, retryAfter: 7),
        ErrorCase(status: 429, body: "Too many requests", retryAfterHeader: "2", code: .rateLimited, retryAfter: 2),
        ErrorCase(status: 429, body: "Too many requests", code: .rateLimited, retryAfter: nil),
        ErrorCase(status: 500, body: "Internal server error", code: .transient),
        ErrorCase(status: 503, body: "", retryAfterHeader: "3", code: .rateLimited, retryAfter: 3),
    ])
    func classify(_ c: ErrorCase) {
        var headers = HTTPHeaders()
        if let r = c.retryAfterHeader { headers.add("Retry-After", r) }
        let error = DropboxProvider.classify(status: c.status, headers: headers, body: Data(c.body.utf8),
                                             route: "files/list_folder", remoteName: "db")
        #expect(error?.code == c.code)
        #expect(error?.retryAfter == c.retryAfter)
        if let error {
            #expect(error.message.contains("files/list_folder"))
            #expect(error.status == c.status)
        }
        if c.code == .unauthorized { #expect(error?.message.contains("cloudsync login db") == true) }
    }

    @Test("roots normalize to Dropbox's spelling", arguments: [
        ("", ""), ("/", ""), ("Music", "/Music"), ("/Music/", "/Music"), ("//A//B/", "/A/B"),
    ])
    func normalizedRoot(root: String, expected: String) throws {
        #expect(try DropboxOptions(remoteName: "db", root: root).normalizedRoot() == expected)
    }

    @Test("'..' in the root is refused")
    func dotDotRoot() {
        #expect(throws: ProviderError.self) { try DropboxOptions(remoteName: "db", root: "/a/../b").normalizedRoot() }
    }

    @Test("paths relative to the root: decided on path_lower, shown from path_display")
    func relativePaths() {
        let root = DropboxProvider.Root("/Music")
        #expect(root.relative(lower: "/music/кино/a.mp3", display: "/MUSIC/Кино/a.mp3")?.display == "Кино/a.mp3")
        #expect(root.relative(lower: "/music", display: "/Music") == nil, "the root's own entry")
        #expect(root.relative(lower: "/musical/a.mp3", display: "/Musical/a.mp3") == nil, "a sibling with the same prefix")
        #expect(root.relative(lower: "/music/a.mp3", display: nil)?.display == "a.mp3")
        let whole = DropboxProvider.Root("")
        #expect(whole.relative(lower: "/a/b.mp3", display: "/A/b.mp3")?.display == "A/b.mp3")
    }

    @Test("cursors round-trip and reject foreign text")
    func cursor() throws {
        let c = DropboxCursor(root: "/music", cursor: "AAE-xyz/==")
        #expect(DropboxCursor.decode(try c.sealed()) == c)
        #expect(DropboxCursor.decode("AAE-plain-dropbox-cursor") == nil)
        #expect(DropboxCursor.decode(#"{"v":2,"root":"","cursor":"x"}"#) == nil)
        // As cloudsync wrote it before the kit's envelope: the same spelling, still accepted.
        #expect(DropboxCursor.decode(#"{"cursor":"AAE-xyz/==","root":"/music","v":1}"#) == c)
        #expect(try c.sealed() == #"{"cursor":"AAE-xyz/==","root":"/music","v":1}"#)
    }
}
