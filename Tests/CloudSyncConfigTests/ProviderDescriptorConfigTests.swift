import CloudSyncConfig
import CloudSyncCore
import Foundation
import Testing

/// Config reads provider kinds and keys from the descriptors it is given, never from a list of its own: a provider
/// it has never heard of works by its descriptor alone.
@Suite("Config from provider descriptors")
struct ProviderDescriptorConfigTests {
    static let catalog = ProviderCatalog([
        ProviderDescriptor(kind: "memo", aliases: ["memory"], displayName: "Memo", credential: { _ in .oauth },
                           accountCheck: .propfind,
                           options: [
                               ProviderOption("url", .shared, requiredExample: "https://memo.test/"),
                               ProviderOption("region", .choice(["eu", "us"], default: "eu")),
                               ProviderOption("fast", .boolean(default: false)),
                           ]),
        ProviderDescriptor(kind: "plain", displayName: "Plain", credential: { _ in .password }, accountCheck: .propfind),
    ])

    func parse(_ text: String) throws(ConfigError) -> Configuration {
        try Configuration.parse(text: text, file: "d.toml", environment: [:], providers: Self.catalog)
    }

    func failure(_ text: String) -> String? {
        do { _ = try parse(text); return nil } catch { return error.description }
    }

    @Test("an alias names the provider; its keys are validated, stored and shown with their defaults")
    func aliasAndOptions() throws {
        let config = try parse("[remote.m]\nprovider = \"memory\"\nurl = \"https://memo.test/x/\"\nregion = \"us\"\n")
        let remote = try #require(config.remotes.first)
        #expect(remote.provider == "memo")
        #expect(remote.options == ProviderOptions(["region": .text("us")]))
        #expect(remote.url?.absoluteString == "https://memo.test/x/")
        let shown = config.renderMasked()
        #expect(shown.contains("region = \"us\"") && shown.contains("fast = false"))
    }

    @Test("the descriptors' rules give the errors, at their positions", arguments: [
        ("[remote.m]\nprovider = \"memo\"", "d.toml:1:1: memo remote \"m\" has no url; add url = \"https://memo.test/\""),
        ("[remote.m]\nprovider = \"memo\"\nurl = \"https://memo.test/\"\nregion = \"mars\"",
         "d.toml:4:10: region must be one of \"eu\", \"us\", got \"mars\""),
        ("[remote.m]\nprovider = \"memo\"\nurl = \"https://memo.test/\"\nfast = 1",
         "d.toml:4:8: fast must be a boolean (true or false), got integer"),
        ("[remote.p]\nprovider = \"plain\"\nregion = \"eu\"", "d.toml:3:1: key 'region' applies only to memo remotes, and \"p\" is a plain remote"),
        ("[remote.p]\nprovider = \"dropbox\"", "d.toml:2:12: unknown provider \"dropbox\"; valid providers: memo, plain"),
        ("[remote.p]\nroot = \"/\"", "d.toml:1:1: remote \"p\" has no provider; add provider = \"memo\" (or plain)"),
    ])
    func errors(text: String, message: String) {
        #expect(failure(text) == message)
    }
}
