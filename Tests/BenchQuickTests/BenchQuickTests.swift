// The quick variant of every script under bench/ (small sizes, one run), so `make test` keeps them runnable.
// No timing is asserted: each script must finish, exit 0 (its own checks passed: every tool produced the right
// bytes, every torture row behaved as expected) and write its table.
import Foundation
import Testing
import TestSupport

/// The scripts, in two suites that run side by side, each one script at a time: most of a script's time is
/// waiting (Retry-After pauses, rate-capped servers, server start-ups; torture's CPU is a fifth of its wall
/// time), so two at once finish in little more than half the time of one after another, and never more than two
/// sets of servers share the machine. Every script takes fresh ports and its own temporary folders.
enum BenchQuick {
    /// The cloudsync binary built with the tests (debug), else a release build.
    static func binary() throws -> String {
        for config in ["debug", "release"] {
            let path = RepositoryPaths.root.appendingPathComponent(".build/\(config)/cloudsync").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw TestSupportError("no cloudsync binary under .build/debug or .build/release; run `swift build` first")
    }

    /// Runs `bench/<script> --quick ARGUMENTS` with results in a temporary directory; returns (status, the table
    /// `<table>-quick.md` (default: the script's name), stderr tail). Killed after `limit` seconds so a hung
    /// server cannot hang the suite.
    static func runQuick(_ script: String, arguments: [String] = [], table name: String? = nil,
                         limit: TimeInterval = 300) throws -> (Int32, String, String) {
        for program in ["bash", "python3", "nginx", "rclone", "aria2c", "curl"] where which(program) == nil {
            throw TestSupportError("\(program) is not installed; run scripts/install-deps.sh --bench (make bench does)")
        }
        let results = try TemporaryDirectory(prefix: "cloudsync-bench-quick")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [RepositoryPaths.root.appendingPathComponent("bench/\(script).sh").path, "--quick"] + arguments
        var env = ProcessInfo.processInfo.environment
        env["CLOUDSYNC_BIN"] = try binary()
        env["BENCH_RESULTS"] = results.path
        process.environment = env
        let errors = results.file("stderr.txt")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: errors)
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(limit)
        while process.isRunning && Date() < deadline { usleep(100_000) }
        if process.isRunning {
            // SIGKILL: the test runner leaves SIGTERM blocked in its children.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw TestSupportError("bench/\(script).sh --quick did not finish within \(Int(limit)) s")
        }
        let table = (try? String(contentsOf: results.file("\(name ?? script)-quick.md"), encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        return (process.terminationStatus, table, String(stderr.suffix(2000)))
    }
}

@Suite("bench/ quick mode: faults, kill -9, concurrency, encryption", .serialized)
struct BenchQuickFaultTests {
    @Test("torture --quick: every fault row behaves as expected")
    func torture() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("torture")
        #expect(status == 0, "bench/torture.sh --quick failed:\n\(stderr)\n\(table)")
        #expect(!table.contains("UNEXPECTED"), "unexpected rows:\n\(table)")
    }

    @Test("soak --quick: two serves, pull and cache loops, 16 byte-checking players: 0 wrong bytes, crashes, hangs")
    func soak() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("soak")
        #expect(status == 0, "bench/soak.sh --quick failed:\n\(stderr)\n\(table)")
        #expect(table.contains("| **wrong bytes** | **0** |"), "table:\n\(table)")
    }

    @Test("encryption --quick: plaintext and encrypted pulls and serve reads give the right bytes")
    func encryption() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("encryption")
        #expect(status == 0, "bench/encryption.sh --quick failed:\n\(stderr)\n\(table)")
        #expect(table.contains("Throughput encrypted / plaintext") && table.contains("time to first byte")
                && table.contains("at this link rate"), "table:\n\(table)")
    }

    @Test("resume --quick: every rerun after kill -9 ends with the right files")
    func resume() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("resume")
        #expect(status == 0, "bench/resume.sh --quick failed:\n\(stderr)")
        #expect(table.contains("| cloudsync |"), "no cloudsync row in:\n\(table)")
    }
}

@Suite("bench/ quick mode: throughput, listings, scale, budget, instant start", .serialized)
struct BenchQuickScaleTests {
    @Test("api-economy --quick: listing requests are counted for every provider")
    func apiEconomy() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("api-economy")
        #expect(status == 0, "bench/api-economy.sh --quick failed:\n\(stderr)")
        for row in ["cloudsync-webdav", "cloudsync-dropbox", "cloudsync-onedrive", "cloudsync-yandex"] {
            #expect(table.contains("| \(row) |"), "no row for \(row) in:\n\(table)")
        }
    }

    @Test("budget --quick: a library ten times the budget converges; a played track is complete after the next pull; every track ready behind a round trip; heads shortened to fit")
    func budget() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("budget")
        #expect(status == 0, "bench/budget.sh --quick failed:\n\(stderr)\n\(table)")
        #expect(table.contains("| pull 5 | 0 |"), "table:\n\(table)")
        #expect(table.contains("every track ready behind 0.05 s per request"), "table:\n\(table)")
        #expect(table.contains("| 10MiB | 64 KiB, 2 s, tail 64 KiB | shortened | 0 |"), "table:\n\(table)")
    }

    @Test("throughput --quick: every tool gets the right bytes")
    func throughput() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("throughput")
        #expect(status == 0, "bench/throughput.sh --quick failed:\n\(stderr)")
        // One row per tool and destination: the disk (BENCH_DISK) and tmpfs.
        for tool in ["cloudsync@rclone-dav", "cloudsync@nginx-dav", "rclone-copy@rclone-dav", "curl@nginx-http", "dd-floor"] {
            #expect(table.contains("| \(tool)/tmpfs |"), "no tmpfs row for \(tool) in:\n\(table)")
            #expect(table.components(separatedBy: "| \(tool)/").count - 1 == 2 * 4, "not two rows per library for \(tool) in:\n\(table)")
        }
        #expect(table.contains("## 100x20KiB-mp3"), "no library of real MP3s in:\n\(table)")
    }

    @Test("scale --quick: pull and ls --offline complete")
    func scale() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("scale")
        #expect(status == 0, "bench/scale.sh --quick failed:\n\(stderr)")
        #expect(table.contains("ls-offline"), "no ls --offline row in:\n\(table)")
    }

    @Test("throughput --segments --quick: one big file over one and several connections, right bytes")
    func throughputSegments() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("throughput", arguments: ["--segments"], table: "throughput-segments")
        #expect(status == 0, "bench/throughput.sh --segments --quick failed:\n\(stderr)")
        for tool in ["cloudsync-seg1", "cloudsync-seg4", "aria2c-x4", "rclone-streams4", "curl"] {
            #expect(table.contains("| \(tool) |"), "no row for \(tool) in:\n\(table)")
        }
        #expect(table.contains("limit_rate"), "no rate-limited server in:\n\(table)")
    }

    @Test("instant-start --quick: the ten formats of #17 decode offline through serve from their start sets")
    func instantStart() throws {
        let (status, table, stderr) = try BenchQuick.runQuick("instant-start")
        #expect(status == 0, "bench/instant-start.sh --quick failed:\n\(stderr)\n\(table)")
        for format in ["mp3-cover.mp3", "m4a-end.m4a", "opus-cover.opus", "wav.wav"] {
            #expect(table.contains("| \(format) |"), "no row for \(format) in:\n\(table)")
        }
        #expect(!table.contains("| failed |"), "table:\n\(table)")
    }
}
