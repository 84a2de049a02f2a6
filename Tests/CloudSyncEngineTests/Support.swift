import TestSupport
// Support for the engine's acceptance tests: the built `cloudsync` run as a subprocess with a temporary
// config and cache, the fault-injecting fake (Tests/Fakes/files_fake.py), real WebDAV servers
// (Tests/servers/start-webdav.sh), and seeded libraries of files.
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Foundation
import Testing

enum Paths {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let fake = packageRoot.appendingPathComponent("Tests/Fakes/files_fake.py")
    static let startWebDAV = packageRoot.appendingPathComponent("Tests/servers/start-webdav.sh")

    /// The `cloudsync` executable `swift build` made (next to the test bundle, or .build/debug).
    static var cloudsync: URL {
        let candidates = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
                          packageRoot.appendingPathComponent(".build/debug")]
        for dir in candidates {
            let url = dir.appendingPathComponent("cloudsync")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return packageRoot.appendingPathComponent(".build/debug/cloudsync")
    }

    /// `/usr/bin/NAME` or `/bin/NAME`, or a failure that says which Debian package to install.
    static func program(_ name: String, package: String) throws -> URL {
        for dir in ["/usr/bin", "/bin", "/usr/sbin", "/usr/local/bin"] {
            let url = URL(fileURLWithPath: dir).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw TestFailure("\(name) is not installed (Debian package \(package)); run `make deps` or scripts/install-deps.sh")
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A temporary directory removed by `cleanup()`.
func temporaryDirectory(_ label: String) throws -> URL {
    let url = URL(fileURLWithPath: "/tmp").appendingPathComponent("cloudsync-engine-\(label)-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                            attributes: [.posixPermissions: 0o755])
    return url
}

/// A library of files on disk (the remote's source of truth), relative path → bytes.
struct Library {
    let root: URL
    /// What tracks/ should hold (tests drop files expected to fail).
    var files: [String: Data] = [:]

    init(root: URL) { self.root = root }

    /// The names every real server must survive: nested folders, Cyrillic, CJK, emoji, spaces and `[ ] & % + # ' "`.
    static let hostileNames = [
        "Кино/Группа крови/01 - Группа крови.mp3",
        "東京事変/教育/01 丸の内サディスティック.flac",
        "Emoji 🎵/🎧 mix ✨.ogg",
        "Spaces and [brackets]/a & b % c + d # e.mp3",
        "Quotes/it's \"quoted\".opus",
        "Deep/er/and/deeper/track 100%.m4a",
        "plain.mp3",
    ]

    mutating func add(_ path: String, _ data: Data) throws {
        let url = root.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        try data.write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: url.path)
        files[path] = data
    }

    mutating func remove(_ path: String) throws {
        try FileManager.default.removeItem(at: root.appendingPathComponent(path))
        files[path] = nil
    }

    /// Moves the file or folder at `path` to `newPath` on the server's disk, as a server-side MOVE does: the same
    /// bytes and modification times under the new name.
    mutating func move(_ path: String, to newPath: String) throws {
        let target = root.appendingPathComponent(newPath)
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        guard rename(root.appendingPathComponent(path).path, target.path) == 0 else {
            throw TestFailure("rename \(path) → \(newPath): \(String(cString: strerror(errno)))")
        }
        for (key, data) in files where key == path || key.hasPrefix(path + "/") {
            files[key] = nil
            files[newPath + key.dropFirst(path.count)] = data
        }
    }

    /// Seeded random files of the given sizes.
    static func make(in root: URL, seed: UInt64, files: [(String, Int)]) throws -> Library {
        var library = Library(root: root)
        var random = SeededRandom(seed: seed)
        for (path, size) in files { try library.add(path, random.bytes(size)) }
        return library
    }
}

/// A temporary config + cache, and the `cloudsync` binary run against them.
struct Env {
    let dir: URL
    let remote = "lib"
    var config: URL { dir.appendingPathComponent("config.toml") }
    var cacheDir: URL { dir.appendingPathComponent("cache") }
    var tracks: URL { cacheDir.appendingPathComponent("tracks/\(remote)") }

    /// Writes a config for `url` with Basic auth demo/demo-pass and the given extra `[cache]`/`[pull]` lines.
    init(url: String, checkpoint: String = "256KiB", cache: [String] = [], pull: [String] = [], extra: String = "") throws {
        try self.init(remoteLines: Self.webdavLines(url), checkpoint: checkpoint, cache: cache, pull: pull, extra: extra)
    }

    /// The keys of a WebDAV remote at `url` with Basic auth demo/demo-pass.
    static func webdavLines(_ url: String) -> [String] {
        ["provider = \"webdav\"", "url = \"\(url)\"", "user = \"demo\"", "password = \"env:CLOUDSYNC_TEST_PASSWORD\""]
    }

    /// yandex_fake.py (its API and download ports) serving `spec`; by default two files, `Music/A/one.mp3` and
    /// `Music/B/two.flac`. Stop it when done.
    static func yandexFake(_ spec: [String: Any] = [
        "files": [["path": "Music/A/one.mp3", "size": 40_000], ["path": "Music/B/two.flac", "size": 70_000]],
    ]) async throws -> PythonFake {
        try await PythonFake.start("yandex_fake.py", spec: spec, portCount: 2)
    }

    /// The keys of a remote on the Yandex fake `fake` (its access token is `test-access-token`).
    static func yandexLines(_ fake: PythonFake) -> [String] {
        ["provider = \"yandex\"", "api_url = \"\(fake.baseURL())\"", "access_token = \"test-access-token\""]
    }

    /// Writes a config whose remote `lib` has the keys `remoteLines` (any provider); `extra` is appended
    /// (more remotes).
    init(remoteLines: [String], checkpoint: String = "256KiB", cache: [String] = [], pull: [String] = [],
         extra: String = "") throws {
        dir = try temporaryDirectory("env")
        try write(remoteLines: remoteLines, checkpoint: checkpoint, cache: cache, pull: pull, extra: extra)
    }

    /// Points the config's cache.dir at `dir` (a small or odd file system mounted for a test), with
    /// `min_free = "0"` so the whole of a small disk is the budget.
    func moveCache(to dir: URL) throws {
        let text = try String(contentsOf: config, encoding: .utf8)
            .replacingOccurrences(of: cacheDir.path, with: dir.path)
            .replacingOccurrences(of: "[cache]\n", with: "[cache]\nmin_free = \"0\"\n")
        try text.write(to: config, atomically: true, encoding: .utf8)
    }

    /// Rewrites the config (a test may change the budget between runs).
    func write(remoteLines: [String], checkpoint: String = "256KiB", cache: [String] = [], pull: [String] = [],
               extra: String = "") throws {
        let text = """
            [cache]
            dir = "\(cacheDir.path)"
            checkpoint = "\(checkpoint)"
            \(cache.joined(separator: "\n"))

            [pull]
            \(pull.joined(separator: "\n"))

            [remote.\(remote)]
            \(remoteLines.joined(separator: "\n"))

            \(extra)

            """
        try text.write(to: config, atomically: true, encoding: .utf8)
    }

    func cleanup() { try? FileManager.default.removeItem(at: dir) }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    func process(_ arguments: [String]) -> Process {
        let process = Process()
        process.executableURL = Paths.cloudsync
        process.arguments = arguments + ["--config", config.path]
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": dir.path, "NO_COLOR": "1",
                               "CLOUDSYNC_TEST_PASSWORD": "demo-pass"]
        process.standardInput = FileHandle.nullDevice
        return process
    }

    /// Runs `cloudsync ARGUMENTS --config …` to the end. Fails the test (no hang) after `timeout` seconds.
    @discardableResult
    func run(_ arguments: [String], timeout: TimeInterval = 90) throws -> Result {
        let running = try start(arguments)
        return try running.wait(timeout: timeout)
    }

    func start(_ arguments: [String]) throws -> Running {
        let p = process(arguments)
        let out = try temporaryFile(), err = try temporaryFile()
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = try FileHandle(forWritingTo: err)
        try p.run()
        return Running(process: p, out: out, err: err)
    }

    private func temporaryFile() throws -> URL {
        let url = dir.appendingPathComponent("out-\(UUID().uuidString.prefix(8))")
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        return url
    }

    /// `ls --offline --json`, by path.
    func index() throws -> [String: [String: Any]] {
        let r = try run(["ls", "--offline", "--json"])
        guard r.status == 0 else { throw TestFailure("ls --offline failed (\(r.status)): \(r.stderr)") }
        let rows = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
        return Dictionary(rows.map { ($0["path"] as? String ?? "", $0) }, uniquingKeysWith: { $1 })
    }

    /// Bytes the index claims: `cached_bytes` of partial entries, `size` of cached ones. 0 before the first run.
    func cachedBytes() throws -> Int64 {
        guard FileManager.default.fileExists(atPath: cacheDir.appendingPathComponent("index.sqlite").path) else { return 0 }
        return try index().values.reduce(0) { sum, row in
            let key = row["state"] as? String == "cached" ? "size" : "cached_bytes"
            return sum + ((row[key] as? NSNumber)?.int64Value ?? 0)
        }
    }

    /// Every file of `library` is in tracks/ byte for byte, and nothing else is.
    func expectTracksEqual(_ library: Library, sourceLocation: SourceLocation = #_sourceLocation) throws {
        var found: Set<String> = []
        if let walker = FileManager.default.enumerator(at: tracks, includingPropertiesForKeys: [.isRegularFileKey]) {
            for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
                found.insert(String(url.path.dropFirst(tracks.path.count + 1)))
            }
        }
        #expect(found == Set(library.files.keys), "tracks/ holds other files than the library", sourceLocation: sourceLocation)
        for (path, data) in library.files {
            let local = try? Data(contentsOf: tracks.appendingPathComponent(path))
            #expect(local == data, "\(path) differs from the source (\(local?.count ?? -1) bytes vs \(data.count))",
                    sourceLocation: sourceLocation)
        }
    }
}

