import CloudSyncCore
import Foundation
import Synchronization

/// Where commands print: data on stdout, logs and progress on stderr.
final class Console: Sendable {
    /// stderr is a terminal: progress bars allowed.
    let stderrIsTTY: Bool
    let stdinIsTTY: Bool
    /// Color allowed: a TTY and NO_COLOR unset.
    let color: Bool
    let level: LogLevel
    private let lock = Mutex(())

    init(environment: [String: String], level: LogLevel) {
        stderrIsTTY = isatty(STDERR_FILENO) == 1
        stdinIsTTY = isatty(STDIN_FILENO) == 1
        color = stderrIsTTY && (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
        self.level = level
    }

    func out(_ text: String) { write(STDOUT_FILENO, text) }
    func err(_ text: String) { write(STDERR_FILENO, text) }

    /// A logger that writes `cloudsync: level: message` lines to stderr.
    var logger: Logger {
        Logger(level: level) { [self] lvl, message in
            let prefix: String
            switch lvl {
            case .error: prefix = paint("error:", "31")
            case .warning: prefix = paint("warning:", "33")
            case .info: prefix = "info:"
            case .debug: prefix = "debug:"
            }
            err("cloudsync: \(prefix) \(message)\n")
        }
    }

    func paint(_ text: String, _ code: String) -> String { color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }

    private func write(_ fd: Int32, _ text: String) {
        lock.withLock { _ in
            let data = Array(text.utf8)
            var offset = 0
            while offset < data.count {
                let n = data.withUnsafeBytes { buffer -> Int in
                    guard let base = buffer.baseAddress else { return 0 }
                    return Foundation.write(fd, base + offset, buffer.count - offset)
                }
                if n <= 0 { if errno == EINTR { continue }; return }
                offset += n
            }
        }
    }
}
