import CloudSyncCore
import Foundation
import Synchronization
import Testing
import TestSupport

/// `--version` wherever it stands prints the version and runs nothing; `-v` adds the C libraries; the HTTP
/// User-Agent carries the same version (#20.2).
@Suite struct VersionTests {
    /// No configuration exists here, so a command that ran would exit 3.
    @Test(arguments: [["--version"], ["pull", "--version"], ["pull", "--remote", "x", "--version", "Album"], ["cache", "--version"],
                      ["login", "--version"], ["ls", "--offline", "--version"], ["cache", "verify", "--version"]])
    func versionAnywherePrintsItAndRunsNothing(arguments: [String]) throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try CLI.run(arguments, environment: ["XDG_CONFIG_HOME": dir.path, "XDG_CACHE_HOME": dir.path])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stdout == "cloudsync \(CloudSyncVersion.string)\n")
        #expect(r.stderr.isEmpty)
    }

    @Test func verboseVersionNamesTheLibraries() throws {
        let r = try CLI.run(["pull", "--version", "-v"])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "cloudsync \(CloudSyncVersion.string)")
        #expect(lines.contains { $0.hasPrefix("libcurl 7.") || $0.hasPrefix("libcurl 8.") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("SQLite 3.") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("OpenSSL ") }, "\(lines)")
    }

    /// What a WebDAV server sees from `ls`: the version `--version` prints, in the User-Agent.
    @Test func userAgentCarriesTheVersion() throws {
        let agents = Mutex<[String]>([])
        let server = try LoopbackHTTPServer { request in
            agents.withLock { $0.append(request.headers["user-agent"] ?? "") }
            let body = """
                <?xml version="1.0"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/dav/</d:href><d:propstat>\
                <d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status>\
                </d:propstat></d:response></d:multistatus>
                """
            return .init(status: 207, headers: [("Content-Type", "application/xml")], body: Data(body.utf8))
        }
        defer { server.stop() }
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("config.toml")
        try "[cache]\ndir = \"\(dir.appendingPathComponent("cache").path)\"\n\n[remote.nas]\nprovider = \"webdav\"\nurl = \"http://127.0.0.1:\(server.port)/dav/\"\nuser = \"u\"\npassword = \"p\"\n"
            .write(to: config, atomically: true, encoding: .utf8)
        let r = try CLI.run(["ls", "--config", config.path], environment: ["XDG_STATE_HOME": dir.path])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let seen = agents.withLock { $0 }
        #expect(!seen.isEmpty)
        #expect(seen.allSatisfy { $0.hasPrefix("cloudsync/\(CloudSyncVersion.string) libcurl/") }, "\(seen)")
    }
}
