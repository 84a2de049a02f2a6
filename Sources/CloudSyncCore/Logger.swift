import Foundation

/// Log levels, most severe first.
public enum LogLevel: Int, Sendable, Comparable {
    case error = 0, warning, info, debug

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Where libraries send logs. Libraries never print. Messages must not contain tokens or signed URLs:
/// use ``redactedURL(_:)`` for URLs.
public struct Logger: Sendable {
    public let level: LogLevel
    private let sink: @Sendable (LogLevel, String) -> Void

    public init(level: LogLevel, sink: @escaping @Sendable (LogLevel, String) -> Void) {
        self.level = level
        self.sink = sink
    }

    /// A logger that drops everything.
    public static let silent = Logger(level: .error) { _, _ in }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        if level <= self.level { sink(level, message()) }
    }

    public func error(_ m: @autoclosure () -> String) { log(.error, m()) }
    public func warning(_ m: @autoclosure () -> String) { log(.warning, m()) }
    public func info(_ m: @autoclosure () -> String) { log(.info, m()) }
    public func debug(_ m: @autoclosure () -> String) { log(.debug, m()) }
}

/// A URL safe to show: scheme, host, port and path; no user info, query or fragment (signed URLs keep
/// their secrets there).
public func redactedURL(_ url: URL) -> String {
    guard var c = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "<url>" }
    c.user = nil
    c.password = nil
    c.query = nil
    c.fragment = nil
    return c.string ?? "<url>"
}

/// A request URL safe to log whatever it points at: scheme, host, port and the first path segment, then `/…` when
/// more followed. Download links of OneDrive and Yandex carry their credential in the path (and query), so
/// request logs and transport messages use this, never the whole path: `https://downloader.disk.yandex.ru/disk/…`.
public func redactedLink(_ url: URL) -> String {
    guard let c = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "<url>" }
    var shown = URLComponents()
    shown.scheme = c.scheme
    shown.host = c.host
    shown.port = c.port
    guard var text = shown.string else { return "<url>" }
    let segments = c.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: true)
    if let first = segments.first {
        text += "/" + first
        if segments.count > 1 { text += "/…" } else if c.percentEncodedPath.hasSuffix("/") { text += "/" }
    } else {
        text += "/"
    }
    return text
}
