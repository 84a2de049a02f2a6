import CloudSyncCore

/// A configuration problem at a place in a file: a TOML syntax error, a schema error, a missing file,
/// or a failed selection of remotes. Every one maps to exit code 3 (`ExitCode.config`).
///
/// `description` reads `file:line:column: message` (or `file: message` when there is no position,
/// e.g. a missing file), the form editors and terminals recognise as a jump target.
public struct ConfigError: Error, ExitCodeProviding, CustomStringConvertible, Sendable, Hashable {
    /// The file as the user named it (or a label such as `<text>`).
    public var file: String
    /// 1-based line; 0 when the error has no position in the file.
    public var line: Int
    /// 1-based column counted in Unicode scalars; 0 when the error has no position.
    public var column: Int
    /// What was wrong and what was expected; never contains a secret value.
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    public init(file: String, position: TOMLPosition, message: String) {
        self.init(file: file, line: position.line, column: position.column, message: message)
    }

    /// An error about the file as a whole (no line or column).
    public init(file: String, message: String) {
        self.init(file: file, line: 0, column: 0, message: message)
    }

    public var exitCode: ExitCode { .config }

    public var description: String {
        line > 0 ? "\(file):\(line):\(column): \(message)" : "\(file): \(message)"
    }
}
