import CloudSyncAuth
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Testing
import TestSupport

@Suite("login flows against the local fake")
struct LoginFlowTests {
    func remote(_ provider: String, _ fake: OAuthFake, clientID: String? = "test-client") -> LoginRemote {
        LoginRemote(name: "music", provider: descriptor(provider), clientID: clientID, tokenURL: fake.url("/token"),
                    authURL: fake.url("/authorize"),
                    deviceURL: fake.url(provider == "yandex" ? "/device/code" : "/devicecode"), apiURL: fake.base)
    }

    func login(_ remote: LoginRemote, _ dir: TemporaryDirectory, _ logs: LogCapture) throws -> Login {
        var login = Login(remote: remote, store: TokenStore(stateDirectory: dir.url), transport: try sharedTransport(),
                          logger: logs.logger)
        login.slowDownIncrement = 0.1
        return login
    }

    @Test("OneDrive device flow: pending, slow_down, then tokens stored 0600 in a 0700 folder")
    func oneDriveDevice() async throws {
        let fake = try OAuthFake(["--pending", "3", "--slow-down", "1", "--interval", "0"])
        let dir = try TemporaryDirectory()
        let logs = LogCapture()
        let ui = ScriptedInteraction()
        let outcome = try await login(remote("onedrive", fake), dir, logs).run(interaction: ui)
        #expect(outcome.method == "device code")
        #expect(outcome.account == "Ola Nordmann")
        #expect(outcome.hasRefreshToken)
        let state = try await fake.state()
        #expect(state["polls"] as? Int == 5)
        let file = try #require(outcome.storedAt)
        #expect(mode(of: file.path) == 0o600)
        #expect(mode(of: file.deletingLastPathComponent().path) == 0o700)
        let stored = try #require(try TokenStore(stateDirectory: dir.url).load("music"))
        #expect((state["valid_access"] as? [String])?.contains(stored.accessToken ?? "") == true)
        #expect(ui.shown.joined().contains("ABCD-1234"))
        expectNoSecrets(try await fake.secrets(), in: logs.all + ui.shown)
    }

    @Test("Yandex device flow polls with grant_type=device_code&code= and proves the token with OAuth scheme")
    func yandexDevice() async throws {
        let fake = try OAuthFake(["--pending", "2", "--slow-down", "1", "--client-secret", "shh"])
        let dir = try TemporaryDirectory()
        let logs = LogCapture()
        var r = remote("yandex", fake)
        r.clientSecret = "shh"
        let outcome = try await login(r, dir, logs).run(interaction: ScriptedInteraction())
        #expect(outcome.account == "ivan")
        #expect(try await fake.state()["polls"] as? Int == 4)
        expectNoSecrets(try await fake.secrets(), in: logs.all)
    }

    @Test("Yandex falls back to the confirmation code when the device endpoint refuses the app")
    func yandexFallback() async throws {
        let fake = try OAuthFake(["--device-status", "400"])
        let dir = try TemporaryDirectory()
        let ui = ScriptedInteraction { shown, _ in
            let link = try #require(firstURL(in: shown, containing: "/authorize"))
            #expect(link.absoluteString.contains("redirect_uri=https%3A%2F%2Foauth.yandex.ru%2Fverification_code"))
            return try await approve(link)["code"] as? String
        }
        let outcome = try await login(remote("yandex", fake), dir, LogCapture()).run(interaction: ui)
        #expect(outcome.method == "confirmation code")
    }

