import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// A `TokenSource` backed by the token store, safe when several processes (a cron pull and `serve`) and
/// several instances share one remote.
///
/// - `accessToken()` returns the token in memory while it is valid for more than `margin` seconds (60).
/// - Otherwise, and on `refresh(rejected:)`: takes the flock on `tokens/NAME.lock`, re-reads `NAME.json`
///   (another process may have refreshed), and refreshes only if the file's token is still the stale or
///   rejected one. The new set (with a rotated refresh token, if the server sent one) is saved atomically
///   before the lock is released and before any caller sees it, so a rotated refresh token is never lost
///   and never used twice.
/// - Concurrent callers in one instance share one refresh.
/// - Errors are `ProviderError`: `.unauthorized` (nothing stored, refresh refused: run `cloudsync login
///   NAME`), `.transient`/`.rateLimited` (token endpoint unreachable or failing; retry later).
public actor StoredTokenSource: TokenSource {
    private let remoteName: String
    private let provider: String
    private let store: TokenStore
    private let client: OAuthRefresher.Client
    private let transport: any Transport
    private let margin: TimeInterval
    private let logger: Logger
    private let now: @Sendable () -> Date
    /// Used only when the store has nothing for the remote: config tokens, saved on the first refresh.
    private let seed: TokenSet?
    private var cached: TokenSet?
    private var inFlight: Task<String, any Error>?

    public init(remoteName: String, provider: String, store: TokenStore, client: OAuthRefresher.Client,
                transport: any Transport, seed: TokenSet? = nil, margin: TimeInterval = 60, logger: Logger = .silent,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.remoteName = remoteName
        self.provider = provider
        self.store = store
        self.client = client
        self.transport = transport
        self.seed = seed
        self.margin = margin
        self.logger = logger
        self.now = now
    }

    public func accessToken() async throws -> String {
        if cached == nil { cached = try loadTokens() }
        if let cached, isFresh(cached) { return cached.accessToken }
        return try await shared(rejected: nil)
    }

    public func refresh(rejected: String) async throws -> String {
        if let cached, cached.accessToken != rejected, isFresh(cached) { return cached.accessToken }
        return try await shared(rejected: rejected)
    }

    private func isFresh(_ tokens: TokenSet) -> Bool {
        guard !tokens.accessToken.isEmpty else { return false }
        guard let expiresAt = tokens.expiresAt else { return true }
        return expiresAt.timeIntervalSince(now()) > margin
    }

    private func shared(rejected: String?) async throws -> String {
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.refreshUnderLock(rejected: rejected) }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value
    }

    private func loadTokens() throws -> TokenSet? {
        do {
            return try store.load(remoteName, for: provider)?.tokenSet ?? seed
        } catch {
            throw ProviderError(.unauthorized, error.message + " (remote '\(remoteName)')", cause: error)
        }
    }

    private func refreshUnderLock(rejected: String?) async throws -> String {
        let lock: TokenFileLock
        do {
            lock = try await store.lock(remoteName)
        } catch let error as AuthError {
            throw ProviderError(.transient, error.message, cause: error)
        }
        defer { lock.unlock() }
        let stored: StoredCredentials?
        do { stored = try store.load(remoteName, for: provider) } catch {
            throw ProviderError(.unauthorized, error.message, cause: error)
        }
        guard let current = stored?.tokenSet ?? seed else {
            throw ProviderError(.unauthorized, "remote '\(remoteName)' has no stored tokens; run `cloudsync login \(remoteName)`")
        }
        // Another process or instance may have refreshed while we waited for the lock.
        if isFresh(current), rejected == nil || current.accessToken != rejected {
            if current != cached { logger.debug("remote '\(remoteName)': using the token another process refreshed") }
            cached = current
            return current.accessToken
        }
        let base = stored ?? StoredCredentials(provider: provider)
        let store = self.store
        let name = remoteName
        let provider = self.provider
        let refresher = OAuthRefresher(remoteName: remoteName, tokens: current, client: client, transport: transport,
                                       margin: margin, logger: logger, now: now) { fresh in
            var updated = base
            updated.provider = updated.provider ?? provider
            updated.accessToken = fresh.accessToken
            updated.refreshToken = fresh.refreshToken
            updated.expiresAt = fresh.expiresAt
            updated.tokenType = fresh.tokenType
            do { try store.save(updated, for: name) } catch {
                throw ProviderError(.unauthorized, "refreshed the token of remote '\(name)' but could not store it: \(describe(error))", cause: error)
            }
        }
        _ = try await refresher.refresh(rejected: current.accessToken)
        let fresh = await refresher.current
        cached = fresh
        logger.info("remote '\(remoteName)': access token refreshed\(fresh.expiresAt.map { ", valid until \(RFC3339.format($0))" } ?? "")")
        return fresh.accessToken
    }
}
