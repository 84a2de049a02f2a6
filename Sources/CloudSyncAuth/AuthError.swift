import CloudSyncCore
import Foundation

/// Why a login or a token-store operation failed. Messages say what to do next and never contain a token,
/// a code, a password or a signed URL.
public struct AuthError: Error, Sendable, CustomStringConvertible, ExitCodeProviding {
    public enum Code: String, Sendable {
        /// `client_id` (or another required setting) is missing from the remote's config (exit 3).
        case missingClientID
        /// The remote's settings cannot support a login (unknown provider, missing url) (exit 3).
        case configuration
        /// The person refused consent (`access_denied`, `authorization_declined`) (exit 4).
        case denied
        /// The device code or the wait for it expired (`expired_token`) (exit 4).
        case expired
        /// The pasted code or a refresh token was refused (`invalid_grant`), or a password was wrong (exit 4).
        case invalidGrant
        /// The endpoint could not be reached or kept failing (exit 5, like any unavailable remote: nothing was
        /// stored; log in again once the network is back).
        case network
        /// An endpoint answered something that does not follow OAuth 2 / the provider's API (exit 4).
        case invalidResponse
        /// The token was obtained but the provider refused the proving request (exit 4).
        case verificationFailed
        /// Input ended or was empty where a code or password was expected (exit 4).
        case noInput
        /// The token store could not be read or written (exit 74).
        case storage
    }

    public var code: Code
    public var message: String
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { message }

    public var exitCode: ExitCode {
        switch code {
        case .missingClientID, .configuration: .config
        case .storage: .ioError
        case .network: .unavailable
        case .denied, .expired, .invalidGrant, .invalidResponse, .verificationFailed, .noInput: .auth
        }
    }
}