/// A `cloudsync` process started in the background; output goes to files.
struct Running {
    let process: Process
    let out: URL
    let err: URL

    var stderr: String { (try? String(contentsOf: err, encoding: .utf8)) ?? "" }

    func wait(timeout: TimeInterval) throws -> Env.Result {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw TestFailure("cloudsync \(process.arguments ?? []) did not finish within \(Int(timeout)) s; stderr: \(stderr)")
            }
            usleep(10_000)
        }
        process.waitUntilExit()
        return Env.Result(status: process.terminationStatus,
                          stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "", stderr: stderr)
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// SIGTERM, then waits for the exit (SIGKILL after 10 s).
    func stop() {
        guard process.isRunning else { return }
        signal(SIGTERM)
        _ = try? wait(timeout: 10)
    }

    /// The first line the process printed on stdout (`listening on URL` for serve); fails after `timeout`.
    func firstStdoutLine(timeout: TimeInterval) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
            if let newline = text.firstIndex(of: "\n") { return String(text[..<newline]) }
            guard process.isRunning else { break }
            usleep(10_000)
        }
        throw TestFailure("cloudsync \(process.arguments ?? []) printed no line within \(Int(timeout)) s; stderr: \(stderr)")
    }
}

/// One GET as the fake saw it.
struct Served: Sendable {
    var t: Double
    var path: String
    var range: String?
    var status: Int
    var bytes: Int64
    var start: Int64?
    /// When an injected status answer left the fake.
    var answered: Double?
    /// When the answer was over (nil while it runs).
    var end: Double?

