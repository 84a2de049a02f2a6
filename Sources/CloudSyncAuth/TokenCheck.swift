import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// The one cheap authenticated request that proves fresh credentials work: the provider's
/// `ProviderDescriptor.accountCheck` (base URL from `api_url`, else the descriptor's documented host), e.g.
/// Dropbox `POST /2/users/get_current_account`, Graph `GET /v1.0/me/drive`, Drive `GET /drive/v3/about?fields=user`,
/// Yandex `GET /v1/disk/`, WebDAV `PROPFIND` Depth 0 on the url.
struct TokenCheck: Sendable {
    let remote: LoginRemote
    let transport: any Transport
    let logger: Logger

    /// Sends the request with `tokens` and returns the account's name when the answer has one.
    /// Throws `.verificationFailed` on 401/403 and other refusals, `.network` when unreachable.
    func prove(_ tokens: TokenSet) async throws -> String? {
        let provider = remote.provider
        switch provider.accountCheck {
        case .propfind:
            guard let url = remote.url else { return nil }
            try await send(HTTPRequest(method: "PROPFIND", url: url, headers: propfindHeaders(auth: "Bearer \(tokens.accessToken)"),
                                       body: Self.propfindBody))
            return nil
        case .json(let method, let path, let accountPaths):
            guard let base = remote.apiURL ?? provider.apiURL else { return nil }
            let root = base.absoluteString.hasSuffix("/") ? String(base.absoluteString.dropLast()) : base.absoluteString
            let auth = "\(AuthSetup.authScheme(provider).scheme) \(tokens.accessToken)"
            guard let url = URL(string: root + path) else {
                throw AuthError(.configuration, "remote '\(remote.name)': api_url \(redactedURL(base)) does not form a URL")
            }
            let body = try await send(HTTPRequest(method: method, url: url, headers: ["Authorization": auth, "Accept": "application/json"]))
            return Self.account(in: body, at: accountPaths)
        }
    }

    /// PROPFIND Depth 0 with Basic auth: 207 (or 200) means the password works.
    func propfind(url: URL, user: String, password: String) async throws {
        let basic = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        try await send(HTTPRequest(method: "PROPFIND", url: url, headers: propfindHeaders(auth: basic), body: Self.propfindBody))
    }

    private func propfindHeaders(auth: String) -> HTTPHeaders {
        ["Authorization": auth, "Depth": "0", "Content-Type": "application/xml; charset=utf-8"]
    }

    static let propfindBody = Data(#"<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/></d:prop></d:propfind>"#.utf8)

    @discardableResult
    private func send(_ request: HTTPRequest) async throws -> Data {
        let what = "\(request.method) \(redactedURL(request.url))"
        let response: HTTPResponse
        do { response = try await transport.send(request) } catch {
            throw AuthError(.network, "could not reach \(what) to check the new credentials (\(describe(error))); nothing was stored. Check the network and api_url/url, then run login again",
                            cause: error)
        }
        logger.debug("\(what) → \(response.status)")
        switch response.status {
        case 200..<300:
            return response.body
        case 401, 403:
            let password = if case .propfind = remote.provider.accountCheck { true } else { false }
            let what2 = password ? "user name or password" : "new token"
            throw AuthError(password ? .invalidGrant : .verificationFailed,
                            "\(what) refused the \(what2) (HTTP \(response.status)); nothing was stored. Check the account, the app's permissions (docs/login.md) and run login again")
        default:
            throw AuthError(response.status >= 500 ? .network : .verificationFailed,
                            "\(what) answered HTTP \(response.status) while checking the new credentials; nothing was stored. Check api_url/url and run login again")
        }
    }

    /// A display name, e-mail or login from the proving answer: the first string at one of `paths`.
    static func account(in body: Data, at paths: [[String]]) -> String? {
        guard let json = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else { return nil }
        for path in paths {
            var node: Any? = json
            for key in path { node = (node as? [String: Any])?[key] }
            if let found = node as? String { return found }
        }
        return nil
    }
}

/// Reads tokens obtained elsewhere.
enum TokenImport {
    /// Accepts, inside any surrounding text (rclone prints markers around its JSON):
    /// rclone's `{"access_token","token_type","refresh_token","expiry":"RFC 3339"}` (zero time = no expiry),
    /// our token file (same keys), a `TokenSet` JSON (`accessToken`, `refreshToken`, `expiresAt` seconds since
    /// 2001, `tokenType`), or a token-endpoint answer (`expires_in`). Errors never quote the text.
    static func parse(_ text: String) throws(AuthError) -> TokenSet {
        guard let open = text.firstIndex(of: "{"), let close = text.lastIndex(of: "}"), open < close,
              let json = (try? JSONSerialization.jsonObject(with: Data(text[open...close].utf8))) as? [String: Any] else {
            throw AuthError(.invalidResponse, "the token JSON could not be read; give the JSON printed by `rclone authorize` or a token file written by cloudsync")
        }
        let access = (json["access_token"] as? String) ?? (json["accessToken"] as? String)
        let refresh = (json["refresh_token"] as? String) ?? (json["refreshToken"] as? String)
        guard nonEmpty(access) != nil || nonEmpty(refresh) != nil else {
            throw AuthError(.invalidResponse, "the token JSON has neither access_token nor refresh_token")
        }
        var expiry: Date?
        if let text = json["expiry"] as? String {
            expiry = RFC3339.parse(text).flatMap { $0.timeIntervalSince1970 > 0 ? $0 : nil }
        } else if let seconds = (json["expiresAt"] as? NSNumber)?.doubleValue {
            expiry = Date(timeIntervalSinceReferenceDate: seconds)
        } else if let seconds = (json["expires_in"] as? NSNumber)?.doubleValue {
            expiry = Date().addingTimeInterval(seconds)
        }
        if nonEmpty(access) == nil { expiry = .distantPast }
        return TokenSet(accessToken: access ?? "", refreshToken: nonEmpty(refresh), expiresAt: expiry,
                        tokenType: (json["token_type"] as? String) ?? (json["tokenType"] as? String))
    }
}
