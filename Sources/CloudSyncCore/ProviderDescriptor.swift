import Foundation

/// A provider's name in the config (`provider = "…"`), `--provider` and the token store: "dropbox", "webdav".
public struct ProviderKind: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }
}

/// What the layers above a provider (Config, Auth, Commands) know about it, declared by the provider in its own
/// folder (`Providers/<Name>/<Name>Descriptor.swift`) and listed once in `CloudSyncProviders/ProviderRegistry.swift`.
/// Pure data: nothing here talks to the network. The factory that builds the provider from these facts is
/// `ProviderEntry` (CloudSyncHTTP), which carries a descriptor.
public struct ProviderDescriptor: Sendable {
    /// The config name (`provider = "gdrive"`), also the token store's and `--provider`'s.
    public var kind: ProviderKind
    /// Other names the config and `--provider` accept for it (lowercase).
    public var aliases: [String]
    /// The name people know, for messages ("Google Drive").
    public var displayName: String
    /// How `cloudsync login` obtains credentials, and which credential a remote uses (it may depend on options).
    public var credential: @Sendable (ProviderOptions) -> CredentialKind
    /// OAuth endpoints, scopes and the login flow; nil for providers without OAuth.
    public var oauth: OAuthFacts?
    /// The `Authorization` scheme of the API ("Bearer"; Yandex: "OAuth").
    public var authorizationScheme: String
    /// The documented `https://HOST` of the API (`api_url` replaces it): the one host the "who am I" check and the
    /// provider's API calls send the token to.
    public var apiURL: URL?
    /// The one cheap authenticated request that proves fresh credentials work.
    public var accountCheck: AccountCheck
    /// Keys only this provider accepts in its `[remote.NAME]` section, with their validation, in `config show` order.
    public var options: [ProviderOption]

    public init(kind: ProviderKind, aliases: [String] = [], displayName: String,
                credential: @escaping @Sendable (ProviderOptions) -> CredentialKind, oauth: OAuthFacts? = nil,
                authorizationScheme: String = "Bearer", apiURL: URL? = nil, accountCheck: AccountCheck,
                options: [ProviderOption] = []) {
        self.kind = kind
        self.aliases = aliases
        self.displayName = displayName
        self.credential = credential
        self.oauth = oauth
        self.authorizationScheme = authorizationScheme
        self.apiURL = apiURL
        self.accountCheck = accountCheck
        self.options = options
    }

    /// The declared option named `key`, if any.
    public func option(_ key: String) -> ProviderOption? { options.first { $0.key == key } }
}

/// The credential a remote uses, which decides what `login` does, what `config show` reports and what the factory
/// asks for.
public enum CredentialKind: Sendable, Hashable {
    /// OAuth tokens from `login` (or `refresh_token`/`access_token` in the config), refreshed at the token endpoint.
    case oauth
    /// A user name and password (config `password`/`password_command`, else the one `login` typed and stored).
    case password
    /// A fixed token (config `access_token`, else `login --token-json`); `setting` names the option that chose it,
    /// e.g. `auth = "bearer"`, for messages.
    case staticToken(setting: String)
}

/// A provider's OAuth 2 facts: endpoints, scopes, the app console, and how `login` runs.
public struct OAuthFacts: Sendable {
    /// Token endpoint (`token_url` default).
    public var tokenURL: URL
    /// Authorization endpoint (`auth_url` default) a person opens in a browser; nil when there is none.
    public var authorizeURL: URL?
    /// Device-authorization endpoint (`device_url` default); nil when the provider has no usable one.
    public var deviceURL: URL?
    /// Scopes requested at login; empty when the app's registration fixes them.
    public var scopes: [String]
    /// Whether the refresh grant must repeat `scope` (Microsoft).
    public var scopeOnRefresh: Bool
    /// Where a person registers an app and gets a client_id, for the "no client_id" message.
    public var appConsole: String
    /// Which flow `login` runs.
    public var flow: LoginFlow

    public init(tokenURL: URL, authorizeURL: URL? = nil, deviceURL: URL? = nil, scopes: [String] = [],
                scopeOnRefresh: Bool = false, appConsole: String, flow: LoginFlow) {
        self.tokenURL = tokenURL
        self.authorizeURL = authorizeURL
        self.deviceURL = deviceURL
        self.scopes = scopes
        self.scopeOnRefresh = scopeOnRefresh
        self.appConsole = appConsole
        self.flow = flow
    }

    /// The scopes as one `scope` value, nil when there are none.
    public var scope: String? { scopes.isEmpty ? nil : scopes.joined(separator: " ") }
}

