import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// What Config, Auth and Commands know about OneDrive (Microsoft Graph), and how a remote becomes a `OneDriveProvider`.
public enum OneDriveDescriptor {
    /// The Microsoft identity platform v2.0 token endpoint for both personal and work/school accounts.
    public static let tokenURL = builtInURL("https://login.microsoftonline.com/common/oauth2/v2.0/token")
    /// Read-only scopes plus `offline_access` (which makes the token endpoint return a refresh token); Microsoft
    /// wants them on every refresh too.
    public static let scopes = ["Files.Read", "Files.Read.All", "offline_access"]

    public static let descriptor = ProviderDescriptor(
        kind: "onedrive", displayName: "OneDrive",
        credential: { _ in .oauth },
        oauth: OAuthFacts(
            tokenURL: tokenURL,
            authorizeURL: builtInURL("https://login.microsoftonline.com/common/oauth2/v2.0/authorize"),
            deviceURL: builtInURL("https://login.microsoftonline.com/common/oauth2/v2.0/devicecode"),
            scopes: scopes, scopeOnRefresh: true,
            appConsole: "Microsoft Entra (https://entra.microsoft.com → App registrations, allow public client flows)",
            flow: .deviceCode(.rfc8628, fallback: nil)),
        apiURL: OneDriveOptions.defaultAPIURL,
        accountCheck: .json(method: "GET", path: "/v1.0/me/drive", accountPaths: [["owner", "user", "displayName"]]))

    public static let entry = ProviderEntry(descriptor: descriptor) { build in
        var options = OneDriveOptions(remoteName: build.remoteName, root: build.root)
        if let url = build.apiURL { options.apiURL = url }
        if let url = build.tokenURL { options.tokenURL = url }
        return OneDriveProvider(options: options, transport: build.transport, pacer: build.pacer, tokens: try build.tokens(),
                                audio: build.audio, logger: build.logger)
    }
}
