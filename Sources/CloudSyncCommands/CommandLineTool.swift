import CloudSyncCore
import Foundation

/// Entry point of the `cloudsync` executable.
public enum CommandLineTool {
    /// Runs the command line `arguments` (without the program name) and returns the process exit code.
    public static func main(arguments: [String]) async -> Int32 {
        FileHandle.standardError.write(Data("cloudsync: the command line is being built\n".utf8))
        return ExitCode.usage.rawValue
    }
}