    /// The first byte asked for by `Range: bytes=N-M`, else 0.
    var rangeStart: Int64 {
        guard let range, let dash = range.firstIndex(of: "-"), range.hasPrefix("bytes=") else { return 0 }
        return Int64(range[range.index(range.startIndex, offsetBy: 6) ..< dash]) ?? 0
    }

    /// The bytes asked for by `Range: bytes=N-M` as a half-open range; nil without a closed Range.
    var requested: Range<Int64>? {
        guard let range, let dash = range.firstIndex(of: "-"), range.hasPrefix("bytes="),
              let last = Int64(range[range.index(after: dash)...]) else { return nil }
        return rangeStart ..< last + 1
    }
}

/// A python3 server process: the fault fake (`--root`) or the counting proxy (`--proxy-to`).
final class FakeServer {
    let process: Process
    let port: Int
    private let stdin: Pipe

    var url: String { "http://127.0.0.1:\(port)/dav/" }

    init(arguments: [String]) throws {
        let python = try Paths.program("python3", package: "python3")
        process = Process()
        process.executableURL = python
        process.arguments = [Paths.fake.path] + arguments
        stdin = Pipe()
        let out = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        try process.run()
        // The first stdout line is the port; a fake that dies early ends the pipe instead of hanging.
        var line = Data()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line += byte
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            throw TestFailure("files_fake.py did not start (arguments \(arguments))")
        }
        self.port = port
    }

    /// Serves `root` under /dav/ with the given faults (JSON list) and pacing.
    convenience init(root: URL, rate: Int = 0, delayMS: Int = 0, faults: String? = nil) throws {
        var args = ["--root", root.path]
        if rate > 0 { args += ["--rate", String(rate)] }
        if delayMS > 0 { args += ["--delay", String(delayMS)] }
        if let faults { args += ["--faults", faults] }
        try self.init(arguments: args)
    }

    func stop() {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    private func request(_ path: String, method: String = "GET", body: Data? = nil) throws -> Data {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.httpBody = body
        request.timeoutInterval = 10
        let box = ResultBox()
        let semaphore = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, _, error in
            box.set(data, error)
            semaphore.signal()
        }.resume()
        guard semaphore.wait(timeout: .now() + 15) == .success else { throw TestFailure("the fake did not answer \(path)") }
        if let error = box.error { throw error }
        return box.data ?? Data()
    }

    func stats() throws -> [String: Int64] {
        let object = try JSONSerialization.jsonObject(with: request("/_stats")) as? [String: NSNumber] ?? [:]
        return object.mapValues(\.int64Value)
    }

    /// Waits until no GET is being answered (after a kill the fake notices the closed socket at its next write).
    func settle() throws {
        for _ in 0 ..< 500 {
            if try stats()["active"] == 0 { return }
            usleep(10_000)
        }
        throw TestFailure("the fake still answers GETs 5 s after the client went away")
    }

    func log() throws -> [Served] {
        let rows = try JSONSerialization.jsonObject(with: request("/_log")) as? [[String: Any]] ?? []
        return rows.map { row in
            Served(t: (row["t"] as? NSNumber)?.doubleValue ?? 0, path: row["path"] as? String ?? "",
                   range: row["range"] as? String, status: (row["status"] as? NSNumber)?.intValue ?? 0,
                   bytes: (row["bytes"] as? NSNumber)?.int64Value ?? 0, start: (row["start"] as? NSNumber)?.int64Value,
                   answered: (row["answered"] as? NSNumber)?.doubleValue, end: (row["end"] as? NSNumber)?.doubleValue)
        }
    }

    func reset() throws { _ = try request("/_reset", method: "POST") }

    func setFaults(_ json: String) throws { _ = try request("/_faults", method: "POST", body: Data(json.utf8)) }
}

