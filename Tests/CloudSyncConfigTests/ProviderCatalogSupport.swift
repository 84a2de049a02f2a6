import CloudSyncConfig
import CloudSyncCore
import CloudSyncProviders
import Foundation

// The tests read configurations as the CLI does: against the providers of this build (ProviderRegistry).
extension Configuration {
    static func parse(text: String, file: String, environment: [String: String]) throws(ConfigError) -> Configuration {
        try parse(text: text, file: file, environment: environment, providers: ProviderRegistry.catalog)
    }

    static func load(path: URL, environment: [String: String]) throws(ConfigError) -> Configuration {
        try load(path: path, environment: environment, providers: ProviderRegistry.catalog)
    }

    init(table: TOMLTable, file: String, environment: [String: String]) throws(ConfigError) {
        try self.init(table: table, file: file, environment: environment, providers: ProviderRegistry.catalog)
    }
}