/// The interactive OAuth flow of `cloudsync login`.
public enum LoginFlow: Sendable {
    /// Device code (RFC 8628, or Yandex's dialect); when the device endpoint refuses the client, `fallback` if any.
    case deviceCode(DeviceCodeDialect, fallback: AuthorizationCodeLogin?)
    /// Authorization code with PKCE.
    case authorizationCode(AuthorizationCodeLogin)
}

/// Which device-code dialect a provider speaks.
public enum DeviceCodeDialect: Sendable, Hashable {
    case rfc8628
    case yandex
}

/// An authorization-code login: how the code comes back, and what else the authorization URL carries.
public struct AuthorizationCodeLogin: Sendable {
    public enum Redirect: Sendable, Hashable {
        /// The person pastes the code; `fixedRedirect` is the provider's own page that shows it (nil: none sent).
        case paste(fixedRedirect: String?)
        /// A loopback listener receives the redirect (the person may paste the address instead).
        case loopback
    }

    public var redirect: Redirect
    /// Whether the authorization request carries the provider's scopes.
    public var sendsScope: Bool
    public var extraParameters: [(String, String)]
    /// How the login summary names the method ("pasted code", "confirmation code").
    public var method: String

    public init(redirect: Redirect, sendsScope: Bool = true, extraParameters: [(String, String)] = [], method: String = "pasted code") {
        self.redirect = redirect
        self.sendsScope = sendsScope
        self.extraParameters = extraParameters
        self.method = method
    }
}

/// The "who am I" request that proves fresh credentials, and where the answer names the account.
public enum AccountCheck: Sendable {
    /// `method` `path` (appended to the API URL) with the token; the account is the first string found at one of
    /// `accountPaths` (keys into nested JSON objects), in order.
    case json(method: String, path: String, accountPaths: [[String]])
    /// `PROPFIND` Depth 0 on the remote's `url` (WebDAV): no account name in the answer.
    case propfind
}

/// A key only some providers accept in `[remote.NAME]`, with its validation.
public struct ProviderOption: Sendable {
    public enum Value: Sendable {
        /// A key every provider's schema parses (url, user, password, password_command), accepted only by
        /// the providers that declare it.
        case shared
        /// `true` or `false`; `config show` always prints it.
        case boolean(default: Bool)
        /// One of `choices`; `config show` always prints it. `invalid` replaces the generic message for a value
        /// that is not one of them (or not a string).
        case choice([String], default: String, invalid: String? = nil)
    }

    public var key: String
    public var value: Value
    /// When set, a remote of this provider must give the key: `example` is the value shown in the error.
    public var requiredExample: String?

    public init(_ key: String, _ value: Value, requiredExample: String? = nil) {
        self.key = key
        self.value = value
        self.requiredExample = requiredExample
    }
}

/// The values of a remote's provider-specific options (`ProviderOption` `.boolean` and `.choice`) as the config
/// gave them; reading an absent key gives the declared default.
public struct ProviderOptions: Sendable, Hashable {
    public enum Value: Sendable, Hashable {
        case text(String)
        case boolean(Bool)
    }

    public var values: [String: Value]

    public init(_ values: [String: Value] = [:]) { self.values = values }

    public subscript(key: String) -> Value? {
        get { values[key] }
        set { values[key] = newValue }
    }

    /// The text value of `key`, else `fallback`.
    public func text(_ key: String, default fallback: String) -> String {
        if case .text(let value)? = values[key] { return value }
        return fallback
    }

    /// The boolean value of `key`, else `fallback`.
    public func boolean(_ key: String, default fallback: Bool) -> Bool {
        if case .boolean(let value)? = values[key] { return value }
        return fallback
    }
}

/// The providers this build knows, in the order messages list them.
public struct ProviderCatalog: Sendable {
    public let descriptors: [ProviderDescriptor]

    public init(_ descriptors: [ProviderDescriptor]) { self.descriptors = descriptors }

    /// The descriptor whose kind or alias is `name` (exact, lowercase as written in the config).
    public func descriptor(named name: String) -> ProviderDescriptor? {
        descriptors.first { $0.kind.rawValue == name || $0.aliases.contains(name) }
    }

    public func descriptor(_ kind: ProviderKind) -> ProviderDescriptor? { descriptor(named: kind.rawValue) }

    /// Every kind, in order ("dropbox", "gdrive", …).
    public var names: [String] { descriptors.map(\.kind.rawValue) }

    /// The providers that declare `key` as one of their options, in catalog order.
    public func providers(declaring key: String) -> [ProviderKind] {
        descriptors.filter { $0.option(key) != nil }.map(\.kind)
    }

    /// Every declared option key, each once, in catalog order.
    public var optionKeys: [String] {
        var seen: Set<String> = []
        return descriptors.flatMap(\.options).map(\.key).filter { seen.insert($0).inserted }
    }
}