private final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var storedData: Data?
    private var storedError: (any Error)?
    func set(_ data: Data?, _ error: (any Error)?) { lock.withLock { storedData = data; storedError = error } }
    var data: Data? { lock.withLock { storedData } }
    var error: (any Error)? { lock.withLock { storedError } }
}

/// The fake and an env on a seeded library; removed by `cleanup()`.
struct Fixture {
    var library: Library
    let server: FakeServer
    let env: Env

    init(seed: UInt64, files: [(String, Int)], rate: Int = 0, delayMS: Int = 0, faults: String? = nil,
         checkpoint: String = "256KiB", cache: [String] = [], pull: [String] = []) throws {
        library = try Library.make(in: try temporaryDirectory("lib"), seed: seed, files: files)
        server = try FakeServer(root: library.root, rate: rate, delayMS: delayMS, faults: faults)
        env = try Env(url: server.url, checkpoint: checkpoint, cache: cache, pull: pull)
    }

    func cleanup() {
        server.stop()
        env.cleanup()
        try? FileManager.default.removeItem(at: library.root)
    }
}

extension Fixture {
    /// After a pull `r` during which the file at `path` changed into `new`: either the pull succeeded and the
    /// track is the new version entirely, or it failed (exit 1) naming the change and left no track — never a
    /// mix of versions.
    func expectNewVersionOrCleanFailure(_ r: Env.Result, path: String, new: Data) {
        let track = try? Data(contentsOf: env.tracks.appendingPathComponent(path))
        if r.status == 0 {
            #expect(track == new, "exit 0 but the track is not the new version entirely")
        } else {
            #expect(r.status == 1, "stderr: \(r.stderr)")
            #expect(r.stderr.contains(path) && r.stderr.contains("changed"), "stderr: \(r.stderr)")
            #expect(track == nil, "a failed changed file must not appear in tracks/")
        }
    }
}

