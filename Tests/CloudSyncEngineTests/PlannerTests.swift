import CloudSyncEngine
import Foundation
import TestSupport
import Testing

/// The budget planner, in-process: no disk, no server.
@Suite struct PlannerTests {
    /// `n` tracks of `size` bytes with `head`-byte start sets, path order = priority order (added on one day,
    /// newest modified first).
    static func library(_ n: Int, size: Int64 = 4 << 20, head: Int64 = 600 << 10, remote: String = "r") -> [PlanningTrack] {
        (0 ..< n).map { i in
            PlanningTrack(id: Int64(i + 1), remote: remote, path: String(format: "t%03d.mp3", i), size: size,
                          startBytes: head, added: 1_700_000_000, modified: Double(1_700_000_000 - i))
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var tracks: [PlanningTrack]
        var budget: Int64
        var complete: Int
        var head: Int
        var none: Int
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "everything fits", tracks: library(10), budget: 100 << 20, complete: 10, head: 0, none: 0),
        // 30 × 4 MiB in 50 MiB: 30 heads (17.6 MiB), then 8 whole tracks (8 × 3.4 MiB).
        Case(name: "the issue's 120 MiB library in 50 MiB", tracks: library(30), budget: 50 << 20, complete: 9, head: 21, none: 0),
        Case(name: "heads alone do not fit", tracks: library(30), budget: 6 << 20, complete: 0, head: 10, none: 20),
        Case(name: "zero budget", tracks: library(3), budget: 0, complete: 0, head: 0, none: 3),
        Case(name: "tracks no bigger than their heads are whole with them",
             tracks: library(4, size: 100 << 10, head: 600 << 10), budget: 1 << 20, complete: 4, head: 0, none: 0),
    ]

    @Test(arguments: cases)
    func plansWithinTheBudget(_ c: Case) {
        let plan = Planner.plan(c.tracks, budget: c.budget)
        #expect(plan.completeCount == c.complete)
        #expect(plan.headOnlyCount == c.head)
        #expect(plan.noneCount == c.none)
        #expect(plan.plannedBytes <= c.budget)
    }

    @Test func pinnedTracksAreCompleteEvenBeyondTheBudget() {
        var tracks = Self.library(5)
        tracks[4].pinned = true
        tracks[3].pinned = true
        let plan = Planner.plan(tracks, budget: 5 << 20)
        #expect(plan.target(4) == .complete && plan.target(5) == .complete)
        #expect(plan.pinnedOverBudget)
        #expect(plan.order.prefix(2).sorted() == [4, 5])
    }

    /// Played first (most recent play first), then added by day, then newest on the remote, then path.
    @Test func priorityOrder() {
        var tracks = Self.library(6)
        tracks[5].lastPlayed = 2_000_000_000
        tracks[4].lastPlayed = 1_900_000_000
        tracks[3].added = 1_700_000_000 + 86_400  // added a day later
        tracks[0].modified = 1_600_000_000  // oldest on the remote
        tracks[1].modified = tracks[2].modified
        let plan = Planner.plan(tracks, budget: 1 << 40)
        #expect(plan.order == [6, 5, 4, 2, 3, 1])
    }

    /// A track that may not complete (unused beyond max_age) keeps its head and does not stop the tracks after it.
    @Test func tracksPastMaxAgeKeepTheirHeadsOnly() {
        var tracks = Self.library(3)
        tracks[0].mayComplete = false
        let plan = Planner.plan(tracks, budget: 1 << 40)
        #expect(plan.target(1) == .head)
        #expect(plan.target(2) == .complete && plan.target(3) == .complete)
    }

    @Test func hostileSizesSaturateInsteadOfTrapping() {
        let tracks = [PlanningTrack(id: 1, remote: "r", path: "huge.flac", size: .max, startBytes: .max),
                      PlanningTrack(id: 2, remote: "r", path: "b.flac", size: .max, startBytes: 1 << 20)]
        let plan = Planner.plan(tracks, budget: 10 << 20)
        #expect(plan.libraryBytes == .max)
        #expect(plan.plannedBytes <= 10 << 20)
    }

    // MARK: Properties

