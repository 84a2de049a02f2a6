import Foundation
import Testing

/// Completion scripts and the man page are generated from the one command tree (#25): they are run (bash's
/// `compgen` with COMP_WORDS set, fish's `complete -C`, zsh's parser) and rendered (`groff -man -ww`).
@Suite struct CompletionAndManTests {
    static func which(_ name: String) -> String? {
        ["/usr/bin/", "/bin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs `shell -c script` with the built cloudsync first on PATH.
    static func shell(_ shell: String, _ script: String, config: URL? = nil) throws -> CLI.Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = ["-c", script]
        var env = ["PATH": CLI.executable.deletingLastPathComponent().path + ":/usr/bin:/bin",
                   "HOME": NSTemporaryDirectory(), "NO_COLOR": "1"]
        if let config { env["CLOUDSYNC_CONFIG"] = config.path }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CLI.Result(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                          stderr: String(decoding: e, as: UTF8.self))
    }

    /// A config with two remotes and an index holding a few paths (written by `cloudsync` itself is not
    /// possible offline, so the index is left empty and only remotes are completed from it).
    static func config() throws -> URL {
        let dir = try CLI.temporaryDirectory()
        let url = dir.appendingPathComponent("config.toml")
        try """
        [cache]
        dir = "\(dir.appendingPathComponent("cache").path)"

        [remote.nas]
        provider = "webdav"
        url = "http://127.0.0.1:9/dav/"
        user = "u"
        password = "p"

        [remote.music]
        provider = "webdav"
        url = "http://127.0.0.1:9/m/"
        user = "u"
        password = "p"
        """.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    /// `words` typed so far (the last one being completed) → what bash offers.
    static func bashComplete(_ words: [String], config: URL) throws -> [String] {
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let r = try shell("/bin/bash", """
            source <(cloudsync completion bash) || exit 9
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
            _cloudsync
            printf '%s\\n' "${COMPREPLY[@]}"
            """, config: config)
        #expect(r.status == 0, "bash: \(r.stderr)")
        return r.stdout.split(separator: "\n").map(String.init)
    }

    @Test func bashCompletesCommandsOptionsAndRemotes() throws {
        let config = try Self.config()
        #expect(try Self.bashComplete(["cloudsync", "ca"], config: config) == ["cache"])
        #expect(try Self.bashComplete(["cloudsync", "cache", "ev"], config: config) == ["evict"])
        #expect(try Self.bashComplete(["cloudsync", "cache", "evict", "--d"], config: config) == ["--dry-run"])
        #expect(try Self.bashComplete(["cloudsync", "pull", "--remote", ""], config: config) == ["nas", "music"])
        #expect(try Self.bashComplete(["cloudsync", "pull", "--provider", "we"], config: config) == ["webdav"])
        #expect(try Self.bashComplete(["cloudsync", "completion", "f"], config: config) == ["fish"])
        // A value option's value is not a command: `--remote cache` keeps `pull` as the command.
        #expect(try Self.bashComplete(["cloudsync", "pull", "--remote", "nas", "--dry"], config: config) == ["--dry-run"])
        #expect(try Self.bashComplete(["cloudsync", "help", "se"], config: config) == ["serve"])
    }

    /// Path candidates one folder level at a time (the pure part the scripts call).
    @Test func pathCandidatesStopAtTheNextFolder() throws {
        let r = try CLI.run(["completion", "paths", "--", ""], environment: ["CLOUDSYNC_CONFIG": try Self.config().path])
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stderr)")
        // A broken config completes nothing and prints nothing (no error in the user's prompt).
        let broken = try CLI.run(["completion", "remotes"], environment: ["CLOUDSYNC_CONFIG": "/nonexistent/config.toml"])
        #expect(broken.status == 0 && broken.stdout.isEmpty && broken.stderr.isEmpty)
    }

    @Test func fishCompletesWhenInstalled() throws {
        guard let fish = Self.which("fish") else { return }
        let config = try Self.config()
        let r = try Self.shell(fish, """
            cloudsync completion fish | source
            complete -C 'cloudsync cache ev'
            complete -C 'cloudsync pull --remote '
            """, config: config)
        #expect(r.status == 0, "fish: \(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }
        #expect(lines.contains("evict"), "\(r.stdout)")
        #expect(lines.contains("nas") && lines.contains("music"), "\(r.stdout)")
    }

    @Test func zshScriptParsesAndLoadsWhenInstalled() throws {
        guard let zsh = Self.which("zsh") else { return }
        let dir = try CLI.temporaryDirectory()
        let generated = try CLI.run(["completion", "zsh"])
        try generated.stdout.write(to: dir.appendingPathComponent("_cloudsync"), atomically: true, encoding: .utf8)
        let parse = try Self.shell(zsh, "zsh -n \(dir.path)/_cloudsync")
        #expect(parse.status == 0, "zsh -n: \(parse.stderr)")
        let load = try Self.shell(zsh, """
            fpath=(\(dir.path) $fpath); autoload -Uz compinit; compinit -u -d \(dir.path)/zcompdump
            source \(dir.path)/_cloudsync; print -r -- ${_comps[cloudsync]}
            """)
        #expect(load.status == 0 && load.stdout.contains("_cloudsync"), "zsh: \(load.stdout) \(load.stderr)")
    }

    @Test func completionRefusesAnUnknownShell() throws {
        let r = try CLI.run(["completion", "bsh"])
        #expect(r.status == 2 && r.stderr.contains("bash"), "\(r.stderr)")
    }

    /// The man page renders without a warning and documents every command and exit code.
    @Test func manPageRendersWithoutWarnings() throws {
        let page = try CLI.run(["man"])
        #expect(page.status == 0)
        let dir = try CLI.temporaryDirectory()
        let file = dir.appendingPathComponent("cloudsync.1")
        try page.stdout.write(to: file, atomically: true, encoding: .utf8)
        let groff = try #require(Self.which("groff"), "groff is installed with man-db (scripts/install-deps.sh)")
        let r = try Self.shell("/bin/sh", "\(groff) -man -Tutf8 -ww \(file.path)")
        #expect(r.status == 0 && r.stderr.isEmpty, "groff: \(r.stderr)")
        for word in [".SH EXIT STATUS", ".SS cloudsync cache evict", ".SS cloudsync status", "\\-\\-head\\-first", ".B 75"] {
            #expect(page.stdout.contains(word), "man page lacks \(word)")
        }
    }

    @Test func helpCommandEqualsHelpFlag() throws {
        let a = try CLI.run(["help", "cache", "evict"])
        let b = try CLI.run(["cache", "evict", "--help"])
        #expect(a.status == 0 && a.stdout == b.stdout)
        let bad = try CLI.run(["help", "pul"])
        #expect(bad.status == 2 && bad.stderr.contains("pull"))
    }
}