    @Test("Dropbox PKCE paste: the fake checks S256 of the verifier; offline access is asked for")
    func dropboxPaste() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let logs = LogCapture()
        let ui = ScriptedInteraction { shown, _ in
            let link = try #require(firstURL(in: shown, containing: "/authorize"))
            #expect(link.absoluteString.contains("token_access_type=offline"))
            #expect(!link.absoluteString.contains("redirect_uri"))
            return "  " + (try await approve(link)["code"] as? String ?? "") + "  "
        }
        let outcome = try await login(remote("dropbox", fake), dir, logs).run(interaction: ui)
        #expect(outcome.account == "dee@example.com")
        expectNoSecrets(try await fake.secrets(), in: logs.all + ui.shown)
    }

    @Test("Google: pasting the redirect address (headless) completes the login")
    func googlePastedRedirect() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let ui = ScriptedInteraction { shown, _ in
            let link = try #require(firstURL(in: shown, containing: "/authorize"))
            #expect(link.absoluteString.contains("scope=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fdrive.readonly"))
            return try await approve(link)["redirect"] as? String
        }
        let outcome = try await login(remote("gdrive", fake), dir, LogCapture()).run(interaction: ui)
        #expect(outcome.account == "ada@example.com")
    }

    @Test("Google: a browser on this machine reaches the loopback listener and nothing needs pasting")
    func googleLoopback() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let ui = ScriptedInteraction { shown, _ in
            let link = try #require(firstURL(in: shown, containing: "/authorize"))
            // The "browser": follows the 302 to http://127.0.0.1:PORT/?code=…&state=…
            let page = try await sharedTransport().send(HTTPRequest(url: link))
            #expect(page.status == 200)
            try await Task.sleep(nanoseconds: 30_000_000_000)  // the person types nothing; cancelled when the listener wins
            return nil
        }
        let outcome = try await login(remote("gdrive", fake), dir, LogCapture()).run(interaction: ui)
        #expect(outcome.storedAt != nil)
        #expect(outcome.method == "browser authorization", "nothing was pasted")
    }

    @Test("Google: a request to the loopback listener with another state is refused and the login goes on")
    func loopbackIgnoresAForeignState() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let ui = ScriptedInteraction { shown, _ in
            let link = try #require(firstURL(in: shown, containing: "/authorize"))
            let redirect = try #require(URLComponents(url: link, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "redirect_uri" }?.value)
            // Any local process: a forged redirect with another state is answered 400 and ends nothing.
            let forged = try await sharedTransport().send(HTTPRequest(url: URL(string: redirect + "?code=forged&state=other")!))
            #expect(forged.status == 400)
            let page = try await sharedTransport().send(HTTPRequest(url: link))
            #expect(page.status == 200)
            try await Task.sleep(nanoseconds: 30_000_000_000)
            return nil
        }
        let outcome = try await login(remote("gdrive", fake), dir, LogCapture()).run(interaction: ui)
        #expect(outcome.storedAt != nil)
    }

    @Test("a network's login page answering in the token endpoint's place is named as such; nothing stored")
    func loginPageInsteadOfTokens() async throws {
        let fake = try OAuthFake(["--token-portal", "--interval", "0"])
        let dir = try TemporaryDirectory()
        let error = await #expect(throws: AuthError.self) {
            try await login(remote("onedrive", fake), dir, LogCapture()).run(interaction: ScriptedInteraction())
        }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message.contains("answered an HTML page, not JSON") == true && error?.message.contains("login page") == true,
                "\(error?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("tokens/music.json").path))
    }

    @Test("a wrong pasted code is invalid_grant: exit 4, nothing stored")
    func wrongCode() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let ui = ScriptedInteraction { _, _ in "code-not-issued" }
        let error = await #expect(throws: AuthError.self) {
            try await login(remote("dropbox", fake), dir, LogCapture()).run(interaction: ui)
        }
        #expect(error?.code == .invalidGrant)
        #expect(error?.exitCode == .auth)
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("tokens/music.json").path))
    }

    @Test("refused consent and expired device codes are clear errors with exit 4 and nothing stored",
          arguments: [(["--device-outcome", "deny"], AuthError.Code.denied, "onedrive"),
                      (["--device-outcome", "deny"], AuthError.Code.denied, "yandex"),
                      (["--device-outcome", "expire"], AuthError.Code.expired, "onedrive"),
                      (["--device-expires-in", "0", "--pending", "5"], AuthError.Code.expired, "onedrive")])
    func deviceRefusals(arguments: [String], code: AuthError.Code, provider: String) async throws {
        let fake = try OAuthFake(arguments)
        let dir = try TemporaryDirectory()
        let error = await #expect(throws: AuthError.self) {
            try await login(remote(provider, fake), dir, LogCapture()).run(interaction: ScriptedInteraction())
        }
        #expect(error?.code == code)
        #expect(error?.exitCode == .auth)
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("tokens/music.json").path))
    }

    @Test("denied consent in a pasted redirect address")
    func deniedRedirect() async throws {
        let fake = try OAuthFake(["--authorize-outcome", "deny"])
        let dir = try TemporaryDirectory()
        let ui = ScriptedInteraction { shown, _ in
            try await approve(try #require(firstURL(in: shown, containing: "/authorize")))["redirect"] as? String
        }
        let error = await #expect(throws: AuthError.self) {
            try await login(remote("gdrive", fake), dir, LogCapture()).run(interaction: ui)
        }
        #expect(error?.code == .denied)
    }

    @Test("missing client_id is a configuration error (exit 3) that says where to register an app")
    func missingClientID() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let error = await #expect(throws: AuthError.self) {
            try await login(remote("dropbox", fake, clientID: nil), dir, LogCapture()).run(interaction: ScriptedInteraction())
        }
        #expect(error?.exitCode == .config)
        #expect(error?.message.contains("dropbox.com/developers/apps") == true)
    }

    @Test("an unreachable token endpoint is a network error with exit 5 (#20.13)")
    func networkFailure() async throws {
        let dir = try TemporaryDirectory()
        let closed = try OAuthFake()
        let port = closed.port
        let base = URL(string: "http://127.0.0.1:\(port)")!
        closed.stop()
        let r = LoginRemote(name: "music", provider: descriptor("onedrive"), clientID: "test-client", tokenURL: base.appendingPathComponent("token"),
                            deviceURL: base.appendingPathComponent("devicecode"), apiURL: base)
        let error = await #expect(throws: AuthError.self) {
            try await login(r, dir, LogCapture()).run(interaction: ScriptedInteraction())
        }
        #expect(error?.code == .network)
        #expect(error?.exitCode == .unavailable)
    }

    @Test("WebDAV: the typed password is checked with PROPFIND Depth 0 and stored 0600; a wrong one is refused")
    func webdav() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let r = LoginRemote(name: "music", provider: descriptor("webdav"), url: fake.url("/dav/"), user: "alice")
        let wrong = await #expect(throws: AuthError.self) {
            try await login(r, dir, LogCapture()).run(interaction: ScriptedInteraction(secret: "nope"))
        }
        #expect(wrong?.code == .invalidGrant)
        #expect(try TokenStore(stateDirectory: dir.url).load("music") == nil)
        let logs = LogCapture()
        let outcome = try await login(r, dir, logs).run(interaction: ScriptedInteraction(secret: "s3cret pass"))
        #expect(mode(of: try #require(outcome.storedAt).path) == 0o600)
        let stored = try AuthSetup.storedPassword(remoteName: "music", stateDirectory: dir.url)
        #expect(stored?.password == "s3cret pass")
        #expect(stored?.user == "alice")
        expectNoSecrets(["s3cret pass"], in: logs.all)
    }

    @Test("--token-json: rclone's shape with an expired token is refreshed, then proved and stored")
    func importRclone() async throws {
        let fake = try OAuthFake(["--seed-refresh-token", "rt-from-rclone", "--rotate"])
        let dir = try TemporaryDirectory()
        let text = """
            Paste the following into your remote machine --->
            {"access_token":"old-access","token_type":"Bearer","refresh_token":"rt-from-rclone","expiry":"2020-01-02T03:04:05.123456789+01:00"}
            <---End paste
            """
        let outcome = try await login(remote("onedrive", fake), dir, LogCapture()).importTokens(text)
        #expect(outcome.method == "imported tokens")
        let stored = try #require(try TokenStore(stateDirectory: dir.url).load("music"))
        let state = try await fake.state()
        #expect((state["valid_refresh"] as? [String])?.contains(stored.refreshToken ?? "") == true)
        #expect(stored.refreshToken != "rt-from-rclone")
    }

    @Test("--token-json: a refresh token rotated by the import is kept even when the check cannot reach the API")
    func importRotatedKeptWhenTheCheckFails() async throws {
        let fake = try OAuthFake(["--seed-refresh-token", "rt-seed", "--rotate"])
        let dir = try TemporaryDirectory()
        var unreachable = remote("onedrive", fake)
        unreachable.apiURL = URL(string: "http://127.0.0.1:9")!
        let json = #"{"access_token":"at-stale","refresh_token":"rt-seed","expiry":"2020-01-01T00:00:00Z"}"#
        let error = await #expect(throws: AuthError.self) {
            try await login(unreachable, dir, LogCapture()).importTokens(json)
        }
        #expect(error?.message.contains("the refreshed tokens were stored all the same") == true, "\(error?.message ?? "")")
        // rt-seed is spent at the provider; the rotated one was kept and works.
        let stored = try #require(try TokenStore(stateDirectory: dir.url).load("music"))
        #expect(stored.refreshToken != "rt-seed")
        let state = try await fake.state()
        #expect((state["valid_refresh"] as? [String])?.contains(stored.refreshToken ?? "") == true)
    }

    @Test("--token-json: a token the provider refuses is not stored")
    func importRefused() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let json = #"{"accessToken":"bogus","refreshToken":"r","expiresAt":\#(Date().addingTimeInterval(3600).timeIntervalSinceReferenceDate)}"#
        let error = await #expect(throws: AuthError.self) {
            try await login(remote("dropbox", fake), dir, LogCapture()).importTokens(json)
        }
        #expect(error?.code == .verificationFailed)
        #expect(try TokenStore(stateDirectory: dir.url).load("music") == nil)
    }
}
