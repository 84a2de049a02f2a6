// Shared support for the provider tests: the Python fakes of Tests/Fakes as child processes, an in-memory
// `ByteSink`, a pacer that records the waits it is asked for, a log recorder, the pages of one listing, and a transport
// that must not be used. Each provider's own fake wrapper (URLs, control endpoints, log decoding) is built on these pieces.
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization

/// A Python fake server `Tests/Fakes/<script>` running as a child process for one test.
///
/// Contract with the script: it listens on 127.0.0.1 only, prints the port numbers it listens on as its first
/// stdout line (separated by spaces), and exits when its stdin closes. This object holds the write end of the
/// child's stdin open until `stop()`; the child's stderr goes to the test process's stderr, so a traceback of
/// the fake shows in the test output. Nothing reads stdout after the first line.
///
/// The fake is stopped by `stop()` or, at the latest, when this object dies.
public final class PythonFake: @unchecked Sendable {
    /// The first stdout line of the script, without its newline.
    public let firstLine: String
    /// The port numbers of `firstLine`, in the order printed; exactly as many as `start` was told to expect.
    public let ports: [Int]

    private let process: Process
    private let stdin: Pipe

    private init(firstLine: String, ports: [Int], process: Process, stdin: Pipe) {
        self.firstLine = firstLine
        self.ports = ports
        self.process = process
        self.stdin = stdin
    }

    /// Starts `python3 Tests/Fakes/<script> <arguments…>` and waits for its first stdout line, which must hold
    /// `portCount` port numbers.
    ///
    /// Throws `TestSupportError` when python3 is not installed, or when the line does not come within `timeout`
    /// seconds (the child is then stopped, so a silent fake never hangs a test), or when it is not `portCount`
    /// port numbers. No child is left running when this throws.
    public static func start(_ script: String, arguments: [String] = [], portCount: Int = 1,
                             timeout: TimeInterval = 60) async throws -> PythonFake {
        guard let python = which("python3") else {
            throw TestSupportError("python3 is not installed; the provider tests run their fakes with it (apt-get install python3)")
        }
        let process = Process()
        let stdin = Pipe()
        let stdout = Pipe()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [RepositoryPaths.fake(script).path] + arguments
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()

        let line: String
        do {
            line = try await firstLine(of: stdout.fileHandleForReading, from: process, script: script, within: timeout)
        } catch {
            stop(process, closing: stdin)
            throw error
        }
        let ports = line.split(separator: " ").map { Int($0) ?? 0 }
        guard ports.count == portCount, ports.allSatisfy({ $0 > 0 }) else {
            stop(process, closing: stdin)
            throw TestSupportError("python3 Tests/Fakes/\(script) printed '\(line)' instead of \(portCount) port number(s); its stderr is in the test output above")
        }
        return PythonFake(firstLine: line, ports: ports, process: process, stdin: stdin)
    }

    /// Starts a fake that takes its scenario as one JSON argument (every fake of Tests/Fakes but http_faults.py):
    /// `start(script, arguments: [<spec as JSON>], portCount:timeout:)`, with the same contract and errors.
    public static func start(_ script: String, spec: [String: Any], portCount: Int = 1,
                             timeout: TimeInterval = 60) async throws -> PythonFake {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: spec), as: UTF8.self)
        return try await start(script, arguments: [json], portCount: portCount, timeout: timeout)
    }

    /// `http://<host>:<ports[index]>`: the root of the fake's `index`-th server.
    public func baseURL(port index: Int = 0, host: String = "127.0.0.1") -> URL {
        URL(string: "http://\(host):\(ports[index])") ?? URL(fileURLWithPath: "/")
    }

    /// `POST /_control` of the fakes' one control protocol (`Tests/Fakes/fake_control.py`) on the `port`-th server:
    /// `ops` applied in order; returns each op's result. Throws when the fake refuses an op (400/404), naming why.
    @discardableResult
    public func control(_ ops: [[String: Any]], port index: Int = 0, via transport: any Transport) async throws -> [Any] {
        let request = HTTPRequest(method: "POST", url: baseURL(port: index).appendingPathComponent("_control"),
                                  headers: ["Content-Type": "application/json"], body: try JSONSerialization.data(withJSONObject: ops))
        let response = try await transport.send(request)
        let answer = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        guard response.status == 200 else {
            throw TestSupportError("control \(ops) answered \(response.status): \(answer?["control_error"] ?? String(decoding: response.body, as: UTF8.self))")
        }
        return answer?["results"] as? [Any] ?? []
    }

    /// `GET /_log` of the `port`-th server: the requests it answered, oldest first, as `Entry` (the common fields
    /// `method`, `path`, `range`, `if_range`, `auth`, `status` and the fake's own).
    public func log<Entry: Decodable>(_ type: Entry.Type = Entry.self, port index: Int = 0, via transport: any Transport)
        async throws -> [Entry] {
        let response = try await transport.send(HTTPRequest(url: baseURL(port: index).appendingPathComponent("_log")))
        return try JSONDecoder().decode([Entry].self, from: response.body)
    }

    /// `POST /_log/clear` of the `port`-th server: the log starts again empty.
    public func clearLog(port index: Int = 0, via transport: any Transport) async throws {
        let response = try await transport.send(HTTPRequest(method: "POST", url: baseURL(port: index).appendingPathComponent("_log/clear")))
        guard response.status == 200 || response.status == 204 else { throw TestSupportError("POST /_log/clear answered \(response.status)") }
    }

    /// Reads `handle` up to the first newline or end of file. A watchdog kills `process` if no line has come
    /// within `timeout` seconds, which ends the read; that case throws.
    private static func firstLine(of handle: FileHandle, from process: Process, script: String,
                                  within timeout: TimeInterval) async throws -> String {
        enum Race { case waiting, lineRead, timedOut }
        let race = Mutex(Race.waiting)
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [process] in
            let expired = race.withLock { state in
                guard state == .waiting else { return false }
                state = .timedOut
                return true
            }
            // SIGKILL, not SIGTERM: a test process may block SIGTERM, and its children inherit that.
            if expired, process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        // The race is decided where the line is read, not where the awaiting task resumes: blocking tests may
        // hold every cooperative thread for a while, and a line that came in time must not count as late.
        let (line, inTime): (String, Bool) = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var bytes: [UInt8] = []
                while true {
                    let chunk = handle.readData(ofLength: 1)
                    if chunk.isEmpty || chunk.first == UInt8(ascii: "\n") { break }
                    bytes.append(contentsOf: chunk)
                }
                let inTime = race.withLock { state in
                    guard state == .waiting else { return false }
                    state = .lineRead
                    return true
                }
                continuation.resume(returning: (String(decoding: bytes, as: UTF8.self), inTime))
            }
        }
        guard inTime else {
            throw TestSupportError("python3 Tests/Fakes/\(script) printed no line within \(timeout) s and was stopped; its stderr is in the test output above")
        }
        return line
    }

    /// Closes the child's stdin (its stop signal) and gives it a second to exit; then SIGTERM, and SIGKILL after
    /// another second (a test process may block SIGTERM, and its children inherit that). Returns once the child
    /// has exited, at most about two seconds later. Safe to call more than once.
    public func stop() { Self.stop(process, closing: stdin) }

    private static func stop(_ process: Process, closing stdin: Pipe) {
        try? stdin.fileHandleForWriting.close()
        if !exits(process, within: 1) {
            process.terminate()
            if !exits(process, within: 1) { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
    }

    /// Whether `process` has exited, polled every 10 ms for at most `seconds`.
    private static func exits(_ process: Process, within seconds: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        return !process.isRunning
    }

    deinit { stop() }
}

/// A `ByteSink` into memory: the bytes written so far, gaps before a write filled with zeros.
public final class MemoryByteSink: ByteSink {
    private let storage = Mutex<[UInt8]>([])

    public init() {}

    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        storage.withLock { buffer in
            let end = Int(offset) + bytes.count
            if buffer.count < end { buffer.append(contentsOf: repeatElement(0, count: end - buffer.count)) }
            buffer.replaceSubrange(Int(offset)..<end, with: bytes)
        }
    }

    /// Everything written, from offset 0.
    public var bytes: [UInt8] { storage.withLock { $0 } }
}

