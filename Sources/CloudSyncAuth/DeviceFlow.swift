import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// How a login talks to the person: the CLI prints on stderr and reads stdin; tests script it.
/// Texts passed to `show` hold URLs, user codes and instructions, never tokens.
public protocol LoginInteraction: Sendable {
    /// Shows instructions (one or more lines, without a trailing newline).
    func show(_ text: String)
    /// The next line typed or piped (without the newline); nil at end of input. Must return promptly
    /// (throwing `CancellationError`) when the task is cancelled.
    func readLine(prompt: String) async throws -> String?
    /// Like `readLine`, without echo on a terminal.
    func readSecret(prompt: String) async throws -> String?
}

/// PKCE (RFC 7636) with `S256`: a 64-character verifier from 48 random bytes and its challenge.
public struct PKCE: Sendable {
    public let verifier: String
    /// BASE64URL(SHA-256(ASCII(verifier))), unpadded.
    public var challenge: String { Self.challenge(for: verifier) }

    public init(verifier: String) { self.verifier = verifier }

    public static func random() -> PKCE {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<48).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return PKCE(verifier: base64URL(bytes))
    }

    public static func challenge(for verifier: String) -> String {
        var hasher = EVPHasher(.sha256)
        hasher.update(Data(verifier.utf8))
        return base64URL(hasher.digest())
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// The device authorization grant (RFC 8628), in Microsoft's form and in Yandex's.
///
/// Asks `deviceURL` for a device code, shows the verification URL and user code, then polls `tokenURL`
/// every `interval` seconds (as the server said; 5 when absent): `authorization_pending` keeps polling,
/// `slow_down` adds `slowDownIncrement` (5 s) to the interval, `access_denied`/`authorization_declined`
/// throws `.denied`, `expired_token` or the `expires_in` deadline throws `.expired`, other refusals
/// `.invalidGrant`, 5xx answers are retried until the deadline, an unreachable endpoint throws `.network`.
public struct DeviceFlow: Sendable {
    public enum Style: Sendable {
        /// RFC 8628 / Microsoft: `grant_type=urn:ietf:params:oauth:grant-type:device_code&device_code=…`.
        case rfc8628
        /// Yandex: `grant_type=device_code&code=…`, plus `client_secret`.
        case yandex
    }

    public var style: Style
    public var deviceURL: URL
    public var tokenURL: URL
    public var clientID: String
    public var clientSecret: String?
    public var scope: String?
    public var slowDownIncrement: TimeInterval = 5

    public init(style: Style, deviceURL: URL, tokenURL: URL, clientID: String, clientSecret: String?, scope: String?) {
        self.style = style
        self.deviceURL = deviceURL
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scope = scope
    }

    /// Thrown by `start` when the device endpoint refuses the client (4xx): the caller may fall back to
    /// another flow.
    public struct Unsupported: Error, Sendable {
        public let status: Int
        public let error: String
    }

    struct Grant: Sendable {
        let deviceCode: String
        let userCode: String
        let verificationURL: String
        let interval: TimeInterval
        let expiresIn: TimeInterval
    }

    public func run(interaction: any LoginInteraction, transport: any Transport, logger: Logger) async throws -> TokenSet {
        let grant = try await start(transport: transport, logger: logger)
        interaction.show("""
            To authorize cloudsync, open \(grant.verificationURL) in a browser (on any device) and enter the code:

                \(grant.userCode)

            Waiting for you to finish (the code is valid for \(Int(grant.expiresIn / 60)) min)…
            """)
        return try await poll(grant, transport: transport, logger: logger)
    }

    func start(transport: any Transport, logger: Logger) async throws -> Grant {
        var fields = [("client_id", clientID)]
        if let scope { fields.append(("scope", scope)) }
        let request = HTTPRequest(method: "POST", url: deviceURL,
                                  headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                                  body: Data(formEncode(fields).utf8))
        let response: HTTPResponse
        do { response = try await transport.send(request) } catch {
            throw AuthError(.network, "could not reach the device endpoint \(redactedURL(deviceURL)) (\(describe(error))); check the network (and device_url) and run login again",
                            cause: error)
        }
        logger.debug("POST \(redactedURL(deviceURL)) → \(response.status)")
        let json = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        guard (200..<300).contains(response.status) else {
            let code = json?["error"] as? String ?? "http_\(response.status)"
            if (400..<500).contains(response.status) && response.status != 429 {
                throw Unsupported(status: response.status, error: code)
            }
            throw AuthError(.network, "the device endpoint \(redactedURL(deviceURL)) answered HTTP \(response.status) (\(code)); try again later")
        }
        guard let json, let device = json["device_code"] as? String, let user = json["user_code"] as? String,
              let verify = (json["verification_uri"] as? String) ?? (json["verification_url"] as? String) else {
            throw AuthError(.invalidResponse, "the device endpoint \(redactedURL(deviceURL)) answered without device_code, user_code and verification URL; check device_url")
        }
        func number(_ key: String) -> Double? {
            (json[key] as? NSNumber)?.doubleValue ?? (json[key] as? String).flatMap(Double.init)
        }
        return Grant(deviceCode: device, userCode: user, verificationURL: verify,
                     interval: max(0, number("interval") ?? 5), expiresIn: number("expires_in") ?? 600)
    }

    func poll(_ grant: Grant, transport: any Transport, logger: Logger) async throws -> TokenSet {
        let endpoint = TokenEndpoint(url: tokenURL, transport: transport, logger: logger)
        var fields: [(String, String)]
        switch style {
        case .rfc8628:
            fields = [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", grant.deviceCode), ("client_id", clientID)]
        case .yandex:
            fields = [("grant_type", "device_code"), ("code", grant.deviceCode), ("client_id", clientID)]
        }
        if let clientSecret { fields.append(("client_secret", clientSecret)) }
        let deadline = Date().addingTimeInterval(grant.expiresIn)
        var interval = grant.interval
        while true {
            try await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000))
            guard Date() < deadline else {
                throw AuthError(.expired, "the device code expired before the sign-in was finished; nothing was stored. Run login again and finish within \(Int(grant.expiresIn / 60)) min")
            }
            switch try await endpoint.post(fields) {
            case .tokens(let tokens):
                return tokens
            case .error("authorization_pending", _, _):
                continue
            case .error("slow_down", _, _):
                interval += slowDownIncrement
                logger.debug("device flow: slow_down, polling every \(interval) s")
            case .error(let code, let status, let wait) where status >= 500 || status == 429:
                logger.debug("device flow: token endpoint answered HTTP \(status) (\(code)); polling on")
                if let wait { try await Task.sleep(nanoseconds: UInt64(min(wait, 60) * 1_000_000_000)) }
            case .error(let code, let status, _):
                throw grantError(code, status: status, endpoint: tokenURL, what: "device code")
            }
        }
    }
}
