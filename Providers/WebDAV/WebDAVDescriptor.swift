import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// What Config, Auth and Commands know about WebDAV (RFC 4918), and how a remote becomes a `WebDAVProvider`.
public enum WebDAVDescriptor {
    /// `auth`: `basic` (user/password), `bearer` (a fixed token) or `oauth` (Yandex's `Authorization: OAuth <token>`).
    public static let authChoices = ["basic", "bearer", "oauth"]

    public static let descriptor = ProviderDescriptor(
        kind: "webdav", displayName: "WebDAV",
        credential: { options in
            let auth = options.text("auth", default: "basic")
            return auth == "basic" ? .password : .staticToken(setting: "auth = \"\(auth)\"")
        },
        accountCheck: .propfind,
        options: [
            ProviderOption("url", .shared, requiredExample: "https://host/path/"),
            ProviderOption("user", .shared),
            ProviderOption("password", .shared),
            ProviderOption("password_command", .shared),
            ProviderOption("auth", .choice(authChoices, default: "basic")),
        ])

    public static let entry = ProviderEntry(descriptor: descriptor) { build in
        guard let url = build.url else {
            throw ProviderError(.configuration, "remote '\(build.remoteName)': webdav needs url")
        }
        let auth: WebDAVOptions.Auth
        switch build.options.text("auth", default: "basic") {
        case "bearer": auth = .bearer(try build.staticToken())
        case "oauth": auth = .oauth(try build.staticToken())
        default: auth = .basic
        }
        let (user, password) = try build.password()
        let options = WebDAVOptions(remoteName: build.remoteName, url: url, root: build.root, user: user,
                                    password: password, auth: auth)
        return WebDAVProvider(options: options, transport: build.transport, pacer: build.pacer, audio: build.audio,
                              logger: build.logger)
    }
}
