import CloudSyncCore
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import CloudSyncHTTP

@Suite(.timeLimit(.minutes(2)))
struct PacerTests {
    @Test func backoffIsFullJitterUnderTheCeiling() async {
        let pacer = Pacer(policy: .init(retries: 10, baseDelay: 0.5, maxDelay: 60))
        for attempt in 1...12 {
            let ceiling = min(60, 0.5 * pow(2, Double(attempt - 1)))
            for _ in 0..<200 {
                let d = pacer.backoff(attempt: attempt)
                #expect(d >= 0 && d <= ceiling)
            }
        }
    }

    /// A host that cannot be reached is retried for a network coming back, under a 5 s ceiling: a pull with the
    /// cloud unplugged gave up after ~2 minutes of 60 s ceilings, now ~20 s (at most ~38). A failing server keeps
    /// the 60 s ceiling. Seeded by many draws: every unreachable delay stays under 5 s, some transient ones pass it.
    @Test func unreachableHostsWaitUnderAShorterCeiling() async throws {
        for (code, ceiling) in [(ProviderError.Code.unreachable, 5.0), (.transient, 60.0)] {
            let clock = FakeClock()
            let pacer = Pacer(policy: .init(retries: 10), sleep: { try await clock.sleep($0) }, now: { clock.now })
            for _ in 0 ..< 20 {
                await #expect(throws: ProviderError.self) {
                    try await pacer.run("GET x") { () async throws -> Int in throw ProviderError(code, "down") }
                }
            }
            #expect(clock.sleeps.count == 200)
            #expect(clock.sleeps.allSatisfy { $0 >= 0 && $0 <= ceiling }, "\(code): \(clock.sleeps.max() ?? 0)")
            if code == .transient { #expect(clock.sleeps.contains { $0 > 5 }) }
        }
        #expect(Pacer.Policy(maxDelay: 2).unreachableMaxDelay == 2, "never above the general ceiling")
    }

    @Test func rateLimitHonoursRetryAfterAndPausesTheWholeRemote() async throws {
        let server = try await faultServer()
        let clock = FakeClock()
        let pacer = Pacer(sleep: { try await clock.sleep($0) }, now: { clock.now })
        let transport = try CurlTransport()
        let client = APIClient(transport: transport, pacer: pacer, tokens: nil) { response in
            ProviderError.fromHTTP(status: response.status, headers: response.headers, body: response.body,
                                   context: "GET \(redactedURL(response.head.url))")
        }
        let id = UUID().uuidString
        let r = try await client.send(HTTPRequest(url: server.url("/ratelimit?id=\(id)&n=2&after=7")))
        #expect(r.status == 200)
        #expect(clock.sleeps.reduce(0, +) == 14)
        // The pause is the remote's: another request now waits before starting.
        pacer.pause(for: 5)
        let before = clock.now
        _ = try await client.send(HTTPRequest(url: server.url("/status/200")))
        #expect(clock.now.timeIntervalSince(before) == 5)
    }

    /// A download that waited for its transfer slot while the remote was paused (`TransferSlot.Deferred`) is asked
    /// again after the pause, and that costs no attempt: with no retries at all it still succeeds.
    @Test func aDeferredDownloadIsAskedAgainAfterThePauseWithoutCountingAnAttempt() async throws {
        let clock = FakeClock()
        let pacer = Pacer(policy: .init(retries: 0), sleep: { try await clock.sleep($0) }, now: { clock.now })
        let calls = Mutex(0)
        #expect(!pacer.isPaused)
        let result = try await pacer.run("GET x") { () -> Int in
            let n = calls.withLock { $0 += 1; return $0 }
            if n < 3 {
                pacer.pause(for: 4)
                #expect(pacer.isPaused)
                throw TransferSlot.Deferred()
            }
            return n
        }
        #expect(result == 3)
        #expect(clock.sleeps == [4, 4])
        #expect(!pacer.isPaused)
    }

    @Test func nonRetryableErrorsAreThrownAtOnce() async throws {
        let server = try await faultServer()
        let clock = FakeClock()
        let pacer = Pacer(sleep: { try await clock.sleep($0) }, now: { clock.now })
        let client = APIClient(transport: try CurlTransport(), pacer: pacer, tokens: nil) { response in
            ProviderError.fromHTTP(status: response.status, headers: response.headers, context: "GET")
        }
        let error = await #expect(throws: ProviderError.self) { try await client.send(HTTPRequest(url: server.url("/status/404"))) }
        #expect(error?.code == .notFound)
        #expect(clock.sleeps.isEmpty)
    }

