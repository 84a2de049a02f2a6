import CloudSyncAuth
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Testing
import TestSupport

@Suite("token store and lock-serialised refresh")
struct TokenStoreTests {
    @Test("save, load, delete; 0600 file in a 0700 folder; no temp files left")
    func roundTrip() throws {
        let dir = try TemporaryDirectory()
        let store = TokenStore(stateDirectory: dir.url)
        let expiry = Date(timeIntervalSince1970: 1_900_000_000)
        let creds = StoredCredentials(provider: "onedrive", accessToken: "a", refreshToken: "r", expiresAt: expiry, tokenType: "Bearer")
        try store.save(creds, for: "music")
        try store.save(creds, for: "music")
        var loaded = try #require(try store.load("music"))
        #expect(loaded.savedAt != nil)
        loaded.savedAt = nil
        #expect(loaded == creds)
        #expect(mode(of: store.fileURL(for: "music").path) == 0o600)
        #expect(mode(of: store.directory.path) == 0o700)
        let names = try FileManager.default.contentsOfDirectory(atPath: store.directory.path)
        #expect(names == ["music.json"])
        #expect(try store.delete("music"))
        #expect(try !store.delete("music"))
        #expect(try store.load("music") == nil)
    }

    @Test("tokens stored for another provider are not this provider's (a remote re-pointed since login)")
    func tokensOfAnotherProviderAreIgnored() throws {
        let dir = try TemporaryDirectory()
        let store = TokenStore(stateDirectory: dir.url)
        try store.save(StoredCredentials(provider: "dropbox", accessToken: "a", refreshToken: "r"), for: "music")
        #expect(try store.load("music", for: "onedrive") == nil)
        #expect(try store.load("music", for: "dropbox")?.refreshToken == "r")
        try store.save(StoredCredentials(accessToken: "imported"), for: "old")
        #expect(try store.load("old", for: "onedrive")?.accessToken == "imported", "files without a provider still count")
    }

    @Test("hostile remote names stay inside the tokens folder and never collide",
          arguments: ["../../etc/passwd", "a/b", ".hidden", "", "ü", "a%2Fb", "nul\u{0}x"])
    func hostileNames(name: String) throws {
        let dir = try TemporaryDirectory()
        let store = TokenStore(stateDirectory: dir.url)
        let file = store.fileURL(for: name)
        #expect(file.deletingLastPathComponent().standardizedFileURL.path == store.directory.standardizedFileURL.path)
        #expect(!file.lastPathComponent.hasPrefix("."))
        try store.save(StoredCredentials(accessToken: "x"), for: name)
        #expect(try store.load(name)?.accessToken == "x")
        #expect(store.fileURL(for: name) != store.fileURL(for: name + "_"))
    }

    @Test("a damaged token file is a storage error naming the file, never its content")
    func damaged() throws {
        let dir = try TemporaryDirectory()
        let store = TokenStore(stateDirectory: dir.url)
        try store.save(StoredCredentials(accessToken: "x"), for: "music")
        try Data("{\"access_token\": \"leak-me\", ".utf8).write(to: store.fileURL(for: "music"))
        let error = #expect(throws: AuthError.self) { try store.load("music") }
        #expect(error?.code == .storage)
        #expect(error?.message.contains("leak-me") == false)
    }

    func expiredStore(_ fake: OAuthFake, _ dir: TemporaryDirectory, refresh: String) throws -> TokenStore {
        let store = TokenStore(stateDirectory: dir.url)
        try store.save(StoredCredentials(provider: "onedrive", accessToken: "expired-access", refreshToken: refresh,
                                         expiresAt: Date().addingTimeInterval(-10), tokenType: "Bearer"), for: "music")
        return store
    }

    func source(_ store: TokenStore, _ fake: OAuthFake, _ logs: LogCapture) throws -> StoredTokenSource {
        StoredTokenSource(remoteName: "music", provider: "onedrive", store: store,
                          client: .init(tokenURL: fake.url("/token"), clientID: "test-client"),
                          transport: try sharedTransport(), logger: logs.logger)
    }

    @Test("two instances (separate flocks) refreshing at once: one refresh, the rotated token persisted and valid")
    func concurrentRefresh() async throws {
        let fake = try OAuthFake(["--seed-refresh-token", "rt-seed", "--rotate", "--refresh-delay", "0.3"])
        let dir = try TemporaryDirectory()
        let store = try expiredStore(fake, dir, refresh: "rt-seed")
        let logs = LogCapture()
        let a = try source(store, fake, logs)
        let b = try source(store, fake, logs)
        async let ta = a.accessToken()
        async let tb = b.refresh(rejected: "expired-access")
        async let tc = a.refresh(rejected: "expired-access")
        let tokens = try await [ta, tb, tc]
        #expect(Set(tokens).count == 1)
        let state = try await fake.state()
        #expect(state["refresh_count"] as? Int == 1)
        #expect(state["refused_refresh"] as? Int == 0)
        let stored = try #require(try store.load("music"))
        #expect(stored.accessToken == tokens[0])
        #expect((state["valid_refresh"] as? [String]) == [stored.refreshToken ?? ""])
        // The persisted (rotated) refresh token still works: a later forced refresh succeeds.
        let next = try await b.refresh(rejected: tokens[0])
        #expect(next != tokens[0])
        #expect(try await fake.state()["refresh_count"] as? Int == 2)
        expectNoSecrets(try await fake.secrets() + ["rt-seed"], in: logs.all)
    }

