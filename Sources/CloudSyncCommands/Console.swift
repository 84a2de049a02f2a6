import CloudSyncCore
import Foundation
import Synchronization

/// Where commands print: data on stdout, logs and progress on stderr.
///
/// A live area (the progress frame) may sit at the bottom of stderr's terminal: every other write erases it
/// first and draws it again below what was written, so log lines and warnings appear above it and the frame
/// never leaves stale copies. Lines of the frame are cut to the terminal's width by their producer
/// (``ProgressFrame``), so each takes exactly one row and the cursor can be moved back over them.
final class Console: Sendable {
    /// stderr is a terminal: progress bars allowed.
    let stderrIsTTY: Bool
    let stdoutIsTTY: Bool
    let stdinIsTTY: Bool
    /// Color allowed: a TTY and NO_COLOR unset.
    let color: Bool
    /// The terminal understands cursor movement (stderr is a terminal and TERM is not `dumb`).
    let cursorMovement: Bool
    /// TERM=dumb: never any cursor movement, even with `--progress`.
    let dumbTerminal: Bool
    let level: LogLevel
    /// `--log-file`: a record of the run (stderr's lines and the logger's up to its own level), or nil.
    let logFile: LogFile?
    /// `$COLUMNS`, used when the width of stderr cannot be asked (not a terminal).
    private let columns: Int?
    private let screen = Mutex(Screen())
    /// The errno of the first write to stdout that failed (0: none): a full disk under `> playlist.m3u` from cron.
    private let stdoutFailure = Atomic<Int32>(0)

    /// Why stdout lost output, if it did (``CommandLineTool`` turns that into an error and exit 74).
    var stdoutWriteError: Int32? {
        let e = stdoutFailure.load(ordering: .relaxed)
        return e == 0 ? nil : e
    }

    private struct Screen {
        /// The live area's lines as drawn now (empty: none).
        var frame: [String] = []
    }

    init(environment: [String: String], level: LogLevel, logFile: LogFile? = nil) {
        self.logFile = logFile
        stderrIsTTY = isatty(STDERR_FILENO) == 1
        stdoutIsTTY = isatty(STDOUT_FILENO) == 1
        stdinIsTTY = isatty(STDIN_FILENO) == 1
        let dumb = environment["TERM"] == "dumb"
        color = stderrIsTTY && (environment["NO_COLOR"] ?? "").isEmpty && !dumb
        cursorMovement = stderrIsTTY && !dumb
        dumbTerminal = dumb
        columns = environment["COLUMNS"].flatMap { Int($0) }.flatMap { (1 ... 10_000).contains($0) ? $0 : nil }
        self.level = level
    }

