import CloudSyncCore
import Foundation

/// A provider as the registry lists it: its facts (`ProviderDescriptor`) and the factory that builds it for one
/// remote. Declared in the provider's folder (`Providers/<Name>/<Name>Descriptor.swift`).
public struct ProviderEntry: Sendable {
    public let descriptor: ProviderDescriptor
    /// Builds the provider of one remote. Errors are `ProviderError` (`.configuration`, `.unauthorized`).
    public let make: @Sendable (ProviderBuild) throws -> any Provider

    public init(descriptor: ProviderDescriptor, make: @escaping @Sendable (ProviderBuild) throws -> any Provider) {
        self.descriptor = descriptor
        self.make = make
    }
}

/// Everything a factory gets to build one remote's provider: the remote's settings from the config, the shared
/// transport and the remote's pacer, and the credentials the caller resolves (tokens, passwords) so that providers
/// never read token stores or run commands.
public struct ProviderBuild: Sendable {
    /// The remote's name from the config, used in messages.
    public var remoteName: String
    /// The remote folder mirrored ("/" = everything).
    public var root: String
    /// `api_url`, `content_url` and `url` as configured (nil: the provider's defaults).
    public var apiURL: URL?
    public var contentURL: URL?
    public var url: URL?
    /// `token_url` as configured, else the descriptor's; nil for providers without OAuth.
    public var tokenURL: URL?
    /// The provider-specific options (`ProviderDescriptor.options`).
    public var options: ProviderOptions
    public var transport: any Transport
    public var pacer: Pacer
    public var audio: AudioFilter
    public var logger: Logger
    /// The remote's OAuth tokens (stored login, else the config's), refreshed at `tokenURL`.
    public var tokens: @Sendable () throws -> any TokenSource
    /// User and password: the config's `user`/`password` (or `password_command`), else the login's.
    public var password: @Sendable () throws -> (user: String, password: String)
    /// A fixed token: the config's `access_token`, else the one `login --token-json` stored.
    public var staticToken: @Sendable () throws -> String

    public init(remoteName: String, root: String, apiURL: URL? = nil, contentURL: URL? = nil, url: URL? = nil,
                tokenURL: URL? = nil, options: ProviderOptions = ProviderOptions(), transport: any Transport, pacer: Pacer,
                audio: AudioFilter, logger: Logger,
                tokens: @escaping @Sendable () throws -> any TokenSource,
                password: @escaping @Sendable () throws -> (user: String, password: String),
                staticToken: @escaping @Sendable () throws -> String) {
        self.remoteName = remoteName
        self.root = root
        self.apiURL = apiURL
        self.contentURL = contentURL
        self.url = url
        self.tokenURL = tokenURL
        self.options = options
        self.transport = transport
        self.pacer = pacer
        self.audio = audio
        self.logger = logger
        self.tokens = tokens
        self.password = password
        self.staticToken = staticToken
    }
}

/// A URL from a literal known to be valid (descriptors' endpoints).
public func builtInURL(_ text: StaticString) -> URL {
    guard let url = URL(string: "\(text)") else { preconditionFailure("invalid built-in URL \(text)") }
    return url
}
