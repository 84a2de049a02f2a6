/// Process exit codes, the one place they are defined. README lists them.
public enum ExitCode: Int32, Sendable, CaseIterable {
    case ok = 0
    /// Some items failed; the rest completed.
    case partialFailure = 1
    case usage = 2
    case config = 3
    /// Authentication needed or refused.
    case auth = 4
    /// A remote stayed unavailable after retries.
    case unavailable = 5
    /// Local I/O error, e.g. disk full.
    case ioError = 74
    /// Another run holds the lock.
    case locked = 75
    /// Interrupted by SIGINT (Ctrl-C): 128 + 2, what a shell reports for a process the signal killed.
    case interrupted = 130
    /// Stopped by SIGTERM or SIGHUP: 128 + 15.
    case terminated = 143

    public var meaning: String {
        switch self {
        case .ok: "success: everything asked for is done"
        case .partialFailure: "some files failed, or some folders could not be read; the others completed"
        case .usage: "usage error: unknown command, flag or value"
        case .config: "configuration error"
        case .auth: "authentication needed or refused: run `cloudsync login NAME`"
        case .unavailable: "remote unavailable after retries (network, server errors, rate limits)"
        case .ioError: "local I/O error, e.g. disk full or permission denied"
        case .locked: "another cloudsync run holds the lock for this remote"
        case .interrupted: "interrupted (SIGINT, Ctrl-C); downloaded bytes are kept and the next pull resumes them"
        case .terminated: "stopped by SIGTERM or SIGHUP; downloaded bytes are kept and the next pull resumes them"
        }
    }
}

/// An error that knows which exit code it maps to.
public protocol ExitCodeProviding: Error {
    var exitCode: ExitCode { get }
}

extension ProviderError: ExitCodeProviding {
    public var exitCode: ExitCode {
        switch code {
        case .unauthorized, .tokenExpired: .auth
        case .configuration: .config
        case .rateLimited, .transient, .unreachable, .linkExpired, .invalidResponse: .unavailable
        case .notFound, .quotaExceeded, .forbidden, .cursorReset: .partialFailure
        }
    }
}