    @Test("while another process holds the lock and refreshes, the waiting instance uses its token instead of refreshing")
    func otherProcessRefreshes() async throws {
        let fake = try OAuthFake(["--seed-refresh-token", "rt-seed", "--rotate"])
        let dir = try TemporaryDirectory()
        let store = try expiredStore(fake, dir, refresh: "rt-seed")
        // Another process: takes the flock, writes a fresh token file (as a refresh would), holds on, releases.
        let fresh = #"{"access_token":"from-other-process","refresh_token":"rt-other","expiry":"2099-01-01T00:00:00Z","token_type":"Bearer"}"#
        let script = """
            import fcntl, os, sys, time
            fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            print("locked", flush=True)
            time.sleep(0.8)
            tmp = sys.argv[2] + ".tmp"
            with open(tmp, "w") as f: f.write(sys.argv[3])
            os.chmod(tmp, 0o600); os.rename(tmp, sys.argv[2])
            fcntl.flock(fd, fcntl.LOCK_UN)
            """
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = ["python3", "-c", script, store.lockURL(for: "music").path, store.fileURL(for: "music").path, fresh]
        let out = Pipe()
        holder.standardOutput = out
        try holder.run()
        #expect(try out.fileHandleForReading.read(upToCount: 7) == Data("locked\n".utf8))
        let token = try await source(store, fake, LogCapture()).accessToken()
        holder.waitUntilExit()
        #expect(token == "from-other-process")
        #expect(try await fake.state()["refresh_count"] as? Int == 0)
    }

    @Test("a refresh refused by the endpoint is .unauthorized telling the user to log in again")
    func refreshRefused() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let store = try expiredStore(fake, dir, refresh: "rt-unknown")
        let error = await #expect(throws: ProviderError.self) { try await source(store, fake, LogCapture()).accessToken() }
        #expect(error?.code == .unauthorized)
        #expect(error?.message.contains("cloudsync login music") == true)
    }

    @Test("AuthSetup.tokenSource: stored tokens win; config refresh_token seeds the store; access_token alone is static; none is unauthorized")
    func factory() async throws {
        let fake = try OAuthFake(["--seed-refresh-token", "rt-config"])
        let dir = try TemporaryDirectory()
        let transport = try sharedTransport()
        func make(access: String?, refresh: String?) throws -> any TokenSource {
            try AuthSetup.tokenSource(remoteName: "music", provider: descriptor("onedrive"), tokenURL: fake.url("/token"), clientID: "test-client",
                                      clientSecret: nil, configAccessToken: access, configRefreshToken: refresh,
                                      stateDirectory: dir.url, transport: transport, logger: .silent)
        }
        let none = #expect(throws: ProviderError.self) { try make(access: nil, refresh: nil) }
        #expect(none?.code == .unauthorized)
        #expect(none?.message.contains("cloudsync login music") == true)
        let fixed = try make(access: "config-access", refresh: nil)
        #expect(fixed is StaticTokenSource)
        #expect(try await fixed.accessToken() == "config-access")
        let seeded = try make(access: nil, refresh: "rt-config")
        let first = try await seeded.accessToken()
        #expect(first.hasPrefix("at-"))
        #expect(try TokenStore(stateDirectory: dir.url).load("music")?.accessToken == first)
        let stored = try make(access: "config-access", refresh: "rt-config")
        #expect(try await stored.accessToken() == first)
    }

    @Test("PKCE S256 matches an independent implementation (python hashlib) and the defaults are the documented endpoints")
    func pkceAndDefaults() {
        #expect(PKCE.challenge(for: "dBjftJeZ4CVP-mJ0kOFvxBX64iF7jsKzOJD4D9JNqYo") == "RCllwmtshvSJC8oaGXVZFsrJKjkwHdZdASxwr0k64Mg")
        let p = PKCE.random()
        #expect(p.verifier.count >= 43 && p.verifier.count <= 128)
        #expect(p.verifier.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(descriptor("onedrive").oauth?.deviceURL?.absoluteString == "https://login.microsoftonline.com/common/oauth2/v2.0/devicecode")
        #expect(descriptor("onedrive").oauth?.tokenURL.absoluteString == "https://login.microsoftonline.com/common/oauth2/v2.0/token")
        #expect(descriptor("yandex").oauth?.deviceURL?.absoluteString == "https://oauth.yandex.ru/device/code")
        #expect(descriptor("dropbox").oauth?.authorizeURL?.absoluteString == "https://www.dropbox.com/oauth2/authorize")
        #expect(descriptor("dropbox").oauth?.deviceURL == nil)
        #expect(AuthSetup.authScheme(descriptor("yandex")).scheme == "OAuth")
        // The refresh grant repeats Microsoft's scopes, and only Microsoft's.
        let graph = try? AuthSetup.refreshClient(remoteName: "m", provider: descriptor("onedrive"), tokenURL: nil, clientID: "c", clientSecret: nil)
        #expect(graph?.extraFields.map(\.1) == ["Files.Read Files.Read.All offline_access"])
        let drive = try? AuthSetup.refreshClient(remoteName: "m", provider: descriptor("gdrive"), tokenURL: nil, clientID: "c", clientSecret: nil)
        #expect(drive?.extraFields.isEmpty == true && drive?.tokenURL.absoluteString == "https://oauth2.googleapis.com/token")
    }
}
