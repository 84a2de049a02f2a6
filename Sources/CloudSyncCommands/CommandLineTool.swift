import CloudSyncCache
import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// Entry point of the `cloudsync` executable.
public enum CommandLineTool {
    /// Runs the command line `arguments` (without the program name) and returns the process exit code.
    public static func main(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) async -> Int32 {
        let parser = ArgumentParser(root: CommandTree.root, globals: CommandTree.globals)
        let parsed: ParsedArguments
        do {
            parsed = try parser.parse(arguments)
        } catch {
            return report(error, console: Console(environment: environment, level: .error)).rawValue
        }
        let level: LogLevel = parsed.has("quiet") ? .error : parsed.has("verbose") ? .debug : .info
        var logFile: LogFile?
        do {
            logFile = try openLogFile(parsed)
        } catch {
            return report(error, console: Console(environment: environment, level: .error)).rawValue
        }
        let console = Console(environment: environment, level: level, logFile: logFile)
        let code: ExitCode
        if parsed.wantsHelp {
            let renderer = HelpRenderer(programName: "cloudsync", globals: CommandTree.globals)
            console.out(renderer.render(parser.spec(at: parsed.commandPath), path: parsed.commandPath))
            code = .ok
        } else if parsed.has("version") {
            console.out(versionText(verbose: parsed.has("verbose")))
            code = .ok
        } else {
            let context = CommandContext(arguments: parsed, console: console, environment: environment)
            do {
                code = try await Commands.run(context)
            } catch {
                code = report(error, console: console)
            }
        }
        return checkingOutput(code, console: console).rawValue
    }

    /// `code`, unless stdout lost output (a full disk under `> library.m3u`, `/dev/full`): then that is said and
    /// the exit is 74, so a cron job does not keep a cut playlist or JSON for a whole one. (A command that
    /// failed otherwise keeps its own code.)
    static func checkingOutput(_ code: ExitCode, console: Console) -> ExitCode {
        guard let failure = console.stdoutWriteError else { return code }
        console.err("cloudsync: \(console.paint("error:", "31")) writing the output to stdout failed: \(String(cString: strerror(failure)))"
            + (failure == ENOSPC ? " (the disk is full)" : "") + "; what was written is incomplete\n")
        return code == .ok || code == .partialFailure ? .ioError : code
    }

    /// `cloudsync VERSION`, and with `verbose` the C libraries loaded at run time (what a bug report needs).
    static func versionText(verbose: Bool) -> String {
        var text = "cloudsync \(CommandTree.version)\n"
        if verbose {
            text += "libcurl \(CurlTransport.libcurlVersion)\nSQLite \(Cache.sqliteVersion)\n\(EVPHasher.openSSLVersion)\n"
            text += "User-Agent: \(CurlTransportOptions().userAgent)\n"
        }
        return text
    }

    /// `--log-file PATH [--log-level LEVEL]` (default level info, whatever -q or -v say for stderr).
    static func openLogFile(_ parsed: ParsedArguments) throws -> LogFile? {
        let levels: [String: LogLevel] = ["error": .error, "warning": .warning, "info": .info, "debug": .debug]
        var level = LogLevel.info
        if let text = parsed.value("log-level") {
            guard let chosen = levels[text.lowercased()] else {
                throw UsageError(message: "cloudsync: --log-level expects error, warning, info or debug, got '\(text)'",
                                 hint: "Run 'cloudsync --help' for usage.")
            }
            level = chosen
        }
        guard let path = parsed.value("log-file") else {
            if parsed.has("log-level") {
                throw UsageError(message: "cloudsync: --log-level sets the level of --log-file; give both (stderr's level is -q or -v)",
                                 hint: "For example: cloudsync -q pull --log-file ~/cloudsync.log --log-level debug")
            }
            return nil
        }
        return try LogFile(path: path, level: level)
    }

    /// Prints `error` as one clear line and returns its exit code.
    static func report(_ error: any Error, console: Console) -> ExitCode {
        let code = (error as? any ExitCodeProviding)?.exitCode ?? (error is UsageError ? .usage : .partialFailure)
        let lines = message(of: error).split(separator: "\n", omittingEmptySubsequences: false).map { TerminalText.escape(String($0)) }
        var text = "cloudsync: \(console.paint("error:", "31")) \(lines.first ?? "")\n"
        for line in lines.dropFirst() where !line.isEmpty { text += line + "\n" }
        console.err(text)
        return code
    }

    /// What `error` says, without the `cloudsync: ` (and `error: `) its message may begin with: the printer
    /// adds the program's name once, so a line never reads `cloudsync: error: cloudsync: …`.
    static func message(of error: any Error) -> String {
        var text = Substring(String(describing: error))
        while true {
            if text.hasPrefix("cloudsync: ") { text = text.dropFirst("cloudsync: ".count); continue }
            if text.hasPrefix("error: ") { text = text.dropFirst("error: ".count); continue }
            return String(text)
        }
    }
}

/// What a command gets: its parsed arguments and where to print.
struct CommandContext: Sendable {
    let arguments: ParsedArguments
    let console: Console
    let environment: [String: String]

    var logger: Logger { console.logger }
    var json: Bool { arguments.has("json") }
}
