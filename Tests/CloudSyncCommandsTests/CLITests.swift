import Foundation
import Testing

/// Runs the built `cloudsync` executable as a user would.
struct CLI {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The executable next to the test bundle (debug or release, whichever `swift test` built).
    static var executable: URL {
        let candidates = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
            + [packageRoot.appendingPathComponent(".build/debug")]
        for dir in candidates {
            let url = dir.appendingPathComponent("cloudsync")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return packageRoot.appendingPathComponent(".build/debug/cloudsync")
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// `program` replaces the executable, e.g. `/usr/bin/timeout` with cloudsync among the arguments.
    static func run(_ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
                    program: URL? = nil) throws -> Result {
        let process = Process()
        process.executableURL = program ?? executable
        process.arguments = arguments
        var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(), "NO_COLOR": "1"]
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }

    /// A fresh temporary directory.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cloudsync-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

@Suite struct CLITests {
    /// A configuration from a pipe: `--config <(pass show cloudsync)` or `--config /dev/stdin` (Foundation's reader
    /// returned nothing for a pipe: "You don't have permission").
    @Test func aConfigurationCanComeFromAPipe() throws {
        let remotes = (0 ..< 300).map { "[remote.r\($0)]\nprovider = \"webdav\"\nurl = \"https://nas.invalid/dav/\"\n" }.joined()
        let text = "[cache]\ndir = \"\(NSTemporaryDirectory())cloudsync-pipe-cache\"\n" + remotes
        #expect(text.utf8.count > 16_384)
        let r = try CLI.run(["--config", "/dev/stdin", "config", "show"], stdin: text)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stdout.components(separatedBy: "[remote.").count - 1 == 300, "\(r.stdout.suffix(300))")
    }

    @Test func versionAndHelp() throws {
        let v = try CLI.run(["--version"])
        #expect(v.status == 0 && v.stdout.hasPrefix("cloudsync "))
        let h = try CLI.run(["pull", "--help"])
        #expect(h.status == 0 && h.stdout.contains("USAGE: cloudsync pull"))
    }

    @Test func usageErrorsExit2WithAHint() throws {
        let r = try CLI.run(["pull", "--no-such-flag"])
        #expect(r.status == 2)
        #expect(r.stderr.contains("unknown option '--no-such-flag'"))
        #expect(r.stderr.contains("cloudsync pull --help"))
        #expect(r.stdout.isEmpty)
    }

    @Test(arguments: ["0", "17", "many"])
    func segmentsOutOfRangeIsAUsageError(value: String) throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.toml")
        try "[remote.nas]\nprovider = \"webdav\"\nurl = \"http://127.0.0.1:1/dav/\"\n".write(to: file, atomically: true, encoding: .utf8)
        let r = try CLI.run(["pull", "--segments", value, "--config", file.path])
        #expect(r.status == 2, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("--segments expects a whole number from 1 to 16, got '\(value)'"), "stderr: \(r.stderr)")
    }

    /// A bad option of `ls` is a usage error before any work: no listing is tried first (an unreachable server
    /// is retried and warned about before `--sort` was read).
    @Test(arguments: [(["--sort", "nonsense"], "--sort nonsense: unknown order"),
                      (["--m3u", "--port", "0"], "--port expects a whole number from 1 to 65535"),
                      (["--retries", "x"], "--retries expects a whole number")])
    func lsUsageErrorsComeBeforeTheNetwork(arguments: [String], message: String) throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.toml")
        try "[cache]\ndir = \"\(dir.path)/cache\"\n[remote.nas]\nprovider = \"webdav\"\nurl = \"http://127.0.0.1:1/dav/\"\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let r = try CLI.run(["ls", "--config", file.path] + arguments)
        #expect(r.status == 2, "stderr: \(r.stderr)")
        #expect(r.stderr.contains(message), "stderr: \(r.stderr)")
        #expect(!r.stderr.contains("127.0.0.1"), "the network was tried first: \(r.stderr)")
    }

    /// Each kind of config mistake: one clear message with file:line:column, exit 3.
    @Test(arguments: [
        ("[pull]\njobs = \n", "config.toml:2:"),
        ("[pull]\nchunksize = \"8MiB\"\n", "config.toml:2:1"),
        ("[pull]\njobs = \"four\"\n", "config.toml:2:8"),
        ("[remote.home]\nurl = \"http://127.0.0.1:1/\"\n", "config.toml:1:1"),
    ])
    func configErrorsExit3WithPosition(text: String, position: String) throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.toml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let r = try CLI.run(["config", "check", "--config", file.path])
        #expect(r.status == 3, "stderr: \(r.stderr)")
        #expect(r.stderr.contains(position), "stderr: \(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "one message, got: \(r.stderr)")
    }

    @Test func missingConfigSaysWhereItLooked() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try CLI.run(["ls", "--offline"], environment: ["XDG_CONFIG_HOME": dir.path])
        #expect(r.status == 3)
        #expect(r.stderr.contains(dir.path))
    }

    @Test func configShowMasksSecrets() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.toml")
        try "[remote.nas]\nprovider = \"webdav\"\nurl = \"https://nas.local/dav/\"\nuser = \"me\"\npassword = \"hunter2-secret\"\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let r = try CLI.run(["config", "show", "--config", file.path])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(!r.stdout.contains("hunter2-secret"))
        #expect(r.stdout.contains("nas"))
        // A password in the URL's user info and a password_command (it may print the password itself) too.
        try "[remote.nas]\nprovider = \"webdav\"\nurl = \"https://me:url-s3cret@nas.local/dav/\"\npassword_command = \"echo cmd-s3cret\"\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let both = try CLI.run(["config", "show", "--config", file.path])
        #expect(both.status == 0, "stderr: \(both.stderr)")
        #expect(!both.stdout.contains("url-s3cret") && !both.stdout.contains("cmd-s3cret"), "stdout: \(both.stdout)")
        #expect(both.stdout.contains("url = \"https://me:********@nas.local/dav/\""), "stdout: \(both.stdout)")
    }
}
