@testable import CloudSyncCommands
import Foundation
import Testing

/// `--help` output is part of the interface: compared with the files in Snapshots/.
/// Run with `UPDATE_SNAPSHOTS=1 swift test --filter HelpSnapshotTests` to accept a deliberate change.
@Suite struct HelpSnapshotTests {
    static let commands: [[String]] = [
        [], ["ls"], ["pull"], ["login"], ["logout"], ["cache"], ["cache", "evict"], ["cache", "clear"], ["serve"],
        ["config"], ["config", "show"], ["status"], ["completion"],
    ]

    @Test(arguments: commands)
    func helpMatchesSnapshot(path: [String]) throws {
        let parser = ArgumentParser(root: CommandTree.root, globals: CommandTree.globals)
        let text = HelpRenderer(programName: "cloudsync", globals: CommandTree.globals).render(parser.spec(at: path), path: path)
        let name = (["cloudsync"] + path).joined(separator: "-") + ".txt"
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Snapshots/\(name)")
        if ProcessInfo.processInfo.environment["UPDATE_SNAPSHOTS"] == "1" {
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        let expected = try String(contentsOf: url, encoding: .utf8)
        #expect(text == expected, "help of '\(name)' changed; if deliberate, rerun with UPDATE_SNAPSHOTS=1")
        for line in text.split(separator: "\n") { #expect(line.count <= 100, "line too long in \(name): \(line)") }
    }
}
