#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TestSupport

/// Signals end a run with the shell's codes (130 for SIGINT, 143 for SIGTERM and SIGHUP), even while
/// `pull --wait` queues behind another run's lock (#20.6).
@Suite struct SignalTests {
    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143)), (SIGHUP, Int32(143))])
    func pullWaitingForTheLockEndsOnASignal(signal: Int32, expected: Int32) async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let cache = dir.appendingPathComponent("cache")
        let config = dir.appendingPathComponent("config.toml")
        try "[cache]\ndir = \"\(cache.path)\"\n\n[remote.nas]\nprovider = \"webdav\"\nurl = \"http://127.0.0.1:1/dav/\"\nuser = \"u\"\npassword = \"p\"\n"
            .write(to: config, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(at: cache.appendingPathComponent("locks"), withIntermediateDirectories: true)
        // Another run holds the pull lock: flock(1) takes it, says so, and keeps it until its stdin closes.
        let holder = try ChildProcess("flock", ["--no-fork", "--exclusive", cache.appendingPathComponent("locks/pull-nas.lock").path,
                                                "sh", "-c", "echo locked; exec cat"])
        defer { holder.stop() }
        _ = try await holder.waitForLine(prefix: "locked")

        let pull = try ChildProcess("sh", ["-c", "exec \"$0\" \"$@\" 2>&1", CLI.executable.path, "pull", "--wait", "--config", config.path],
                                    environment: ["PATH": "/usr/bin:/bin", "HOME": dir.path, "NO_COLOR": "1",
                                                  "XDG_STATE_HOME": dir.appendingPathComponent("state").path])
        defer { pull.stop() }
        _ = try await pull.waitForLine(prefix: "cloudsync: info: waiting for another pull of remote nas", timeout: 60)
        kill(pull.process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(60)
        while pull.process.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!pull.process.isRunning, "pull --wait ignored signal \(signal)")
        #expect(pull.process.terminationReason == .exit)
        #expect(pull.process.terminationStatus == expected)
    }
}
