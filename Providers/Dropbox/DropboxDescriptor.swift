import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// What Config, Auth and Commands know about Dropbox (API v2), and how a remote becomes a `DropboxProvider`.
public enum DropboxDescriptor {
    /// The token endpoint: the refresh grant (no new refresh token comes back).
    public static let tokenURL = builtInURL("https://api.dropboxapi.com/oauth2/token")

    public static let descriptor = ProviderDescriptor(
        kind: "dropbox", displayName: "Dropbox",
        credential: { _ in .oauth },
        oauth: OAuthFacts(
            tokenURL: tokenURL,
            authorizeURL: builtInURL("https://www.dropbox.com/oauth2/authorize"),
            // Scopes are fixed in the app's registration; Dropbox has no device flow.
            appConsole: "Dropbox (https://www.dropbox.com/developers/apps)",
            flow: .authorizationCode(AuthorizationCodeLogin(redirect: .paste(fixedRedirect: nil), sendsScope: false,
                                                            extraParameters: [("token_access_type", "offline")]))),
        apiURL: DropboxOptions.defaultAPIURL,
        accountCheck: .json(method: "POST", path: "/2/users/get_current_account",
                            accountPaths: [["email"], ["name", "display_name"]]))

    public static let entry = ProviderEntry(descriptor: descriptor) { build in
        var options = DropboxOptions(remoteName: build.remoteName, root: build.root)
        if let url = build.apiURL { options.apiURL = url }
        if let url = build.contentURL { options.contentURL = url }
        if let url = build.tokenURL { options.tokenURL = url }
        return DropboxProvider(options: options, transport: build.transport, pacer: build.pacer, tokens: try build.tokens(),
                               audio: build.audio, logger: build.logger)
    }
}
