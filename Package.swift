// swift-tools-version:6.0
// cloudsync: keeps a person's music from cloud storage ready to play offline.
import PackageDescription

let package = Package(
    name: "cloudsync",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "cloudsync", targets: ["cloudsync"]),
    ],
    targets: [
        /// libcurl, with non-variadic shims for curl_easy_setopt / curl_easy_getinfo.
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        /// SQLite 3, the index of the cache.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        /// OpenSSL libcrypto: EVP digests (MD5, SHA-1, SHA-256).
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        /// libxml2: the push parser and SAX2 interface, for streaming WebDAV documents.
        .systemLibrary(name: "CXML", path: "Sources/CXML", pkgConfig: "libxml-2.0",
                       providers: [.apt(["libxml2-dev"])]),

        /// Value types and protocols shared by every layer; Foundation only.
        .target(name: "CloudSyncCore"),
        /// Streaming, namespace-aware XML on libxml2's push parser: flat memory, no DTDs, bounded depth and size.
        .target(name: "CloudSyncXML", dependencies: ["CXML"]),
        /// TOML 1.0 parser and the typed configuration, with errors at file:line:column.
        .target(name: "CloudSyncConfig", dependencies: ["CloudSyncCore"]),
        /// HTTP transport on libcurl, ranged downloads, redirects, pacer, digests, OAuth refresh.
        .target(name: "CloudSyncHTTP", dependencies: ["CloudSyncCore", "CCurl", "CCrypto"]),
        /// The shared on-disk cache: sparse partial files, SQLite range index, eviction, locks.
        .target(name: "CloudSyncCache", dependencies: ["CloudSyncCore", "CSQLite", "CCrypto"]),
        /// Pure audio-format knowledge over byte ranges: start sets, tags and durations (MP3, AAC, FLAC, MP4, Ogg, WAV, AIFF).
        .target(name: "CloudSyncAudio", dependencies: ["CloudSyncCore"]),

        /// Dropbox API v2 adapter.
        .target(name: "Dropbox", dependencies: ["CloudSyncCore", "CloudSyncHTTP"], path: "Providers/Dropbox"),
        /// Google Drive API v3 adapter.
        .target(name: "GoogleDrive", dependencies: ["CloudSyncCore", "CloudSyncHTTP"], path: "Providers/GoogleDrive"),
        /// Microsoft Graph (OneDrive personal and business) adapter.
        .target(name: "OneDrive", dependencies: ["CloudSyncCore", "CloudSyncHTTP"], path: "Providers/OneDrive"),
        /// Yandex.Disk REST API adapter.
        .target(name: "YandexDisk", dependencies: ["CloudSyncCore", "CloudSyncHTTP"], path: "Providers/YandexDisk"),
        /// Generic WebDAV (RFC 4918) adapter.
        .target(name: "WebDAV", dependencies: ["CloudSyncCore", "CloudSyncHTTP", "CloudSyncXML"], path: "Providers/WebDAV"),

        /// The registry: every provider's descriptor and factory, one line each.
        .target(name: "CloudSyncProviders", dependencies: [
            "CloudSyncCore", "CloudSyncHTTP", "Dropbox", "GoogleDrive", "OneDrive", "YandexDisk", "WebDAV",
        ]),

        /// Logins per provider (device code, PKCE paste, loopback), the 0600 token store and lock-serialised refresh.
        .target(name: "CloudSyncAuth", dependencies: ["CloudSyncCore", "CloudSyncHTTP"]),

        /// Sync: listing → plan → fetch → verify → promote; scheduler and range fetcher.
        .target(name: "CloudSyncEngine", dependencies: ["CloudSyncCore", "CloudSyncHTTP", "CloudSyncCache", "CloudSyncAudio"]),
        /// Loopback HTTP/1.1 server for players: Range from the cache, holes filled by the engine; a read-only WebDAV face.
        .target(name: "CloudSyncServer", dependencies: ["CloudSyncCore", "CloudSyncCache", "CloudSyncEngine", "CloudSyncXML"]),
        /// Command-line parsing, wiring of config to providers, output; one call per command.
        .target(name: "CloudSyncCommands", dependencies: [
            "CloudSyncCore", "CloudSyncConfig", "CloudSyncHTTP", "CloudSyncCache", "CloudSyncEngine",
            "CloudSyncServer", "CloudSyncProviders", "CloudSyncAuth",
        ]),
        /// The `cloudsync` executable: a few lines that call CloudSyncCommands.
        .executableTarget(name: "cloudsync", dependencies: ["CloudSyncCommands"]),
        /// Benchmark driver for bench/transport.sh: parallel downloads through CurlTransport into files.
        .executableTarget(name: "transport-bench", dependencies: ["CloudSyncHTTP"], path: "bench/transport-bench"),

        /// Shared test support: fake servers, temporary directories, process helpers.
        .target(name: "TestSupport", dependencies: ["CloudSyncCore", "CloudSyncHTTP"], path: "Tests/TestSupport",
                exclude: ["make-audio-fixtures.sh"]),
        .testTarget(name: "CloudSyncConfigTests", dependencies: ["CloudSyncConfig", "CloudSyncProviders", "TestSupport"],
                    resources: [.copy("toml-test")]),
        .testTarget(name: "CloudSyncHTTPTests", dependencies: ["CloudSyncHTTP", "TestSupport"]),
        .testTarget(name: "CloudSyncXMLTests", dependencies: ["CloudSyncXML"]),
        .testTarget(name: "CloudSyncCoreTests", dependencies: ["CloudSyncCore"]),
        .testTarget(name: "CloudSyncAudioTests", dependencies: ["CloudSyncAudio", "TestSupport"]),
        /// Test helper: fills a cache entry so CloudSyncCacheTests can kill -9 it mid-write.
        .executableTarget(name: "cache-crash-child", dependencies: ["CloudSyncCache", "CloudSyncCore"],
                          path: "Tests/CacheCrashChild"),
        .testTarget(name: "CloudSyncCacheTests", dependencies: ["CloudSyncCache", "TestSupport", "cache-crash-child"]),
        .testTarget(name: "ProviderTests", dependencies: [
            "Dropbox", "GoogleDrive", "OneDrive", "YandexDisk", "WebDAV", "CloudSyncHTTP", "TestSupport",
        ], exclude: ["Fixtures"]),
        .testTarget(name: "CloudSyncEngineTests", dependencies: [
            "CloudSyncEngine", "CloudSyncCache", "CloudSyncHTTP", "WebDAV", "YandexDisk", "TestSupport",
        ]),
        .testTarget(name: "CloudSyncAuthTests", dependencies: ["CloudSyncAuth", "CloudSyncProviders", "TestSupport"]),
        .testTarget(name: "CloudSyncCommandsTests", dependencies: ["CloudSyncCommands", "CloudSyncEngine", "TestSupport", "cloudsync"],
                    exclude: ["Snapshots"]),
        /// Also runs the built `cloudsync` (serve, ls, pull) against the fakes, and real players (ffmpeg, mpd, rclone).
        .testTarget(name: "CloudSyncServerTests", dependencies: [
            "CloudSyncServer", "CloudSyncEngine", "CloudSyncCache", "CloudSyncXML", "WebDAV", "CloudSyncHTTP", "TestSupport", "cloudsync",
        ]),
        /// Quick mode of every script under bench/ (small sizes; no timing asserted).
        .testTarget(name: "BenchQuickTests", dependencies: ["cloudsync", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
