import CloudSyncCore
import Foundation

/// Supplies the access token of one remote and refreshes it. One refresh is shared by concurrent callers.
public protocol TokenSource: Sendable {
    /// A token valid for at least a minute, refreshing ahead of expiry when needed.
    /// Throws `ProviderError(.unauthorized)` when no token can be had (log in again).
    func accessToken() async throws -> String

    /// Called after the server rejected `rejected` as expired. Returns a fresh token (refreshing once, or
    /// returning a token another caller already refreshed). Throws `.unauthorized` when refresh is impossible.
    func refresh(rejected: String) async throws -> String
}

/// A token given in the config or environment, with no way to refresh it.
public struct StaticTokenSource: TokenSource {
    let token: String
    let remoteName: String

    public init(token: String, remoteName: String) {
        self.token = token
        self.remoteName = remoteName
    }

    public func accessToken() async throws -> String { token }

    public func refresh(rejected: String) async throws -> String {
        throw ProviderError(.unauthorized,
            "the access token of remote '\(remoteName)' was refused and cannot be refreshed; run `cloudsync login \(remoteName)` or set a new access_token")
    }
}
