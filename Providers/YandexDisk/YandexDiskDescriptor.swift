import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// What Config, Auth and Commands know about Yandex.Disk (REST API v1), and how a remote becomes a `YandexDiskProvider`.
public enum YandexDiskDescriptor {
    /// Where refresh tokens are exchanged.
    public static let tokenURL = builtInURL("https://oauth.yandex.ru/token")

    public static let descriptor = ProviderDescriptor(
        kind: "yandex", displayName: "Yandex.Disk",
        credential: { _ in .oauth },
        oauth: OAuthFacts(
            tokenURL: tokenURL,
            authorizeURL: builtInURL("https://oauth.yandex.ru/authorize"),
            deviceURL: builtInURL("https://oauth.yandex.ru/device/code"),
            // Scopes are fixed in the app's registration.
            appConsole: "Yandex OAuth (https://oauth.yandex.com/client/new)",
            // When the device endpoint refuses the client (4xx): the confirmation code Yandex shows on its own page.
            flow: .deviceCode(.yandex, fallback: AuthorizationCodeLogin(
                redirect: .paste(fixedRedirect: "https://oauth.yandex.ru/verification_code"), sendsScope: false,
                method: "confirmation code"))),
        authorizationScheme: "OAuth",
        apiURL: YandexOptions.defaultAPIURL,
        accountCheck: .json(method: "GET", path: "/v1/disk/", accountPaths: [["user", "login"], ["user", "display_name"]]))

    public static let entry = ProviderEntry(descriptor: descriptor) { build in
        var options = YandexOptions(remoteName: build.remoteName, root: build.root)
        if let url = build.apiURL { options.apiURL = url }
        return YandexDiskProvider(options: options, transport: build.transport, pacer: build.pacer, tokens: try build.tokens(),
                                  audio: build.audio, logger: build.logger)
    }
}