    /// Interactive callers bound the retries of a host that cannot be reached, not those of a failing server.
    @Test func unreachableHostsGetTheirOwnRetryBudget() async throws {
        let clock = FakeClock()
        let logs = LogCapture()
        let pacer = Pacer(policy: .init(retries: 5, unreachableRetries: 1), logger: logs.logger,
                          sleep: { try await clock.sleep($0) }, now: { clock.now })
        for (code, attempts) in [(ProviderError.Code.unreachable, 2), (.transient, 6)] {
            let count = Mutex(0)
            await #expect(throws: ProviderError.self) {
                try await pacer.run("GET x") { () async throws -> Int in
                    count.withLock { $0 += 1 }
                    throw ProviderError(code, "down")
                }
            }
            #expect(count.withLock { $0 } == attempts, "\(code)")
        }
        #expect(logs.all.contains { $0.contains("retry 1/1 in") }, "the log says the budget that applies: \(logs.all)")
        #expect(logs.all.contains { $0.contains("retry 5/5 in") })
    }

    @Test func transientErrorsRetryWithBackoffThenGiveUp() async throws {
        let server = try await faultServer()
        let clock = FakeClock()
        let pacer = Pacer(policy: .init(retries: 3), sleep: { try await clock.sleep($0) }, now: { clock.now })
        let client = APIClient(transport: try CurlTransport(), pacer: pacer, tokens: nil) { response in
            ProviderError.fromHTTP(status: response.status, headers: response.headers, context: "GET")
        }
        let error = await #expect(throws: ProviderError.self) { try await client.send(HTTPRequest(url: server.url("/status/502"))) }
        #expect(error?.code == .transient)
        #expect(clock.sleeps.count == 3)
        // The final error no longer promises a retry (a pull's report printed "cloudsync retries with backoff").
        #expect(error?.message.contains("cloudsync gave up after 3 retries") == true && error?.message.contains("retries with backoff") == false,
                "\(error?.message ?? "")")
    }

    /// The advice of a spent error, for each wording that promised a retry.
    @Test(arguments: [
        ("GET: HTTP 503 — the server is throttling requests; cloudsync waits 1 s (Retry-After) and retries", 10,
         "GET: HTTP 503 — the server is throttling requests; cloudsync gave up after 10 retries"),
        ("GET: HTTP 502 — temporary server failure; cloudsync retries with backoff", 1,
         "GET: HTTP 502 — temporary server failure; cloudsync gave up after 1 retry"),
        ("GET: HTTP 429 — the server is throttling requests; cloudsync waits and retries", 0,
         "GET: HTTP 429 — the server is throttling requests; cloudsync does not retry here"),
        ("connection refused", 2, "connection refused"),
    ])
    func aSpentErrorSaysItGaveUp(message: String, retries: Int, expected: String) {
        #expect(ProviderError(.rateLimited, message).givenUp(after: retries).message == expected)
    }
}

final class Persisted: Sendable { let sets = Mutex<[TokenSet]>([]) }

@Suite(.timeLimit(.minutes(2)))
struct OAuthTests {
    func refresher(_ server: FaultServer, refreshToken: String?, expiresAt: Date? = nil,
                   persisted: Persisted? = nil) throws -> OAuthRefresher {
        let store = persisted
        return OAuthRefresher(remoteName: "music",
                              tokens: TokenSet(accessToken: "old", refreshToken: refreshToken, expiresAt: expiresAt),
                              client: .init(tokenURL: server.url("/token"), clientID: "cid", clientSecret: "sec"),
                              transport: try CurlTransport()) { set in store?.sets.withLock { $0.append(set) } }
    }

