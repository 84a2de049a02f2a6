import CloudSyncConfig
import CloudSyncCore
import Foundation

/// `--include`, `--exclude`, `--filter-from`, `--ignore-case`, `--min-size`, `--max-size`, `--max-age`, `--min-age`
/// of `ls`, `pull` and `cache pin`: rclone's filter flags, on top of the remote's configured filter.
enum FilterOptions {
    static let specs: [OptionSpec] = [
        .value("include", "GLOB", "Only files matching GLOB (repeatable; rclone's syntax: * ? ** [..] {a,b}; a leading / anchors at the remote's root)."),
        .value("exclude", "GLOB", "Skip files matching GLOB (repeatable). Rules are tried --include first, then --exclude, then --filter-from; the first match decides."),
        .value("filter-from", "FILE", "Read '+ GLOB' / '- GLOB' rules from FILE (after --include and --exclude; '!' clears, '#' comments)."),
        .flag("ignore-case", "Match the globs case-insensitively."),
        .value("min-size", "SIZE", "Skip files smaller than SIZE (e.g. 100KiB)."),
        .value("max-size", "SIZE", "Skip files larger than SIZE (e.g. 200MiB)."),
        .value("max-age", "DURATION", "Skip files modified on the remote longer ago than DURATION (e.g. 30d)."),
        .value("min-age", "DURATION", "Skip files modified on the remote more recently than DURATION (e.g. 1h)."),
    ]

    /// The command line's filter (`.everything` when no filter flag is given).
    static func filter(_ args: ParsedArguments) throws -> PathFilter {
        let hint = "Run 'cloudsync \(args.commandPath.joined(separator: " ")) --help' for usage."
        func size(_ name: String) throws -> Int64? {
            guard let text = args.value(name) else { return nil }
            guard let bytes = ByteSize.parse(text), bytes <= 1 << 60 else {
                throw UsageError(message: "cloudsync: --\(name) expects a size such as 100KiB or 200MiB, got '\(text)'", hint: hint)
            }
            return bytes
        }
        func age(_ name: String) throws -> TimeInterval? {
            guard let text = args.value(name) else { return nil }
            guard let seconds = TimeSpan.parse(text), seconds > 0, seconds <= 36525 * 86400 else {
                throw UsageError(message: "cloudsync: --\(name) expects a duration such as 30d, 12h or 90m (at most 36525d), got '\(text)'", hint: hint)
            }
            return seconds
        }
        var lines: [(source: String, line: Int, text: String)] = []
        for path in args.values["filter-from"] ?? [] {
            let data: Data
            do {
                data = try WholeFile.read(path, limit: 1 << 20)
            } catch {
                throw UsageError(message: "cloudsync: --filter-from \(path) cannot be read: \(error.reason) (a file of '+ GLOB' / '- GLOB' lines, at most 1MiB)", hint: hint)
            }
            for (index, line) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                lines.append((path, index + 1, String(line.hasSuffix("\r") ? line.dropLast() : line)))
            }
        }
        let (minSize, maxSize, maxAge, minAge) = (try size("min-size"), try size("max-size"), try age("max-age"), try age("min-age"))
        do {
            return try PathFilter(include: args.values["include"] ?? [], exclude: args.values["exclude"] ?? [], filterLines: lines,
                                  ignoreCase: args.has("ignore-case"), minSize: minSize, maxSize: maxSize, maxAge: maxAge, minAge: minAge)
        } catch {
            throw UsageError(message: "cloudsync: \(error.message)", hint: hint)
        }
    }

    /// The filters a command applies to `remote`: its configured one, then the command line's.
    static func filters(for remote: RemoteConfig, commandLine: PathFilter) -> [PathFilter] {
        [remote.filter, commandLine].filter { !$0.isEmpty }
    }
}
