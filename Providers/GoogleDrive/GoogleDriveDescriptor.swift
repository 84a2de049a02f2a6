import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// What Config, Auth and Commands know about Google Drive (API v3), and how a remote becomes a `GoogleDriveProvider`.
public enum GoogleDriveDescriptor {
    public static let tokenURL = builtInURL("https://oauth2.googleapis.com/token")

    public static let descriptor = ProviderDescriptor(
        kind: "gdrive", displayName: "Google Drive",
        credential: { _ in .oauth },
        oauth: OAuthFacts(
            tokenURL: tokenURL,
            authorizeURL: builtInURL("https://accounts.google.com/o/oauth2/auth"),
            // Google's device flow cannot grant a Drive scope that reads an existing library: no device_url.
            scopes: ["https://www.googleapis.com/auth/drive.readonly"],
            appConsole: "Google Cloud (https://console.cloud.google.com/apis/credentials, type \"Desktop app\")",
            // Named for both ways it ends: the loopback redirect, or the address pasted on a headless box.
            flow: .authorizationCode(AuthorizationCodeLogin(redirect: .loopback,
                                                            extraParameters: [("access_type", "offline"), ("prompt", "consent")],
                                                            method: "browser authorization"))),
        apiURL: GoogleDriveOptions.defaultAPIURL,
        accountCheck: .json(method: "GET", path: "/drive/v3/about?fields=user",
                            accountPaths: [["user", "emailAddress"], ["user", "displayName"]]),
        options: [
            ProviderOption("acknowledge_abuse", .boolean(default: false)),
            ProviderOption("listing", .choice(["flat", "walk"], default: "flat",
                                              invalid: "listing must be \"flat\" (one enumeration of the drive) or \"walk\" (the root's folders only)")),
        ])

    public static let entry = ProviderEntry(descriptor: descriptor) { build in
        let strategy = GoogleDriveOptions.ListingStrategy(rawValue: build.options.text("listing", default: "flat")) ?? .flat
        var options = GoogleDriveOptions(remoteName: build.remoteName, root: build.root,
                                         acknowledgeAbuse: build.options.boolean("acknowledge_abuse", default: false),
                                         listingStrategy: strategy)
        if let url = build.apiURL { options.apiURL = url }
        if let url = build.contentURL { options.contentURL = url }
        if let url = build.tokenURL { options.tokenURL = url }
        return GoogleDriveProvider(options: options, transport: build.transport, pacer: build.pacer, tokens: try build.tokens(),
                                   audio: build.audio, logger: build.logger)
    }
}
