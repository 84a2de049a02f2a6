import CloudSyncCore
import Foundation
import Testing
import TestSupport
@testable import CloudSyncHTTP

@Suite(.timeLimit(.minutes(2)))
struct RedirectTests {
    let transport: CurlTransport

    init() throws { transport = try CurlTransport() }

    func echo(_ r: HTTPResponse) throws -> (method: String, body: String, headers: [String: String]) {
        let json = try #require(try JSONSerialization.jsonObject(with: r.body) as? [String: Any])
        return (json["method"] as? String ?? "", json["body"] as? String ?? "", json["headers"] as? [String: String] ?? [:])
    }

    func redirect(_ server: FaultServer, to target: URL, status: Int = 302, host: String = "127.0.0.1") -> URL {
        let to = target.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return server.url("/redirect?status=\(status)&to=\(to)", host: host)
    }

    func authed(_ url: URL, keeps: Bool = false) -> HTTPRequest {
        HTTPRequest(url: url, headers: ["Authorization": "Bearer T0KEN", "X-Api-Key": "K3Y", "Accept": "x/y"],
                    authHeaderNames: ["x-api-key"], keepsAuthAcrossHosts: keeps)
    }

    @Test func crossHostRedirectDropsAuthHeaders() async throws {
        let server = try await faultServer()
        let r = try await transport.send(authed(redirect(server, to: server.url("/echo", host: "localhost"))))
        let e = try echo(r)
        #expect(e.headers["authorization"] == nil)
        #expect(e.headers["x-api-key"] == nil)
        #expect(e.headers["accept"] == "x/y")
        #expect(r.head.url.host == "localhost")
    }

    @Test func sameHostRedirectKeepsAuthHeaders() async throws {
        let server = try await faultServer()
        let e = try echo(try await transport.send(authed(redirect(server, to: server.url("/echo")))))
        #expect(e.headers["authorization"] == "Bearer T0KEN")
        #expect(e.headers["x-api-key"] == "K3Y")
    }

    @Test func keepsAuthAcrossHostsWhenAsked() async throws {
        let server = try await faultServer()
        let e = try echo(try await transport.send(authed(redirect(server, to: server.url("/echo", host: "localhost")), keeps: true)))
        #expect(e.headers["authorization"] == "Bearer T0KEN")
    }

    @Test func relativeLocationIsResolved() async throws {
        let server = try await faultServer()
        let r = try await transport.send(HTTPRequest(url: server.url("/redirect?status=301&to=/echo%3Fa%3D1")))
        #expect(r.status == 200)
        #expect(r.head.url == server.url("/echo?a=1"))
    }

    @Test(arguments: [(303, "POST", "GET", ""), (302, "POST", "GET", ""), (301, "POST", "GET", ""),
                      (307, "POST", "POST", "payload"), (308, "PUT", "PUT", "payload"), (303, "PUT", "GET", "")])
    func methodRewriting(status: Int, method: String, expectedMethod: String, expectedBody: String) async throws {
        let server = try await faultServer()
        var request = HTTPRequest(method: method, url: redirect(server, to: server.url("/echo"), status: status), body: Data("payload".utf8))
        request.headers.set("Content-Type", "text/plain")
        let e = try echo(try await transport.send(request))
        #expect(e.method == expectedMethod)
        #expect(e.body == expectedBody)
    }

    /// A redirect to another scheme is a wrong answer to that one request, not a broken remote configuration.
    @Test(arguments: ["file:///etc/passwd", "gopher://127.0.0.1:70/1", "ftp://127.0.0.1/x.mp3"])
    func redirectToAnotherSchemeFailsThatRequestOnly(target: String) async throws {
        let server = try await faultServer()
        let to = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let url = server.url("/redirect?status=302&to=\(to)")
        let error = await #expect(throws: ProviderError.self) {
            try await transport.download(HTTPRequest(url: url), range: 0...99, ifRange: nil, into: MemorySink())
        }
        #expect(error?.code == .invalidResponse, "\(error?.message ?? "")")
        let scheme = String(target.prefix { $0 != ":" })
        #expect(error?.message.contains("redirected GET http://127.0.0.1:\(server.port)/redirect to a \(scheme): URL") == true,
                "\(error?.message ?? "")")
        #expect(error?.message.contains("http and https only") == true)
        #expect(error?.message.contains("passwd") == false)
    }

    @Test func redirectLoopsStopAfterTen() async throws {
        let server = try await faultServer()
        let loop = server.url("/loop")
        let error = await #expect(throws: ProviderError.self) { try await transport.send(HTTPRequest(url: loop)) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message.contains("more than 10 redirects") == true)
    }

    @Test func rangedDownloadFollowsARedirectWithoutWritingItsBody() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(authed(redirect(server, to: server.url("/data/5000", host: "localhost"))),
                                               range: 100...199, ifRange: nil, into: sink)
        #expect(out.head.status == 206)
        #expect(out.head.url.host == "localhost")
        #expect(sink.assembled(100..<200) == served(5000, from: 100, to: 200))
    }

    @Test func debugLogNeverShowsTokensOrSignedQueries() async throws {
        let server = try await faultServer()
        let capture = LogCapture()
        let logged = try CurlTransport(logger: capture.logger)
        var request = authed(redirect(server, to: server.url("/data/1000?sig=S1GNATURE&token=QTOKEN", host: "localhost")))
        request.headers.set("Cookie", "session=C00KIE")
        _ = try await logged.download(request, range: 0...99, ifRange: nil, into: MemorySink())
        _ = try await logged.send(authed(server.url("/echo?access_token=QTOKEN")))
        let lines = capture.all
        #expect(lines.count == 3)
        // Download links carry credentials in their paths (OneDrive, Yandex): only the first segment is shown.
        #expect(lines.contains { $0.contains("GET http://localhost:\(server.port)/data/… → 206") }, "\(lines)")
        #expect(!lines.joined(separator: "\n").contains("/data/1000"), "\(lines)")
        for secret in ["T0KEN", "K3Y", "S1GNATURE", "QTOKEN", "C00KIE", "sig=", "%3F"] {
            #expect(!lines.joined(separator: "\n").contains(secret), "log leaks \(secret)")
        }
    }
}
