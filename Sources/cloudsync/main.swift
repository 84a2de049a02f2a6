import Foundation
import CloudSyncCommands

let code = await CommandLineTool.main(arguments: Array(CommandLine.arguments.dropFirst()))
exit(code)
