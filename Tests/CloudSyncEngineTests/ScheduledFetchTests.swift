import CloudSyncCache
import CloudSyncCore
@testable import CloudSyncEngine
import Foundation
import TestSupport
import Testing

/// What the budget lets a pull fetch of its listing's plan (`ScheduledFetch`), in-process: the one answer a pull's
/// progress totals, its summary counts and `pull --dry-run` share.
@Suite struct ScheduledFetchTests {
    static func file(_ path: String, size: Int64) -> RemoteFile {
        RemoteFile(path: path, size: size, modified: Date(timeIntervalSince1970: 1_700_000_000))
    }

    /// A listing's plan item for `track`, as `Sync` plans it from the index.
    static func item(_ track: PlanningTrack, firstSeen: Bool = false, changed: Bool = false) -> SyncPlan.Item {
        SyncPlan.Item(file: file(track.path, size: track.size), missingBytes: track.size - track.partialBytes, changed: changed,
                      firstSeen: firstSeen)
    }

    static func plan(_ targets: [Int64: TrackTarget], order: [Int64]) -> CachePlan {
        CachePlan(budget: 0, targets: targets, order: order, plannedBytes: 0, libraryBytes: 0, pinnedOverBudget: false,
                  allHeadsFit: true)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var track: PlanningTrack
        var target: TrackTarget
        /// nil: left out.
        var expected: ScheduledFetch.Part?
        var bytes: Int64 = 0
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "planned complete, nothing cached: the whole file",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 4_000, startBytes: 500),
             target: .complete, expected: .whole, bytes: 4_000),
        Case(name: "planned complete, its head cached: the rest",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 4_000, partialBytes: 500, startBytes: 500,
                                  headPresent: true),
             target: .complete, expected: .whole, bytes: 3_500),
        Case(name: "planned as a head, nothing cached: the start set",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 4_000, startBytes: 500),
             target: .head, expected: .head, bytes: 500),
        Case(name: "planned as a head, part of it cached by a killed pull: what it lacks",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 4_000, partialBytes: 200, startBytes: 500),
             target: .head, expected: .head, bytes: 300),
        Case(name: "planned as a head, an estimate bigger than the file: at most the file",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 300, startBytes: 900, startSetKnown: false),
             target: .head, expected: .head, bytes: 300),
        Case(name: "planned as a head that is cached: left out",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 4_000, partialBytes: 500, startBytes: 500,
                                  headPresent: true),
             target: .head, expected: nil),
        Case(name: "the heads do not all fit and this one is past the budget: left out",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 4_000, startBytes: 500),
             target: .none, expected: nil),
        Case(name: "a partial past the budget is left out (the cache shrinks it, the pull fetches nothing of it)",
             track: PlanningTrack(id: 1, remote: "r", path: "a.mp3", size: 4_000, partialBytes: 2_000, startBytes: 500,
                                  headPresent: true),
             target: .none, expected: nil),
        Case(name: "another remote's track of the same path is not this remote's",
             track: PlanningTrack(id: 1, remote: "other", path: "a.mp3", size: 4_000, startBytes: 500),
             target: .complete, expected: nil),
    ]

    @Test(arguments: cases) func schedulesWhatTheBudgetKeeps(_ c: Case) {
        let fetch = SyncPlan(fetch: [Self.item(c.track)])
        let schedule = ScheduledFetch(remote: "r", Self.plan([c.track.id: c.target], order: [c.track.id]), [c.track],
                                      candidates: Sync.candidates(fetch))
        let expected = c.expected.map { [ScheduledFetch.Item(file: 0, part: $0, bytes: c.bytes)] } ?? []
        #expect(schedule.items == expected)
        let fitted = schedule.applied(to: fetch)
        #expect(fitted.fetch.count + fitted.leftOut == 1)
        #expect(fitted.fetch.first?.missingBytes == c.expected.map { _ in c.bytes })
        #expect(fitted.fetch.first?.headOnly == c.expected.map { $0 == .head })
    }

    /// The summary's counts: a file is new when the index did not know it or this pull fetches it from nothing; a
    /// track an earlier pull's budget left out is not new again on every pull, nor is a cached head "resumed".
    @Test func countsWhatThisPullFindsAndDoes() {
        let tracks = [
            PlanningTrack(id: 1, remote: "r", path: "first-seen-fetched.mp3", size: 4_000, startBytes: 500),
            PlanningTrack(id: 2, remote: "r", path: "first-seen-left-out.mp3", size: 4_000, startBytes: 500),
            PlanningTrack(id: 3, remote: "r", path: "known-left-out.mp3", size: 4_000, startBytes: 500),
            PlanningTrack(id: 4, remote: "r", path: "known-never-fetched.mp3", size: 4_000, startBytes: 500),
            PlanningTrack(id: 5, remote: "r", path: "head-completed.mp3", size: 4_000, partialBytes: 500, startBytes: 500,
                          headPresent: true),
            PlanningTrack(id: 6, remote: "r", path: "head-kept.mp3", size: 4_000, partialBytes: 500, startBytes: 500,
                          headPresent: true),
            PlanningTrack(id: 7, remote: "r", path: "changed-left-out.mp3", size: 4_000, startBytes: 500),
        ]
        let plan = SyncPlan(fetch: [
            Self.item(tracks[0], firstSeen: true), Self.item(tracks[1], firstSeen: true), Self.item(tracks[2]),
            Self.item(tracks[3]), Self.item(tracks[4]), Self.item(tracks[5]), Self.item(tracks[6], changed: true),
        ])
        let targets: [Int64: TrackTarget] = [1: .complete, 2: .none, 3: .none, 4: .head, 5: .complete, 6: .head, 7: .none]
        let schedule = ScheduledFetch(remote: "r", Self.plan(targets, order: Array(1 ... 7)), tracks,
                                      candidates: Sync.candidates(plan))
        #expect(schedule.files == 2 && schedule.headsOnly == 1 && schedule.bytes == 4_000 + 500 + 3_500)
        var report = SyncReport(remote: "r", provider: "webdav")
        schedule.count(plan, into: &report)
        #expect(report.new == 3, "first seen (fetched or not) and the known one fetched from nothing")
        #expect(report.resumed == 1, "only the head this pull goes on with")
        #expect(report.changed == 1)
        let fitted = schedule.applied(to: plan)
        #expect(fitted.fetch.map(\.file.path) == ["first-seen-fetched.mp3", "known-never-fetched.mp3", "head-completed.mp3"])
        #expect(fitted.leftOut == 4)
    }

    /// Over random libraries, states and budgets: the schedule is exactly the targets' missing bytes; fetching it
    /// (and shrinking what the plan shrinks) reaches a state whose schedule is empty — a dry run after a pull says
    /// it would fetch nothing; each scheduled file is counted once as new, resumed or changed.
    @Test func fetchingTheScheduleReachesThePlan() {
        let s = seed("fetchingTheScheduleReachesThePlan")
        var random = SeededRandom(seed: s)
        for _ in 0 ..< 300 {
            let tracks = PlannerTests.randomLibrary(&random).map { t -> PlanningTrack in
                var r = t
                switch Int.random(in: 0 ..< 4, using: &random) {
                case 0: r.complete = true; r.headPresent = true
                case 1: r.partialBytes = r.startBytes; r.headPresent = true
                case 2: r.partialBytes = Int64.random(in: 0 ... r.startBytes, using: &random)
                default: break
                }
                return r
            }
            let budget = Int64.random(in: 0 ... 200 << 20, using: &random)
            let cachePlan = Planner.plan(tracks, budget: budget)
            let listed = tracks.filter { $0.remote == "a" && !$0.complete }
            let plan = SyncPlan(fetch: listed.map { Self.item($0, firstSeen: $0.partialBytes == 0 && Bool.random(using: &random)) })
            let schedule = ScheduledFetch(remote: "a", cachePlan, tracks, candidates: Sync.candidates(plan))

            var expected: Int64 = 0
            for (index, track) in listed.enumerated() {
                let item = schedule.items.first { $0.file == index }
                switch cachePlan.target(track.id) {
                case .complete:
                    #expect(item == .init(file: index, part: .whole, bytes: track.size - track.partialBytes), "seed \(s)")
                case .head where !track.headPresent:
                    #expect(item == .init(file: index, part: .head, bytes: max(0, track.startBytes - track.partialBytes)), "seed \(s)")
                default:
                    #expect(item == nil, "seed \(s)")
                }
                expected += item?.bytes ?? 0
            }
            #expect(schedule.bytes == expected, "seed \(s)")
            #expect(schedule.items.map(\.file) == schedule.items.map(\.file).sorted(), "seed \(s)")

            var report = SyncReport(remote: "a", provider: "webdav")
            schedule.count(plan, into: &report)
            let firstSeenLeftOut = plan.fetch.indices.count { i in plan.fetch[i].firstSeen && !schedule.items.contains { $0.file == i } }
            #expect(report.new + report.resumed + report.changed == schedule.items.count + firstSeenLeftOut, "seed \(s)")

            let reached = PlannerTests.reached(tracks, cachePlan)
            let again = ScheduledFetch(remote: "a", Planner.plan(reached, budget: budget), reached, candidates: Sync.candidates(plan))
            #expect(again.items.isEmpty, "seed \(s): after the pull, \(again.items.count) files still scheduled")
        }
    }
}