/// The fields every fake's request log has (`GET /_log` of `Tests/Fakes/fake_control.py`), whatever it adds.
public struct FakeRequest: Decodable, Sendable {
    public var method: String
    public var path: String
    public var range: String?
    public var if_range: String?
    public var auth: Bool
    public var status: Int
}

/// Makes pacers that record every wait they are asked for and then wait at most `sleepCap` seconds of it, so a
/// test sees backoff and Retry-After honoured (by the recorded values) without timing anything.
public final class SleepRecorder: Sendable {
    private let delays = Mutex<[TimeInterval]>([])
    private let sleepCap: TimeInterval

    /// - Parameter sleepCap: the longest real wait of one recorded delay, in seconds.
    public init(sleepingAtMost sleepCap: TimeInterval = 2) {
        self.sleepCap = sleepCap
    }

    /// The delays asked for so far by every pacer of this recorder, in the order asked.
    public var recorded: [TimeInterval] { delays.withLock { $0 } }

    /// A pacer with `retries` retries and a tiny backoff (10 ms base, 50 ms at most) whose waits are recorded here.
    public func pacer(retries: Int = 4) -> Pacer {
        Pacer(policy: .init(retries: retries, baseDelay: 0.01, maxDelay: 0.05)) { seconds in
            self.delays.withLock { $0.append(seconds) }
            try await Task.sleep(for: .seconds(min(seconds, self.sleepCap)))
        }
    }
}

/// Collects what a `Logger` writes, at every level from debug up.
public final class LogRecorder: Sendable {
    private let lines = Mutex<[(LogLevel, String)]>([])

    public init() {}

    /// A debug-level logger whose messages are recorded here.
    public var logger: Logger { Logger(level: .debug) { level, message in self.lines.withLock { $0.append((level, message)) } } }
    /// Every message so far, in order.
    public var all: [String] { lines.withLock { $0.map(\.1) } }
    /// The warning messages so far, in order.
    public var warnings: [String] { lines.withLock { $0.filter { $0.0 == .warning }.map(\.1) } }
}

/// Every page of one listing of `provider` from `cursor`, in the order the stream yields them; rethrows the
/// stream's error.
public func listingPages(_ provider: some Provider, cursor: String? = nil) async throws -> [ListingPage] {
    var pages: [ListingPage] = []
    for try await page in provider.listAudio(cursor: cursor) { pages.append(page) }
    return pages
}

/// A transport that must never be used (parsing tests, listings without downloads): every call throws.
public struct UnusedTransport: Transport {
    public init() {}

    public func send(_ request: HTTPRequest, into sink: any ResponseBodySink) async throws -> HTTPResponse {
        throw ProviderError(.invalidResponse, "UnusedTransport.send called for \(request.method) \(request.url)")
    }

    public func download(_ request: HTTPRequest, range: ClosedRange<Int64>?, ifRange: String?, whenRangeIgnored: IgnoredRange,
                         into sink: any ByteSink) async throws -> DownloadOutcome {
        throw ProviderError(.invalidResponse, "UnusedTransport.download called")
    }
}
