import Foundation
import Synchronization
import Testing
import TestSupport

/// Exit codes as the README documents them (#20.13, #19.13).
@Suite struct ExitCodeTests {
    /// A config with remotes `home` and `work` (WebDAV on a closed port) and its cache in `dir`.
    static func config(in dir: URL, url: String = "http://127.0.0.1:1/dav/") throws -> URL {
        let file = dir.appendingPathComponent("config.toml")
        try """
            [cache]
            dir = "\(dir.appendingPathComponent("cache").path)"

            [remote.home]
            provider = "webdav"
            url = "\(url)"
            user = "u"
            password = "p"

            [remote.work]
            provider = "webdav"
            url = "\(url)"
            user = "u"
            password = "p"

            """.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test(arguments: [
        (["ls", "--offline", "--remote", "hom"], "no remote 'hom'", "Did you mean 'home'?"),
        (["pull", "--remote", "nope"], "no remote 'nope'", "Remotes: home, work."),
        (["cache", "pin", "--remote", "nope", "a.mp3"], "no remote 'nope'", "Remotes: home, work."),
        (["ls", "--offline", "--remote", "home", "--provider", "webdav"], "--remote and --provider exclude each other", ""),
        (["ls", "--offline", "--provider", "webdab"], "unknown provider 'webdab'", "Did you mean 'webdav'?"),
        (["logout", "nope"], "no remote 'nope'", "Remotes: home, work."),
        (["login", "nope"], "no remote 'nope'", "Remotes: home, work."),
        (["cache", "path", "nope", "a.mp3"], "no remote 'nope'", "Remotes: home, work."),
        (["pull", "--bwlimit", "fast"], "--bwlimit expects a rate", ""),
        // A provider no remote uses, and the commands that checked names on their own, say the same (were 3, 3, 0).
        (["ls", "--offline", "--provider", "dropbox"], "--provider: no remote of provider dropbox", "Remotes: home (webdav), work (webdav)."),
        (["status", "--remote", "nope"], "no remote 'nope'", "Remotes: home, work."),
        (["cache", "clear", "--remote", "nope", "--yes"], "no remote 'nope'", "Remotes: home, work."),
        // A track that is not there: exit 2 like every PATH that matches nothing (was 1).
        (["cache", "path", "home", "Rok/a.mp3"], "no track 'Rok/a.mp3' in remote 'home'", "cloudsync ls --offline --remote home"),
        (["ls", "--offline", "--json", "--tsv"], "--json and --tsv exclude each other", ""),
    ])
    func unknownNamesAreUsageErrors(arguments: [String], message: String, hint: String) throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = try Self.config(in: dir)
        let r = try CLI.run(arguments + ["--config", file.path], environment: ["XDG_STATE_HOME": dir.path])
        #expect(r.status == 2, "stderr: \(r.stderr)")
        #expect(r.stderr.hasPrefix("cloudsync: error: ") && r.stderr.contains(message) && (hint.isEmpty || r.stderr.contains(hint)), "stderr: \(r.stderr)")
        #expect(!r.stderr.contains("cloudsync: error: cloudsync:"), "the program's name once: \(r.stderr)")
        let left = (FileManager.default.subpaths(atPath: dir.path) ?? []).filter { $0.hasSuffix("nope.lock") }
        #expect(left.isEmpty, "a mistyped name leaves no lock file: \(left)")
    }

    /// Output that cannot be written — a full disk under `> library.m3u` from cron, here `/dev/full` — is an
    /// error, exit 74. Before, the exit was 0 with the file cut short and nothing said.
    @Test(arguments: [["--help"], ["ls", "--offline", "--json"], ["ls", "--m3u"], ["config", "show"]])
    func outputThatCannotBeWrittenIsAnError(arguments: [String]) throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = try Self.config(in: dir)
        let r = try CLI.run(["-c", #"exec "$0" "$@" > /dev/full"#, CLI.executable.path] + arguments + ["--config", file.path],
                            environment: ["XDG_STATE_HOME": dir.path], program: URL(fileURLWithPath: "/bin/sh"))
        #expect(r.status == 74, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("writing the output to stdout failed: No space left on device (the disk is full)"), "stderr: \(r.stderr)")
    }

    /// A dry run, like ls, retries a host that cannot be reached once, then exits 5 (#20.4, #20.8).
    @Test func dryRunOfAnUnreachableCloudRetriesOnce() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = try Self.config(in: dir)
        let r = try CLI.run(["pull", "--dry-run", "--json", "--remote", "home", "--config", file.path], environment: ["XDG_STATE_HOME": dir.path])
        #expect(r.status == 5, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("retry 1/1") && !r.stderr.contains("retry 2/"), "stderr: \(r.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        #expect(object?["remotes"] != nil, "stdout holds only JSON: \(r.stdout)")
    }

    /// A login whose token endpoint cannot be reached is "remote unavailable", 5.
    @Test func loginToAnUnreachableHostExits5() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.toml")
        try """
            [cache]
            dir = "\(dir.appendingPathComponent("cache").path)"

            [remote.box]
            provider = "dropbox"
            client_id = "id"
            token_url = "http://127.0.0.1:1/oauth2/token"
            auth_url = "http://127.0.0.1:1/oauth2/authorize"
            api_url = "http://127.0.0.1:1"

            """.write(to: file, atomically: true, encoding: .utf8)
        let log = dir.appendingPathComponent("run.log")
        let r = try CLI.run(["login", "box", "--config", file.path, "--log-file", log.path], environment: ["XDG_STATE_HOME": dir.path],
                            stdin: "the-code\n")
        #expect(r.status == 5, "stderr: \(r.stderr)")
        // What the login shows the person (the URL to open) is on the terminal, not in the log file's record.
        let record = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(r.stderr.contains("/oauth2/authorize") && !record.contains("/oauth2/authorize") && record.contains("error"),
                "log file: \(record)")
    }

    /// `serve --bind '[::1]'` prints a URL a player can use (#19.13).
    @Test func serveOnIPv6LoopbackPrintsABracketedURL() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = try Self.config(in: dir)
        let serve = try ChildProcess(CLI.executable.path, ["serve", "--bind", "[::1]", "--port", "0", "--config", file.path],
                                     environment: ["PATH": "/usr/bin:/bin", "HOME": dir.path, "XDG_STATE_HOME": dir.path])
        defer { serve.stop() }
        let url = try await serve.waitForLine(prefix: "listening on ", timeout: 30)
        #expect(url.hasPrefix("http://[::1]:") && url.hasSuffix("/") && !url.contains("[["), "printed \(url)")
    }
}
