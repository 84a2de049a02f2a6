import CloudSyncCore
import Foundation

/// Entry point of the `cloudsync` executable.
public enum CommandLineTool {
    /// Runs the command line `arguments` (without the program name) and returns the process exit code.
    public static func main(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) async -> Int32 {
        let parser = ArgumentParser(root: CommandTree.root, globals: CommandTree.globals)
        let parsed: ParsedArguments
        do {
            parsed = try parser.parse(arguments)
        } catch let error as UsageError {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            return ExitCode.usage.rawValue
        } catch {
            return ExitCode.usage.rawValue
        }
        let level: LogLevel = parsed.has("quiet") ? .error : parsed.has("verbose") ? .debug : .info
        let console = Console(environment: environment, level: level)
        if parsed.wantsHelp {
            let renderer = HelpRenderer(programName: "cloudsync", globals: CommandTree.globals)
            console.out(renderer.render(parser.spec(at: parsed.commandPath), path: parsed.commandPath))
            return ExitCode.ok.rawValue
        }
        if parsed.has("version") && parsed.commandPath.isEmpty {
            console.out("cloudsync \(CommandTree.version)\n")
            return ExitCode.ok.rawValue
        }
        let context = CommandContext(arguments: parsed, console: console, environment: environment)
        do {
            return try await Commands.run(context).rawValue
        } catch {
            return report(error, console: console).rawValue
        }
    }

    /// Prints `error` as one clear line and returns its exit code.
    static func report(_ error: any Error, console: Console) -> ExitCode {
        let code = (error as? any ExitCodeProviding)?.exitCode ?? .partialFailure
        console.err("cloudsync: \(console.paint("error:", "31")) \(String(describing: error))\n")
        return code
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