/// A real WebDAV server (`Tests/servers/start-webdav.sh`: Debian's rclone, Apache mod_dav or nginx dav-ext) serving
/// a folder under /dav/ with Basic auth demo/demo-pass. `stop()` ends it and removes its state.
struct RealWebDAV {
    let port: Int
    private let pid: Int32
    private let stateDirectory: String?

    /// Starts `server` on `root`; `fresh`: rclone lists the folder afresh on every request (for a test that changes
    /// it under the running server; Apache and nginx always do).
    static func start(_ server: String, root: URL, fresh: Bool = false) throws -> RealWebDAV {
        // Output to files, not pipes: the server started in the background may inherit a pipe and keep it open.
        let started = Process()
        started.executableURL = try Paths.program("bash", package: "bash")
        started.arguments = [Paths.startWebDAV.path, server, root.path] + (fresh ? ["fresh"] : [])
        let outFile = root.deletingLastPathComponent().appendingPathComponent(root.lastPathComponent + ".out")
        let errFile = root.deletingLastPathComponent().appendingPathComponent(root.lastPathComponent + ".err")
        defer { try? FileManager.default.removeItem(at: outFile); try? FileManager.default.removeItem(at: errFile) }
        _ = FileManager.default.createFile(atPath: outFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
        started.standardOutput = try FileHandle(forWritingTo: outFile)
        started.standardError = try FileHandle(forWritingTo: errFile)
        started.standardInput = FileHandle.nullDevice
        try started.run()
        // The script prints "PORT PID STATEDIR" and exits; its exit is not always observed by Foundation's
        // Process on Linux once it has left a server behind, so wait for the line (or an error) instead.
        var line = ""
        let found = eventuallyBlocking(30) {
            line = (try? String(contentsOf: outFile, encoding: .utf8)) ?? ""
            let errors = (try? String(contentsOf: errFile, encoding: .utf8)) ?? ""
            return line.hasSuffix("\n") || !errors.isEmpty
        }
        let errors = (try? String(contentsOf: errFile, encoding: .utf8)) ?? ""
        guard found, line.hasSuffix("\n") else { throw TestFailure("start-webdav.sh \(server) did not start: \(errors)") }
        let fields = line.split(separator: " ").map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) }
        guard let port = fields.first.flatMap({ Int($0) }), let pid = fields.dropFirst().first.flatMap({ Int32($0) }) else {
            throw TestFailure("start-webdav.sh \(server) printed '\(line)'")
        }
        return RealWebDAV(port: port, pid: pid, stateDirectory: fields.count > 2 ? fields[2] : nil)
    }

    func stop() {
        // The server leads its own session (setsid): stop its whole group. Apache may ignore SIGTERM
        // here, so SIGKILL follows when the group is still there after 3 s.
        kill(-pid, SIGTERM)
        if !eventuallyBlocking(3, { kill(-pid, 0) != 0 }) { kill(-pid, SIGKILL) }
        if let stateDirectory { try? FileManager.default.removeItem(atPath: stateDirectory) }
    }
}