    static func randomLibrary(_ random: inout SeededRandom) -> [PlanningTrack] {
        let n = Int.random(in: 0 ... 60, using: &random)
        return (0 ..< n).map { i in
            let size = Int64.random(in: 0 ... 12 << 20, using: &random)
            let known = Bool.random(using: &random)
            return PlanningTrack(
                id: Int64(i + 1), remote: ["a", "b"][Int.random(in: 0 ... 1, using: &random)], path: "p\(i)",
                size: size, pinned: Int.random(in: 0 ..< 12, using: &random) == 0,
                startBytes: Int64.random(in: 0 ... 2 << 20, using: &random), startSetKnown: known,
                lastPlayed: Bool.random(using: &random) ? 0 : Double(Int.random(in: 1 ... 5, using: &random)),
                added: Double(Int.random(in: 0 ... 3, using: &random) * 86_400),
                modified: Double(Int.random(in: 0 ... 1000, using: &random)),
                mayComplete: Int.random(in: 0 ..< 8, using: &random) != 0)
        }
    }

    /// `tracks` once `plan` is reached: every target fetched or shrunk to, every start set analysed.
    static func reached(_ tracks: [PlanningTrack], _ plan: CachePlan) -> [PlanningTrack] {
        tracks.map { t -> PlanningTrack in
            var r = t
            r.startSetKnown = true
            switch plan.target(t.id) {
            case .complete: r.complete = true; r.partialBytes = 0; r.headPresent = true
            case .head: r.complete = false; r.partialBytes = t.startBytes; r.headPresent = true
            case .none: r.complete = false; r.partialBytes = 0; r.headPresent = false
            }
            return r
        }
    }

    /// Every plan keeps within the budget (pinned aside), keeps pinned tracks complete, and gives a track a
    /// whole copy only with its head; more budget never means fewer complete tracks; planning again over the
    /// state a plan reaches gives the same targets.
    @Test func plansKeepTheirContracts() {
        let s = seed("plansKeepTheirContracts")
        var random = SeededRandom(seed: s)
        for _ in 0 ..< 400 {
            let tracks = Self.randomLibrary(&random)
            let budget = Int64.random(in: 0 ... 200 << 20, using: &random)
            let plan = Planner.plan(tracks, budget: budget)
            let pinned = tracks.filter(\.pinned).reduce(Int64(0)) { $0 + $1.size }
            #expect(plan.plannedBytes <= max(budget, pinned + 0) || plan.pinnedOverBudget, "seed \(s)")
            if !plan.pinnedOverBudget { #expect(plan.plannedBytes <= budget, "seed \(s)") }
            for track in tracks where track.pinned { #expect(plan.target(track.id) == .complete, "seed \(s)") }
            // Bytes the targets hold add up to plannedBytes.
            let held = tracks.reduce(Int64(0)) { sum, t in
                switch plan.target(t.id) {
                case .complete: sum + t.size
                case .head: sum + t.startBytes
                case .none: sum
                }
            }
            #expect(held == plan.plannedBytes, "seed \(s)")
            // headsBytes is the budget that fits every head: it does, and anything less does not.
            let heads = tracks.reduce(Int64(0)) { $0 + ($1.pinned ? $1.size : $1.startBytes) }
            #expect(plan.headsBytes == heads, "seed \(s)")
            #expect(plan.allHeadsFit == (budget >= heads), "seed \(s)")
            #expect(Planner.plan(tracks, budget: heads).allHeadsFit, "seed \(s)")

            let more = Planner.plan(tracks, budget: budget + Int64.random(in: 0 ... 50 << 20, using: &random))
            #expect(more.completeCount >= plan.completeCount, "seed \(s)")
            #expect(more.completeCount + more.headOnlyCount >= plan.completeCount + plan.headOnlyCount, "seed \(s)")

            // The state the plan reaches, planned again (start sets now known), changes nothing.
            let again = Planner.plan(Self.reached(tracks, plan), budget: budget)
            #expect(again.targets == plan.targets, "seed \(s)")
        }
    }

    /// 20,000 tracks plan in well under a second (the figure goes to bench/README.md; not asserted).
    @Test func planningTwentyThousandTracks() {
        let tracks = Self.library(20_000)
        let clock = ContinuousClock()
        let elapsed = clock.measure { _ = Planner.plan(tracks, budget: 10 << 30) }
        print("planning 20,000 tracks took \(elapsed)")
    }
}
