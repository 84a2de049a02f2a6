#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TestSupport

/// A `pull --wait` queued behind another run's pull lock (flock(1) holds it until `stop()`): a pull process that
/// stays alive, with its transport's network thread started, for as long as a test needs.
struct WaitingPull {
    let dir: URL
    let holder: ChildProcess
    let pull: ChildProcess

    static func start() async throws -> WaitingPull {
        let dir = try CLI.temporaryDirectory()
        let cache = dir.appendingPathComponent("cache")
        let config = dir.appendingPathComponent("config.toml")
        try "[cache]\ndir = \"\(cache.path)\"\n\n[remote.nas]\nprovider = \"webdav\"\nurl = \"http://127.0.0.1:1/dav/\"\nuser = \"u\"\npassword = \"p\"\n"
            .write(to: config, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(at: cache.appendingPathComponent("locks"), withIntermediateDirectories: true)
        // Another run holds the pull lock: flock(1) takes it, says so, and keeps it until its stdin closes.
        let holder = try ChildProcess("flock", ["--no-fork", "--exclusive", cache.appendingPathComponent("locks/pull-nas.lock").path,
                                                "sh", "-c", "echo locked; exec cat"])
        _ = try await holder.waitForLine(prefix: "locked")
        let pull = try ChildProcess("sh", ["-c", "exec \"$0\" \"$@\" 2>&1", CLI.executable.path, "pull", "--wait", "--config", config.path],
                                    environment: ["PATH": "/usr/bin:/bin", "HOME": dir.path, "NO_COLOR": "1",
                                                  "XDG_STATE_HOME": dir.appendingPathComponent("state").path])
        _ = try await pull.waitForLine(prefix: "cloudsync: info: waiting for another pull of remote nas", timeout: 60)
        return WaitingPull(dir: dir, holder: holder, pull: pull)
    }

    func stop() {
        pull.stop()
        holder.stop()
        try? FileManager.default.removeItem(at: dir)
    }
}

/// Signals end a run with the shell's codes (130 for SIGINT, 143 for SIGTERM and SIGHUP), even while
/// `pull --wait` queues behind another run's lock (#20.6).
@Suite struct SignalTests {
    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143)), (SIGHUP, Int32(143))])
    func pullWaitingForTheLockEndsOnASignal(signal: Int32, expected: Int32) async throws {
        let waiting = try await WaitingPull.start()
        defer { waiting.stop() }
        let pull = waiting.pull
        kill(pull.process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(60)
        while pull.process.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try #require(!pull.process.isRunning, "pull --wait ignored signal \(signal)")
        #expect(pull.process.terminationReason == .exit)
        #expect(pull.process.terminationStatus == expected)
        // Nothing was downloaded, so there is nothing saved to speak of.
        #expect(try await pull.waitForLine(prefix: "cloudsync: interrupted") == "before any download")
    }
}

/// A pull runs as batch work: every thread of the process, the transport's network thread included, is
/// `SCHED_BATCH` (policy 3), so none preempts another on wakeup (#23; `BatchScheduling`).
@Suite struct SchedulingTests {
    /// Whether this machine lets a thread move itself to `SCHED_BATCH` (a sandbox may forbid `sched_setscheduler`;
    /// the pull then runs as before, and there is nothing to check). Probed on a thread of its own, which ends.
    static let batchAllowed: Bool = {
        final class Box: @unchecked Sendable { var allowed = false }
        let box = Box(), done = DispatchSemaphore(value: 0)
        Thread {
            var parameter = sched_param(sched_priority: 0)
            box.allowed = sched_setscheduler(0, 3, &parameter) == 0
            done.signal()
        }.start()
        done.wait()
        return box.allowed
    }()

    @Test(.enabled(if: batchAllowed, "sched_setscheduler is not allowed here"))
    func everyThreadOfAPullIsBatchWork() async throws {
        let waiting = try await WaitingPull.start()
        defer { waiting.stop() }
        let tasks = "/proc/\(waiting.pull.process.processIdentifier)/task"
        var policies: [String: Int] = [:]
        // The network thread names itself when it first runs, which on a loaded machine may come a moment later.
        let deadline = Date().addingTimeInterval(30)
        repeat {
            policies = [:]
            for tid in try FileManager.default.contentsOfDirectory(atPath: tasks) {
                // Field 41 of stat is the policy; the name (field 2) is in parentheses and may hold spaces.
                guard let stat = try? String(contentsOfFile: "\(tasks)/\(tid)/stat", encoding: .utf8),
                      let close = stat.lastIndex(of: ")") else { continue }
                let name = (try? String(contentsOfFile: "\(tasks)/\(tid)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? tid
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                // After the name: fields 3 … 52; the policy is field 41, so index 38 here.
                if fields.count > 38, let policy = Int(fields[38]) { policies["\(name) (\(tid))"] = policy }
            }
            if policies.keys.contains(where: { $0.hasPrefix("cloudsync-curl") }) { break }
            try await Task.sleep(for: .milliseconds(50))
        } while Date() < deadline
        #expect(policies.keys.contains { $0.hasPrefix("cloudsync-curl") }, "the network thread was not found: \(policies)")
        #expect(policies.count > 2)
        #expect(policies.values.allSatisfy { $0 == 3 }, "threads not SCHED_BATCH: \(policies.filter { $0.value != 3 })")
    }
}
