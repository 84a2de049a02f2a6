import CloudSyncCache
@testable import CloudSyncEngine
import Foundation
import Synchronization
import TestSupport
import Testing

/// `OpenGate`: file k of a run opens once file k − lead asked for bytes or ended.
@Suite(.timeLimit(.minutes(1))) struct OpenGateTests {
    final class Flag: Sendable { let value = Atomic<Bool>(false) }
    final class Log: Sendable { let events = Mutex<[(String, Int)]>([]) }

    /// Whether the file flagged by `opened` still waits after the others had time to run.
    private func stillWaiting(_ opened: Flag) async throws -> Bool {
        try await Task.sleep(for: .milliseconds(20))
        return !opened.value.load(ordering: .relaxed)
    }

    @Test func theFirstLeadFilesOpenAtOnceAndEachLaterOneWaitsForItsOwnPredecessor() async throws {
        let gate = OpenGate(lead: 2, files: 6)
        await gate.wait(0)
        await gate.wait(1)
        let opened2 = Flag(), opened3 = Flag()
        let t2 = Task { await gate.wait(2); opened2.value.store(true, ordering: .relaxed) }
        let t3 = Task { await gate.wait(3); opened3.value.store(true, ordering: .relaxed) }
        #expect(try await stillWaiting(opened2))
        #expect(try await stillWaiting(opened3))
        // File 1 passes: only file 3 (1 + lead) opens.
        gate.pass(1)
        await t3.value
        #expect(try await stillWaiting(opened2))
        // Passing twice (a request, then the end) counts once and changes nothing.
        gate.pass(1)
        gate.pass(0)
        await t2.value
        // A file that passed before its follower asks lets the follower open at once.
        gate.pass(2)
        await gate.wait(4)
        // Out of range indexes neither crash nor block.
        gate.pass(99)
        gate.pass(-1)
    }

    @Test func openAllAndCancellationReleaseEveryWaitingFile() async throws {
        let gate = OpenGate(lead: 1, files: 4)
        let cancelled = Task { await gate.wait(1) }
        try await Task.sleep(for: .milliseconds(10))
        cancelled.cancel()
        await cancelled.value
        let gate2 = OpenGate(lead: 1, files: 4)
        let waiting = Task { await gate2.wait(2) }
        try await Task.sleep(for: .milliseconds(10))
        gate2.openAll()
        await waiting.value
        await gate2.wait(3)
    }

    /// Seeded: files of random durations, each passing at a random point of its work; every file opens only after
    /// the file `lead` before it passed, and every file opens.
    @Test("seeded: file k opens after file k − lead passed", arguments: [1, 2, 4])
    func ordered(lead: Int) async throws {
        let s = seed("OpenGateTests.ordered")
        var random = SeededRandom(seed: s &+ UInt64(lead))
        let count = 40
        let delays = (0 ..< count).map { _ in (before: Int.random(in: 0 ... 3, using: &random), after: Int.random(in: 0 ... 3, using: &random)) }
        let gate = OpenGate(lead: lead, files: count)
        let log = Log()
        await withTaskGroup(of: Void.self) { group in
            for i in 0 ..< count {
                group.addTask {
                    await gate.wait(i)
                    log.events.withLock { $0.append(("open", i)) }
                    try? await Task.sleep(for: .milliseconds(delays[i].before))
                    log.events.withLock { $0.append(("pass", i)) }
                    gate.pass(i)
                    try? await Task.sleep(for: .milliseconds(delays[i].after))
                    gate.pass(i)
                }
            }
        }
        let events = log.events.withLock { $0 }
        for i in 0 ..< count {
            let opened = try #require(events.firstIndex { $0 == ("open", i) }, "seed \(s): file \(i) never opened")
            if i >= lead {
                let passed = try #require(events.firstIndex { $0 == ("pass", i - lead) }, "seed \(s)")
                #expect(passed < opened, "seed \(s): file \(i) opened before file \(i - lead) passed")
            }
        }
    }
}

/// With the real binary: a file whose entry another writer holds (as `serve` does while it fetches a track) waits
/// out of order. With one job and the first file held, the others are fetched meanwhile; the held one follows once
/// it is let go.
@Suite struct HeldEntryTests {
    @Test func aHeldEntryHoldsBackNoFileBehindIt() throws {
        let files: [(String, Int)] = (0 ..< 4).map { ("Disc/song \($0).mp3", 200_000 + $0 * 1000) }
        let fixture = try Fixture(seed: 48, files: files)
        defer { fixture.cleanup() }
        let env = fixture.env
        // Index the files, then hold the first one's entry.
        let listed = try env.run(["ls", "--remote", env.remote])
        #expect(listed.status == 0, "stderr: \(listed.stderr) stdout: \(listed.stdout)")
        let cache = try Cache.open(root: env.cacheDir)
        var holder: EntryWriter? = try cache.openWriter(remote: env.remote, path: files[0].0)
        let pull = try env.start(["pull", "--jobs", "1"])
        let others = files.dropFirst().map { env.tracks.appendingPathComponent($0.0).path }
        let fetched = eventuallyBlocking(30) { others.allSatisfy { FileManager.default.fileExists(atPath: $0) } }
        #expect(fetched, "the files behind a held entry waited for it")
        holder?.close()
        holder = nil
        let result = try pull.wait(timeout: 60)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        try env.expectTracksEqual(fixture.library)
    }
}
