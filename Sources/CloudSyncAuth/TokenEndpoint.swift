import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// One POST to an OAuth token endpoint (RFC 6749 §4.1.3, §5; RFC 8628 §3.4) and the reading of its answer.
struct TokenEndpoint: Sendable {
    let url: URL
    let transport: any Transport
    let logger: Logger

    /// The answer: tokens, or the `error` string of a 4xx (e.g. `authorization_pending`).
    enum Answer: Sendable {
        case tokens(TokenSet)
        case error(String, status: Int, retryAfter: TimeInterval?)
    }

    /// Sends `fields` form-encoded. Throws `AuthError(.network)` when the endpoint cannot be reached and
    /// `.invalidResponse` for a 2xx without `access_token`. Statuses ≥ 400 come back as `.error`
    /// (`server_error` for a 5xx without a body).
    func post(_ fields: [(String, String)]) async throws -> Answer {
        let request = HTTPRequest(method: "POST", url: url,
                                  headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                                  body: Data(formEncode(fields).utf8))
        let started = Date()
        let response: HTTPResponse
        do {
            response = try await transport.send(request)
        } catch {
            throw AuthError(.network, "could not reach the token endpoint \(redactedURL(url)) (\(describe(error))); check the network (and token_url) and run login again",
                            cause: error)
        }
        let json = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        guard (200..<300).contains(response.status) else {
            let code = json?["error"] as? String ?? (response.status >= 500 ? "server_error" : "http_\(response.status)")
            logger.debug("POST \(redactedURL(url)) → \(response.status) \(code)")
            return .error(code, status: response.status, retryAfter: retryAfter(from: response.headers))
        }
        logger.debug("POST \(redactedURL(url)) → \(response.status)")
        guard let json else {
            if response.head.isHTMLPage {
                throw AuthError(.invalidResponse, "the token endpoint \(redactedURL(url)) answered an HTML page, not JSON: \(HTTPResponseHead.strangerAdvice); else check token_url")
            }
            throw AuthError(.invalidResponse, "the token endpoint \(redactedURL(url)) answered HTTP \(response.status) without JSON; check token_url")
        }
        return .tokens(try Self.tokens(from: json, obtainedAt: started, endpoint: url))
    }

    /// A token set from a token-endpoint JSON object (`access_token`, `refresh_token`, `expires_in`,
    /// `token_type`).
    static func tokens(from json: [String: Any], obtainedAt: Date, endpoint: URL) throws(AuthError) -> TokenSet {
        guard let access = json["access_token"] as? String, !access.isEmpty else {
            throw AuthError(.invalidResponse, "the token endpoint \(redactedURL(endpoint)) answered without an access_token; check token_url")
        }
        let expiresIn = (json["expires_in"] as? NSNumber)?.doubleValue ?? (json["expires_in"] as? String).flatMap(Double.init)
        return TokenSet(accessToken: access,
                        refreshToken: (json["refresh_token"] as? String).flatMap(nonEmpty),
                        expiresAt: expiresIn.map { obtainedAt.addingTimeInterval($0) },
                        tokenType: json["token_type"] as? String)
    }
}

/// The error for a refused authorization-code or device grant, from the endpoint's `error` string.
func grantError(_ code: String, status: Int, endpoint: URL, what: String) -> AuthError {
    switch code {
    case "access_denied", "authorization_declined":
        return AuthError(.denied, "consent was refused at the provider (\(code)); nothing was stored. Run login again and allow access")
    case "expired_token", "code_expired":
        return AuthError(.expired, "the \(what) expired before it was used (\(code)); nothing was stored. Run login again and finish within the time shown")
    case "invalid_grant", "bad_verification_code":
        return AuthError(.invalidGrant, "the provider refused the \(what) (\(code)): it is wrong, expired or already used; nothing was stored. Run login again and paste the newest code exactly")
    case "invalid_client", "unauthorized_client":
        return AuthError(.invalidGrant, "the provider refused the client (\(code)); check client_id and client_secret of the remote and the app's registration (see docs/login.md)")
    default:
        if status >= 500 || status == 429 {
            return AuthError(.network, "the token endpoint \(redactedURL(endpoint)) kept failing (HTTP \(status)); nothing was stored. Try again later")
        }
        return AuthError(.invalidGrant, "the token endpoint \(redactedURL(endpoint)) refused the \(what) (HTTP \(status), \(code)); nothing was stored")
    }
}

/// `application/x-www-form-urlencoded`: the kit's one encoder.
func formEncode(_ fields: [(String, String)]) -> String { PercentEncoding.form(fields) }

/// A URL with `query` appended, percent-encoded as a form.
func url(_ base: URL, adding query: [(String, String)]) -> URL {
    let separator = base.absoluteString.contains("?") ? "&" : "?"
    return URL(string: base.absoluteString + separator + formEncode(query).replacingOccurrences(of: "+", with: "%20")) ?? base
}

/// An error's message without secrets (`ProviderError` messages are already safe).
func describe(_ error: any Error) -> String {
    if let e = error as? ProviderError { return e.message }
    if let e = error as? AuthError { return e.message }
    return String(describing: type(of: error))
}