    /// Columns of stderr's terminal (asked at each call, so a resized window is followed), else `$COLUMNS`, else 80.
    var width: Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return columns ?? 80
    }

    func out(_ text: String) { write(STDOUT_FILENO, text, aroundFrame: stdoutIsTTY) }
    func err(_ text: String) {
        write(STDERR_FILENO, text, aroundFrame: true)
        logFile?.append(text)
    }

    /// For the person at the terminal only: on stderr, never in `--log-file` (a login's device code and
    /// authorization URL are for now, not for a record).
    func toPerson(_ text: String) { write(STDERR_FILENO, text, aroundFrame: true) }

    /// An informational line: on stderr unless `quiet` (-q: errors only), and in the log file always, so
    /// `cloudsync -q pull --log-file F` from cron keeps a record while the mail stays empty.
    func note(_ text: String, quiet: Bool) {
        if quiet { logFile?.append(text) } else { err(text) }
    }

    /// Replaces the live area with `lines` (each at most one row wide); `[]` removes it.
    func showFrame(_ lines: [String]) {
        screen.withLock { screen in
            Self.writeAll(STDERR_FILENO, Self.erase(screen.frame.count) + Self.draw(lines))
            screen.frame = lines
        }
    }

    /// A logger that writes `cloudsync: level: message` lines to stderr, control characters made visible.
    /// With a log file, each message goes to stderr up to `level` and to the file up to the file's level.
    var logger: Logger {
        Logger(level: max(level, logFile?.level ?? level)) { [self] lvl, message in
            let prefix: String
            switch lvl {
            case .error: prefix = paint("error:", "31")
            case .warning: prefix = paint("warning:", "33")
            case .info: prefix = "info:"
            case .debug: prefix = "debug:"
            }
            let line = "cloudsync: \(prefix) \(TerminalText.escape(message))\n"
            if lvl <= level { write(STDERR_FILENO, line, aroundFrame: true) }
            if let logFile, lvl <= logFile.level { logFile.append(line) }
        }
    }

    func paint(_ text: String, _ code: String) -> String { color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }

    /// Cursor up over `rows` rows drawn by ``draw(_:)``, to the first column, and erase to the end of the screen.
    private static func erase(_ rows: Int) -> String {
        rows == 0 ? "" : "\u{1B}[\(rows)A\r\u{1B}[J"
    }

    private static func draw(_ lines: [String]) -> String {
        lines.map { $0 + "\n" }.joined()
    }

    private func write(_ fd: Int32, _ text: String, aroundFrame: Bool) {
        screen.withLock { screen in
            let failure: Int32
            if aroundFrame && !screen.frame.isEmpty {
                Self.writeAll(STDERR_FILENO, Self.erase(screen.frame.count))
                failure = Self.writeAll(fd, text)
                Self.writeAll(STDERR_FILENO, Self.draw(screen.frame))
            } else {
                failure = Self.writeAll(fd, text)
            }
            // A closed pipe (`cloudsync ls | head`) is the reader's choice, not lost output.
            if fd == STDOUT_FILENO, failure != 0, failure != EPIPE {
                _ = stdoutFailure.compareExchange(expected: 0, desired: failure, ordering: .relaxed)
            }
        }
    }

    /// Writes all of `text`; the errno that stopped it, or 0.
    @discardableResult
    private static func writeAll(_ fd: Int32, _ text: String) -> Int32 {
        let data = Array(text.utf8)
        var offset = 0
        while offset < data.count {
            let n = data.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Foundation.write(fd, base + offset, buffer.count - offset)
            }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return n == 0 ? EIO : errno }
            offset += n
        }
        return 0
    }
}

/// `--log-file PATH`: lines appended (O_APPEND, so runs from cron add to one record), each with the local time
/// and zone, colour codes removed; created 0600. Progress frames never reach it.
final class LogFile: Sendable {
    let level: LogLevel
    private let fd: Int32
    /// Guards the writes and the one formatter of the time stamps (made once, not per line).
    private let lock: Mutex<DateFormatter>

    /// Opens `path` for appending; the error names the file and the reason.
    init(path: String, level: LogLevel) throws {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LogFileError(path: path, errno: errno) }
        self.fd = fd
        self.level = level
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "yyyy-MM-dd'T'HH:mm:ssxxx"
        lock = Mutex(f)
    }

    deinit { close(fd) }

    func append(_ text: String) {
        let lines = Self.plain(text).split(separator: "\n", omittingEmptySubsequences: true)
        guard !lines.isEmpty else { return }
        lock.withLock { formatter in
            let stamp = formatter.string(from: Date())
            let out = lines.map { stamp + " " + $0 + "\n" }.joined()
            let bytes = Array(out.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
                if n <= 0 { if errno == EINTR { continue }; return }
                offset += n
            }
        }
    }

    /// `text` without SGR colour sequences (`ESC [ … m`) and without CR.
    static func plain(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        var scalars = text.unicodeScalars.makeIterator()
        while let c = scalars.next() {
            if c == "\u{1B}" {
                while let d = scalars.next(), !(d.properties.isAlphabetic) {}
                continue
            }
            if c != "\r" { out.append(c) }
        }
        return String(out)
    }
}

struct LogFileError: Error, ExitCodeProviding, CustomStringConvertible {
    var path: String
    var errno: Int32
    var exitCode: ExitCode { .ioError }
    var description: String {
        "cannot open the log file \(path): \(String(cString: strerror(errno))); check that its folder exists and is writable"
    }
}
