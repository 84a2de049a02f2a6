#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TestSupport

// The built `cloudsync` against `Tests/Fakes/files_fake.py`: a WebDAV cloud with throttling, faults and a
// request log, a temporary config and cache, and `serve` as a child process.

/// `Tests/Fakes/files_fake.py` serving `root` under /dav/ (Basic auth demo/demo-pass). Stopped by `stop()`
/// (the cloud goes away: connections are refused) or when this object dies.
final class FilesFake: @unchecked Sendable {
    private let fake: PythonFake
    let port: Int
    var davURL: String { "http://127.0.0.1:\(port)/dav/" }

    /// One GET as the fake saw it.
    struct Served {
        var path: String
        var range: String?
        var status: Int
        /// Body bytes handed to the kernel.
        var bytes: Int64
        /// When the request arrived and when its answer was over (the fake's clock), nil while it runs.
        var t: Double
        var end: Double?
    }

    /// `port`: the port to listen on (0: a free one), e.g. a stopped fake's, for a cloud that comes back.
    init(root: URL, rate: Int = 0, faults: String? = nil, port wanted: Int = 0) async throws {
        var arguments = ["--root", root.path]
        if wanted > 0 { arguments += ["--port", String(wanted)] }
        if rate > 0 { arguments += ["--rate", String(rate)] }
        if let faults { arguments += ["--faults", faults] }
        fake = try await PythonFake.start("files_fake.py", arguments: arguments)
        port = fake.ports[0]
    }

    func stop() { fake.stop() }

    /// GETs of files so far, in arrival order.
    func log() throws -> [Served] {
        let body = try RawClient(port: port).get("/_log").body
        let rows = try JSONSerialization.jsonObject(with: body) as? [[String: Any]] ?? []
        return rows.map { row in
            Served(path: row["path"] as? String ?? "", range: row["range"] as? String,
                   status: (row["status"] as? NSNumber)?.intValue ?? 0, bytes: (row["bytes"] as? NSNumber)?.int64Value ?? 0,
                   t: (row["t"] as? NSNumber)?.doubleValue ?? 0, end: (row["end"] as? NSNumber)?.doubleValue)
        }
    }

    /// Body bytes sent for GETs of `/dav/<path>`.
    func bytes(of path: String) throws -> Int64 {
        try log().filter { $0.path == "/dav/" + path }.reduce(0) { $0 + $1.bytes }
    }

    /// Replaces the fault rules (a JSON list, see files_fake.py).
    func setFaults(_ json: String) throws {
        let client = try RawClient(port: port)
        client.send("POST /_faults HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(json.utf8.count)\r\n\r\n" + json)
        _ = try client.readResponse()
    }

    func reset() throws {
        let client = try RawClient(port: port)
        client.send("POST /_reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
        _ = try client.readResponse()
    }
}

/// A temporary config (remote `lib` on a WebDAV URL) and cache, and the built `cloudsync` run against them.
final class BinaryEnv: @unchecked Sendable {
    let directory: TemporaryDirectory
    let config: URL
    var cacheDir: URL { directory.file("cache") }

    /// `reusing`: another config of `other`'s cache and state directory (its key, its tokens).
    init(davURL: String, extra: String = "", reusing other: BinaryEnv? = nil) throws {
        directory = try other?.directory ?? TemporaryDirectory(prefix: "cloudsync-serve-bin")
        config = other == nil ? directory.file("config.toml") : directory.file("config-\(UUID().uuidString.prefix(8)).toml")
        let text = """
            [cache]
            dir = "\(directory.file("cache").path)"
            checkpoint = "256KiB"
            \(extra)

            [remote.lib]
            provider = "webdav"
            url = "\(davURL)"
            user = "demo"
            password = "demo-pass"

            """
        try text.write(to: config, atomically: true, encoding: .utf8)
    }

    /// The `cloudsync` built with the tests.
    static func binary() throws -> String {
        for config in ["debug", "release"] {
            let path = RepositoryPaths.root.appendingPathComponent(".build/\(config)/cloudsync").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw TestSupportError("no cloudsync binary under .build/debug or .build/release; run `swift build --build-tests` first")
    }

    var environment: [String: String] {
        ["PATH": "/usr/bin:/bin", "HOME": directory.path, "NO_COLOR": "1", "XDG_STATE_HOME": directory.file("state").path]
    }

    /// Runs `cloudsync ARGUMENTS --config …` to its end (killed after `timeout` seconds).
    func run(_ arguments: [String], timeout: TimeInterval = 120) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.binary())
        process.arguments = arguments + ["--config", config.path]
        process.environment = environment
        let out = directory.file("out-\(UUID().uuidString.prefix(8))"), err = directory.file("err-\(UUID().uuidString.prefix(8))")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw TestSupportError("cloudsync \(arguments) did not finish within \(Int(timeout)) s")
        }
        return (process.terminationStatus, (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }

    /// Starts `cloudsync serve --port 0 ARGUMENTS` and returns it with its port once it listens.
    func serve(_ arguments: [String] = []) async throws -> (ChildProcess, Int) {
        let child = try ChildProcess(try Self.binary(), ["-q", "serve", "--port", "0"] + arguments + ["--config", config.path],
                                     environment: environment)
        let line = try await child.waitForLine(prefix: "listening on ", timeout: 20)
        guard let colon = line.lastIndex(of: ":"), let port = Int(line[line.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: "/"))) else {
            child.stop()
            throw TestSupportError("serve printed 'listening on \(line)'")
        }
        return (child, port)
    }
}

extension BinaryEnv {
    /// A config for `fake` whose listing is in the index (`ls`), and `serve` on it: the environment, the serve
    /// process (stop it) and its port.
    static func serving(_ fake: FilesFake) async throws -> (BinaryEnv, ChildProcess, Int) {
        let env = try BinaryEnv(davURL: fake.davURL)
        let listed = try env.run(["ls", "--remote", "lib"])
        guard listed.status == 0 else { throw TestSupportError("ls --remote lib exited \(listed.status): \(listed.stderr)") }
        let (serve, port) = try await env.serve()
        return (env, serve, port)
    }

    /// A cache holding only the first `head` bytes of every file of `root`, made the way a user would:
    /// `pull --head-first` against a fake whose every GET from byte `head` on is refused (403), so the pull
    /// ends (exit 1) after its first pass. Returns the fake, still refusing, and the environment. `rate`: the
    /// fake's bytes per second per answer (0: as fast as loopback goes).
    static func headOnly(root: URL, head: Int, rate: Int = 0, extra: String = "") async throws -> (FilesFake, BinaryEnv) {
        let fake = try await FilesFake(root: root, rate: rate, faults: "[{\"kind\": \"status\", \"status\": 403, \"count\": -1, \"from\": \(head)}]")
        let env = try BinaryEnv(davURL: fake.davURL, extra: extra)
        let pulled = try env.run(["pull", "--remote", "lib", "--head-first=\(head >> 10)KiB"])
        guard pulled.status == 1, pulled.stderr.contains("403") else {
            fake.stop()
            throw TestSupportError("pull --head-first should fetch only the heads and fail the rest (exit 1), got \(pulled.status): \(pulled.stderr)")
        }
        return (fake, env)
    }
}

/// Seconds elapsed while running `body`.
func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = ContinuousClock.now
    let value = try body()
    let elapsed = ContinuousClock.now - start
    return (value, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}
