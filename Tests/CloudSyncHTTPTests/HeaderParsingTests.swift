import CloudSyncCore
import Foundation
import Testing
@testable import CloudSyncHTTP

struct HeaderParsingTests {
    static let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test(arguments: [
        ("120", 120.0),
        ("0", 0.0),
        ("  7 ", 7.0),
        ("Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
        ("Sun, 06 Nov 1994 08:50:07 GMT", 30.0),
        ("Sunday, 06-Nov-94 08:51:37 GMT", 120.0),
        ("Sun Nov  6 08:49:47 1994", 10.0),
        ("Sat, 05 Nov 1994 08:49:37 GMT", 0.0),  // in the past
    ])
    func retryAfterParses(value: String, expected: Double) {
        let headers: HTTPHeaders = ["retry-after": value]
        #expect(retryAfter(from: headers, now: Self.now) == expected)
    }

    @Test(arguments: ["", "soon", "-5", "1.5", "Sun, 32 Nov 1994 08:49:37 GMT"])
    func retryAfterRejects(value: String) {
        #expect(retryAfter(from: ["Retry-After": value], now: Self.now) == nil)
    }

    @Test func retryAfterAbsent() {
        #expect(retryAfter(from: [:], now: Self.now) == nil)
    }

    @Test func httpDateRoundTrips() {
        #expect(HTTPDate.format(Self.now) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse(HTTPDate.format(Self.now)) == Self.now)
    }

    @Test(arguments: [
        (429, ProviderError.Code.rateLimited), (503, .rateLimited),
        (408, .transient), (423, .transient), (425, .transient), (500, .transient), (502, .transient),
        (504, .transient), (509, .transient), (501, .transient),
        (401, .unauthorized), (403, .forbidden), (404, .notFound), (410, .notFound),
        (507, .quotaExceeded), (416, .invalidResponse), (400, .invalidResponse), (418, .invalidResponse),
    ])
    func statusClassification(status: Int, code: ProviderError.Code) throws {
        let error = try #require(ProviderError.fromHTTP(status: status, headers: ["Retry-After": "3"], body: Data("oops\nbad".utf8),
                                                        context: "GET https://api.example.com/x", now: Self.now))
        #expect(error.code == code)
        #expect(error.status == status)
        #expect(error.retryAfter == 3)
        #expect(error.message.contains("GET https://api.example.com/x"))
        #expect(error.message.contains("oops bad"))
        #expect(error.isRetryable == ProviderError.retryableHTTPStatuses.contains(status) || status == 501)
    }

    @Test(arguments: [200, 204, 206, 302, 304])
    func successIsNoError(status: Int) {
        #expect(ProviderError.fromHTTP(status: status, headers: [:], context: "GET x") == nil)
    }

    @Test func rateLimitWithoutRetryAfter() throws {
        let error = try #require(ProviderError.fromHTTP(status: 429, headers: [:], context: "GET x"))
        #expect(error.retryAfter == nil)
        #expect(error.code == .rateLimited)
    }

    @Test(arguments: [
        ("bytes 0-499/1234", ContentRange(range: 0...499, total: 1234)),
        ("bytes 500-1233/1234", ContentRange(range: 500...1233, total: 1234)),
        ("bytes 7-7/*", ContentRange(range: 7...7, total: nil)),
        ("bytes */1234", ContentRange(range: nil, total: 1234)),
        ("BYTES 0-0/1", ContentRange(range: 0...0, total: 1)),
    ])
    func contentRangeParses(text: String, expected: ContentRange) {
        #expect(ContentRange(text) == expected)
    }

    @Test(arguments: ["bytes 5-4/10", "bytes 0-10/10", "bytes */*", "bytes -5/10", "items 0-1/2", "bytes 0-1", "bytes a-b/3", ""])
    func contentRangeRejects(text: String) {
        #expect(ContentRange(text) == nil)
    }

    @Test func formEncoding() {
        #expect(OAuthRefresher.formEncode([("grant_type", "refresh_token"), ("refresh_token", "a/b+c d=&é")])
                == "grant_type=refresh_token&refresh_token=a%2Fb%2Bc+d%3D%26%C3%A9")
    }

    @Test(arguments: [
        ("http://a.example/x", "http://a.example:80/y", true),
        ("https://a.example/x", "https://A.EXAMPLE/y", true),
        ("http://127.0.0.1:8080/x", "http://localhost:8080/x", false),
        ("http://a.example/x", "https://a.example/x", false),
        ("http://a.example:8080/x", "http://a.example:8081/x", false),
    ])
    func origins(a: String, b: String, same: Bool) throws {
        #expect(CurlTransport.sameOrigin(try #require(URL(string: a)), try #require(URL(string: b))) == same)
    }
}

/// The byte-level helpers the transport and the server parse fields with.
struct ASCIIFieldTests {
    @Test(arguments: [
        ("Content-Range", "content-range", true), ("ETAG", "ETag", true), ("x", "x", true), ("", "", true),
        ("ETag", "ETa", false), ("Etag-", "ETag", false), ("[", "{", false),  // '[' | 0x20 == '{' must not match
        ("Ä", "ä", false),  // only ASCII letters fold
    ])
    func caseInsensitiveNames(a: String, b: String, equal: Bool) {
        #expect(ASCII.equalsIgnoringCase(a, b) == equal)
        #expect(ASCII.equalsIgnoringCase(b, a) == equal)
    }

    @Test(arguments: [(" \t v a l \t ", "v a l"), ("", ""), ("   ", ""), ("x", "x"), ("\tx", "x")])
    func trimsOptionalWhitespaceOnly(raw: String, trimmed: String) {
        #expect(String(decoding: ASCII.trimmingWhitespace(Array(raw.utf8)), as: UTF8.self) == trimmed)
    }

    @Test func headerLookupIgnoresCase() {
        var headers: HTTPHeaders = ["Content-Length": "5", "set-cookie": "a", "Set-Cookie": "b"]
        #expect(headers["content-length"] == "5")
        #expect(headers.values("SET-COOKIE") == ["a", "b"])
        headers.remove("SET-cookie")
        #expect(headers.values("set-cookie").isEmpty)
    }
}
