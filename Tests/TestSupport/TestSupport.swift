// Shared test support: temporary directories, child processes whose port is read from their output,
// repository paths, and a tiny loopback HTTP server. Loopback only; everything is bounded in time.
import Foundation
import Testing

/// Where things are in the repository checkout the tests run from.
public enum RepositoryPaths {
    /// The repository root (found from this file's path, so it works from any working directory).
    public static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `Tests/Fakes/<name>`.
    public static func fake(_ name: String) -> URL {
        root.appendingPathComponent("Tests/Fakes").appendingPathComponent(name)
    }
}

/// A directory under the system temporary directory, removed with everything in it when this object dies.
public final class TemporaryDirectory: Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(prefix: String = "cloudsync-test") throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory())
        url = base.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { cleanup() }

    /// Removes the directory now (also done when this object dies). `defer { dir.cleanup() }` keeps the
    /// object alive to the end of the scope, which Swift does not promise for a local that is no longer used.
    public func cleanup() { try? FileManager.default.removeItem(at: url) }

    /// `url/relative`.
    public func file(_ relative: String) -> URL { url.appendingPathComponent(relative) }
}

/// Runs `body` with a fresh temporary directory that is removed afterwards.
public func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let dir = try TemporaryDirectory()
    defer { withExtendedLifetime(dir) {} }
    return try await body(dir.url)
}

/// Finds an executable on PATH (or an absolute path), or nil.
public func which(_ program: String) -> String? {
    if program.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: program) ? program : nil }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(program)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// An error from test support, with what to do about it.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A child process whose stdout is read line by line (stderr is passed through). Terminated (SIGTERM, then
/// SIGKILL after a second) by `stop()` or when the object dies. Its stdin is a pipe that closes when this
/// process exits, so children that exit on EOF (like `Tests/Fakes/http_faults.py`) never outlive the tests.
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    private let stdout = Pipe()
    /// Kept open for the child's lifetime: a child may treat EOF on stdin as "my parent is gone".
    private let stdin = Pipe()
    private let lock = NSLock()
    private var buffer = Data()
    private var lines: [String] = []
    private var ended = false

    /// Starts `program` (a name on PATH or an absolute path). Throws a clear error when it is not installed.
    public init(_ program: String, _ arguments: [String], environment: [String: String]? = nil,
                currentDirectory: URL? = nil) throws {
        guard let executable = which(program) else {
            throw TestSupportError("\(program) is not installed; install it (the Makefile does: apt-get install the Debian package providing it)")
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        process.standardOutput = stdout
        process.standardInput = stdin
        try process.run()
        // A plain thread doing blocking reads: FileHandle.availableData traps on EAGAIN. The thread owns the
        // handle, so the descriptor stays open until it has read EOF: a descriptor closed under it could be
        // reused by another socket (a curl connection) whose bytes it would then steal.
        let handle = stdout.fileHandleForReading
        Thread.detachNewThread { [weak self, handle] in
            let fd = handle.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                guard let self else { return }
                self.received(n > 0 ? Data(buffer[0..<n]) : Data())
                if n <= 0 { return }
            }
        }
    }

    deinit { stop() }

    private func received(_ chunk: Data) {
        lock.lock()
        defer { lock.unlock() }
        if chunk.isEmpty {
            ended = true
            return
        }
        buffer.append(chunk)
        while let nl = buffer.firstIndex(of: 0x0A) {
            lines.append(String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self))
            buffer = Data(buffer[(nl + 1)...])
        }
    }

    /// Waits (polling, at most `timeout`) for a stdout line starting with `prefix`; returns the rest of it.
    public func waitForLine(prefix: String, timeout: TimeInterval = 10) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        // Looks once more after the deadline: on a loaded machine (2 cores, tests blocking the cooperative pool)
        // this task may wake long after its line arrived, and must not call that a timeout.
        while true {
            let late = Date() >= deadline
            let (found, done): (String?, Bool) = {
                lock.lock()
                defer { lock.unlock() }
                return (lines.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }, ended)
            }()
            if let found { return found.trimmingCharacters(in: .whitespaces) }
            // Only EOF says every line was read: a child that printed its line and exited at once (start-webdav.sh)
            // may be gone before the reader thread has taken the line from the pipe.
            if done {
                throw TestSupportError("\(process.executableURL?.lastPathComponent ?? "child") exited (status \(process.isRunning ? 0 : process.terminationStatus)) before printing '\(prefix)'")
            }
            if late { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestSupportError("\(process.executableURL?.lastPathComponent ?? "child") printed no '\(prefix)' line within \(timeout) s")
    }

    /// Waits for a line `PORT <n>` (or `<prefix><n>`) and returns n.
    public func waitForPort(prefix: String = "PORT ", timeout: TimeInterval = 10) async throws -> Int {
        let text = try await waitForLine(prefix: prefix, timeout: timeout)
        guard let port = Int(text), port > 0 else { throw TestSupportError("not a port: '\(text)'") }
        return port
    }

    /// Terminates the process (SIGTERM, SIGKILL after 1 s) and waits for it at most 5 s more. (Not
    /// `waitUntilExit`: a child that started a daemon sharing its descriptors could make that wait forever.)
    public func stop() {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(1)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for _ in 0 ..< 500 where process.isRunning { usleep(10_000) }
    }

    /// Starts `program arguments` and returns it with its first stdout line; stops it and throws when no line
    /// comes within `timeout` seconds.
    public static func startReadingFirstLine(_ program: String, _ arguments: [String],
                                             timeout: TimeInterval) async throws -> (ChildProcess, String) {
        let child = try ChildProcess(program, arguments)
        do {
            return (child, try await child.waitForLine(prefix: "", timeout: timeout))
        } catch {
            child.stop()
            throw error
        }
    }
}

/// The Python fault server `Tests/Fakes/http_faults.py` on a free loopback port (see its docstring for routes).
public final class FaultServer: Sendable {
    public let port: Int
    private let child: ChildProcess

    public init() async throws {
        let script = RepositoryPaths.fake("http_faults.py")
        child = try ChildProcess("python3", [script.path])
        port = try await child.waitForPort()
    }

    /// `http://127.0.0.1:<port><path>`.
    public func url(_ path: String, host: String = "127.0.0.1") -> URL {
        URL(string: "http://\(host):\(port)\(path)")!
    }

    public func stop() { child.stop() }
}

/// Polls `condition` every 20 ms for at most `seconds`; the check after the deadline decides. For async tests:
/// it sleeps without holding a thread.
public func eventually(_ seconds: Double = 10, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try condition()
}

/// ``eventually(_:_:)`` for synchronous code (a `defer`, a test that is not async): blocks the calling thread
/// between checks (10 ms).
public func eventuallyBlocking(_ seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}