    @Test func concurrentRejectionsShareOneRefresh() async throws {
        let server = try await faultServer()
        let probe = try CurlTransport()
        let refreshToken = "good-\(UUID().uuidString)"
        let persisted = Persisted()
        let source = try refresher(server, refreshToken: refreshToken, persisted: persisted)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await source.refresh(rejected: "old") } }
            var all: [String] = []
            for try await t in group { all.append(t) }
            return all
        }
        #expect(Set(tokens).count == 1)
        #expect(tokens.first?.hasPrefix("at-") == true)
        #expect(try await stats(server, probe)["token:\(refreshToken)"] == 1)
        #expect(persisted.sets.withLock { $0.count } == 1)
        // A caller holding a token older than the current one gets the current one, no refresh.
        #expect(try await source.refresh(rejected: "old") == tokens.first)
        #expect(try await stats(server, probe)["token:\(refreshToken)"] == 1)
    }

    @Test func rotatedRefreshTokenIsPersistedAndKept() async throws {
        let server = try await faultServer()
        let persisted = Persisted()
        let source = try refresher(server, refreshToken: "rotate", persisted: persisted)
        let token = try await source.refresh(rejected: "old")
        let saved = try #require(persisted.sets.withLock { $0.last })
        #expect(saved.accessToken == token)
        #expect(saved.refreshToken?.hasPrefix("rotated-") == true)
        #expect(saved.expiresAt != nil)
        #expect(await source.current.refreshToken == saved.refreshToken)
    }

    @Test func refreshesAheadOfExpiry() async throws {
        let server = try await faultServer()
        let soon = try refresher(server, refreshToken: "good", expiresAt: Date().addingTimeInterval(30))
        #expect(try await soon.accessToken().hasPrefix("at-"))
        let later = try refresher(server, refreshToken: "good", expiresAt: Date().addingTimeInterval(3600))
        #expect(try await later.accessToken() == "old")
    }

    @Test func invalidGrantAsksToLogInAgain() async throws {
        let server = try await faultServer()
        let source = try refresher(server, refreshToken: "bad")
        let error = await #expect(throws: ProviderError.self) { try await source.refresh(rejected: "old") }
        #expect(error?.code == .unauthorized)
        #expect(error?.message.contains("cloudsync login music") == true)
        #expect(error?.message.contains("invalid_grant") == true)
        #expect(error?.message.contains("bad") == false)
    }

    /// A network's login page answering in the token endpoint's place is named as such, not taken for a refusal
    /// (which would send the user to log in again for nothing); nothing is stored.
    @Test func aLoginPageInsteadOfATokenIsNamedAndStoresNothing() async throws {
        let server = try await faultServer()
        let persisted = Persisted()
        let source = OAuthRefresher(remoteName: "music", tokens: TokenSet(accessToken: "old", refreshToken: "good"),
                                    client: .init(tokenURL: server.url("/portal"), clientID: "cid", clientSecret: "sec"),
                                    transport: try CurlTransport()) { set in persisted.sets.withLock { $0.append(set) } }
        let error = await #expect(throws: ProviderError.self) { try await source.refresh(rejected: "old") }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message.contains("answered an HTML page, not a token") == true && error?.message.contains("login page") == true,
                "\(error?.message ?? "")")
        #expect(persisted.sets.withLock { $0.isEmpty })
        #expect(await source.current.refreshToken == "good")
    }

    @Test func noRefreshTokenAsksToLogInAgain() async throws {
        let server = try await faultServer()
        let source = try refresher(server, refreshToken: nil)
        let error = await #expect(throws: ProviderError.self) { try await source.refresh(rejected: "old") }
        #expect(error?.code == .unauthorized)
    }

    @Test func apiClientRefreshesOnceOnTokenExpired() async throws {
        let server = try await faultServer()
        let source = try refresher(server, refreshToken: "good")
        let seen = Mutex<[String]>([])
        let client = APIClient(transport: try CurlTransport(), pacer: Pacer(), tokens: source) { response in
            let echo = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
            let auth = (echo?["headers"] as? [String: String])?["authorization"] ?? ""
            seen.withLock { $0.append(auth) }
            return auth == "Bearer old" ? ProviderError(.tokenExpired, "expired") : nil
        }
        _ = try await client.send(HTTPRequest(url: server.url("/echo")))
        let auths = seen.withLock { $0 }
        #expect(auths.count == 2)
        #expect(auths.first == "Bearer old")
        #expect(auths.last?.hasPrefix("Bearer at-") == true)
    }
}

struct BandwidthTests {
    @Test func bucketAdmitsUntilInDebtThenAsksToWait() {
        let limiter = BandwidthLimiter(bytesPerSecond: 1000, burst: 1000)
        #expect(limiter.admit(5000))
        #expect(!limiter.admit(1))
        #expect(limiter.delayUntilAdmitting() > 1)
        #expect(limiter.delayUntilAdmitting() <= 4)
    }

    @Test(.timeLimit(.minutes(1)))
    func limitedDownloadStillDeliversEveryByte() async throws {
        let server = try await faultServer()
        var options = CurlTransportOptions()
        options.bandwidth = BandwidthLimiter(bytesPerSecond: 4 * 1024 * 1024)
        let transport = try CurlTransport(options: options)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<3 {
                group.addTask {
                    let sink = MemorySink()
                    let size = 1_500_000 + i
                    _ = try await transport.download(HTTPRequest(url: server.url("/data/\(size)")), range: nil, ifRange: nil, into: sink)
                    return sink.assembled(0..<Int64(size)) == served(size)
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }
}
