import CloudSyncCache
import CloudSyncCore
@testable import CloudSyncEngine
import Foundation
import TestSupport
import Testing

/// What a head keeps (`HeadPolicy`), its key in the index, the shorter steps a pull falls back to when the
/// library's heads do not fit (`HeadFit`), and how start sets recorded under one policy are counted under another.
@Suite struct HeadPolicyTests {
    /// Keys recorded in caches before tails varied stay what they were: a cache from then, pulled with the
    /// defaults, derives nothing again; NULL keys count as the defaults'.
    @Test func keysStayValidAndRoundTrip() {
        #expect(HeadPolicy.standard.key == "audio>=524288B,10.0s")
        #expect(StartSets.legacyPolicyKey == SyncOptions().heads.key)
        #expect(SyncOptions(headBytes: 128 << 10).heads.key != SyncOptions().heads.key)
        #expect(SyncOptions(headSeconds: 3).heads.key != SyncOptions().heads.key)
        #expect(HeadPolicy(audioBytes: 1, seconds: .nan).key == HeadPolicy(audioBytes: 1, seconds: 0).key)
        for policy in HeadPolicy.standard.ladder + [HeadPolicy(audioBytes: 0, seconds: 0, tailBytes: 0), HeadPolicy(audioBytes: 3, seconds: 2.5)] {
            #expect(HeadPolicy(key: policy.key) == policy, "\(policy.key)")
        }
        for bad in ["old", "", "audio>=xB,1.0s", "audio>=1B,1.0s,tail=", "audio>=01B,1.0s", "audio>=1B,1.0s,tail=131072B",
                    "audio>=1B", "audio>=1B,1.0s,tail=1B,x"] {
            #expect(HeadPolicy(key: bad) == nil, "\(bad)")
        }
    }

    @Test("the ladder: each shorter step capped by the configured policy", arguments: [
        (HeadPolicy.standard, ["524288/10.0/131072", "262144/6.0/131072", "131072/3.0/131072", "65536/2.0/65536"]),
        (HeadPolicy(audioBytes: 128 << 10, seconds: 3), ["131072/3.0/131072", "65536/2.0/65536"]),
        (HeadPolicy(audioBytes: 1 << 20, seconds: 30), ["1048576/30.0/131072", "262144/6.0/131072", "131072/3.0/131072", "65536/2.0/65536"]),
        (HeadPolicy(audioBytes: 32 << 10, seconds: 1), ["32768/1.0/131072", "32768/1.0/65536"]),
        (HeadPolicy(audioBytes: 0, seconds: 0, tailBytes: 0), ["0/0.0/0"]),
    ])
    func ladder(configured: HeadPolicy, steps: [String]) {
        #expect(configured.ladder.map { "\($0.audioBytes)/\($0.seconds)/\($0.tailBytes)" } == steps)
    }

    /// A 4-minute 256 kbit/s MP3 (7.68 MB) whose start set under the defaults is 656 KiB: the audio part and the
    /// tail are replaced, the metadata kept.
    @Test func aRecordedStartSetIsCountedUnderAnotherPolicy() {
        let size: Int64 = 7_680_000, known: Int64 = 656 << 10
        func under(_ policy: HeadPolicy, duration: Double? = 240, known: Int64 = known, size: Int64 = size) -> Int64 {
            policy.estimate(size: size, path: "a.mp3", mimeType: nil, known: known, recorded: .standard, duration: duration)
        }
        #expect(under(.standard) == known)
        #expect(under(.standard, duration: nil) == known)
        let ladder = HeadPolicy.standard.ladder
        // 6 s at 32,000 B/s is 192,000 < 256 KiB; 3 s is 96,000 < 128 KiB; 2 s is 64,000 < 64 KiB.
        #expect(under(ladder[1]) == known - (512 << 10) + (256 << 10))
        #expect(under(ladder[2]) == known - (512 << 10) + (128 << 10))
        #expect(under(ladder[3]) == known - (512 << 10) - (64 << 10) + (64 << 10))
        // A 1,411 kbit/s WAV: 10 s is 1,764,000 bytes; 2 s 352,800.
        let wav: Int64 = 42_336_000
        #expect(under(ladder[3], known: 2_000_000, size: wav) == 2_000_000 - 1_764_000 - (128 << 10) + 352_800 + (64 << 10))
        // Without a duration the start set is taken for the fallback (its first part follows the audio bytes, its
        // tail the tail) or for audio at the format's typical rate, whichever counts more.
        #expect(under(ladder[1], duration: nil) == known - (256 << 10))
        #expect(under(ladder[3], duration: nil) == known - (448 << 10) - (64 << 10))
        // A FLAC without a length: 10 s at the typical 112,500 B/s is 1,125,000 bytes of audio, 3 s 337,500. Shorter
        // heads count the fallback's smaller saving, longer ones the typical rate's bigger cost.
        let flac = HeadPolicy.standard.ladder[2].estimate(size: 30_000_000, path: "a.flac", mimeType: nil, known: 1_300_000,
                                                          recorded: .standard, duration: nil)
        #expect(flac == 1_300_000 - (384 << 10))
        let back = HeadPolicy.standard.estimate(size: 30_000_000, path: "a.flac", mimeType: nil, known: 500_000,
                                                recorded: HeadPolicy.standard.ladder[2], duration: nil)
        #expect(back == 500_000 + 1_125_000 - 337_500)
        // An unknown format: the fallback's first part and tail.
        #expect(HeadPolicy.standard.estimate(size: 30_000_000, path: "a.ape", mimeType: nil, known: 200_000,
                                             recorded: HeadPolicy.standard.ladder[3], duration: nil) == 200_000 + (448 << 10) + (64 << 10))
        // Never past the file, never below nothing.
        #expect(under(HeadPolicy(audioBytes: 64 << 20, seconds: 600), known: 100_000, size: 200_000) == 200_000)
        #expect(under(ladder[3], known: 10, size: 200_000) == 0)
    }

    @Test("HeadFit: the first step whose heads fit; a longer one than now only within the margin", arguments: [
        // heads per step, budget, current step, chosen
        ([100, 60, 30, 10], 100, nil, 0),
        ([100, 60, 30, 10], 99, nil, 1),
        ([100, 60, 30, 10], 50, nil, 2),
        ([100, 60, 30, 10], 5, nil, 3),
        ([100, 60, 30, 10], 62, 2, 2),
        ([100, 60, 30, 10], 64, 2, 1),
        ([100, 60, 30, 10], 60, 1, 1),
        ([100, 60, 30, 10], 60, 0, 1),
        ([100, 60, 30, 10], 1000, 3, 0),
        ([7], 0, nil, 0),
    ] as [([Int64], Int64, Int?, Int)])
    func choose(heads: [Int64], budget: Int64, current: Int?, chosen: Int) {
        let ladder = (0 ..< heads.count).map { HeadPolicy(audioBytes: Int64($0)) }
        var asked: [Int] = []
        let (index, bytes) = HeadFit.choose(ladder, budget: budget, current: current) { policy in
            asked.append(Int(policy.audioBytes))
            return heads[Int(policy.audioBytes)]
        }
        #expect(index == chosen)
        #expect(bytes == heads[chosen])
        #expect(asked == Array(0 ... chosen), "the heads of the steps past the one chosen are not computed")
    }

    @Test("seeded: the step chosen fits (or is the last) and every longer one does not", arguments: [0, 1, 2, 3])
    func chooseProperty(variant: Int) {
        let s = seed("HeadPolicyTests.choose") &+ UInt64(variant)
        var random = SeededRandom(seed: s)
        for _ in 0 ..< 500 {
            let count = Int.random(in: 1 ... 5, using: &random)
            var heads: [Int64] = [Int64.random(in: 0 ... 1_000_000, using: &random)]
            for _ in 1 ..< count { heads.append(Int64.random(in: 0 ... heads.last!, using: &random)) }
            let budget = Int64.random(in: 0 ... 1_100_000, using: &random)
            let current = Bool.random(using: &random) ? Int.random(in: 0 ..< count, using: &random) : nil
            let ladder = (0 ..< count).map { HeadPolicy(audioBytes: Int64($0)) }
            let (index, _) = HeadFit.choose(ladder, budget: budget, current: current) { heads[Int($0.audioBytes)] }
            func limit(_ i: Int) -> Int64 { current.map { i < $0 } == true ? Int64((Double(budget) * HeadFit.upMargin).rounded(.down)) : budget }
            #expect(heads[index] <= limit(index) || index == count - 1, "seed \(s): \(heads) budget \(budget) current \(String(describing: current)) → \(index)")
            #expect((0 ..< index).allSatisfy { heads[$0] > limit($0) }, "seed \(s): \(heads) budget \(budget) → \(index)")
        }
    }

    /// The budget a person is told keeps the longer heads is one the choice moves up to them with (the margin
    /// included): told "about 1.9 MiB" with a budget of 2.0 MiB, a pull stayed shortened.
    @Test func theBudgetThatKeepsLongerHeadsMovesUpToThem() {
        #expect(HeadFit.budgetKeeping(0) == 0)
        #expect(HeadFit.budgetKeeping(95) == 100)
        #expect(HeadFit.budgetKeeping(1) == 2)
        #expect(HeadFit.budgetKeeping(1_966_080) == 2_069_558)
        #expect(HeadFit.budgetKeeping(Int64.max) == Int64.max)
        #expect(HeadFit.budgetKeeping(-5) == 0)
        let s = seed("HeadPolicyTests.budgetKeeping")
        var random = SeededRandom(seed: s)
        for _ in 0 ..< 500 {
            let count = Int.random(in: 2 ... 5, using: &random)
            var heads: [Int64] = [Int64.random(in: 0 ... 1 << 40, using: &random)]
            for _ in 1 ..< count { heads.append(Int64.random(in: 0 ... heads.last!, using: &random)) }
            let current = Int.random(in: 1 ..< count, using: &random)
            let wanted = Int.random(in: 0 ..< current, using: &random)
            let ladder = (0 ..< count).map { HeadPolicy(audioBytes: Int64($0)) }
            let (index, _) = HeadFit.choose(ladder, budget: HeadFit.budgetKeeping(heads[wanted]), current: current) { heads[Int($0.audioBytes)] }
            #expect(index <= wanted, "seed \(s): \(heads) from step \(current), told the budget for step \(wanted) → \(index)")
        }
    }

    /// The plan over an index whose default heads do not fit: shortened to the first step they fit, with the
    /// budget the defaults would need; with `shorten_heads` off, the defaults and tracks without a head.
    @Test func thePlanShortensTheHeadsToTheFirstStepTheyFit() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let known: Int64 = 656 << 10
        for i in 0 ..< 20 {
            let path = String(format: "t%02d.mp3", i)
            try cache.upsert(remote: "r", file: RemoteFile(path: path, size: 7_680_000, modified: Date(timeIntervalSince1970: 1_700_000_000)))
            let writer = try cache.openWriter(remote: "r", path: path)
            try writer.setStartSet(ByteRanges(0 ..< known), tags: nil, duration: 240, policy: i == 0 ? nil : HeadPolicy.standard.key)
            writer.close()
        }
        let maxSize: Int64 = 20 * 300_000
        let shortened = try CacheBudget(cache: cache, settings: BudgetSettings(maxSize: maxSize, minFree: 0)).plan().0
        let step = HeadPolicy.standard.ladder[2]
        #expect(shortened.heads == step)
        #expect(shortened.allHeadsFit && shortened.noneCount == 0)
        #expect(shortened.headsBytes == 20 * (known - (512 << 10) + (128 << 10)))
        #expect(shortened.fullHeadsBytes == 20 * known)

        let configured = try CacheBudget(cache: cache, settings: BudgetSettings(maxSize: maxSize, minFree: 0, shortenHeads: false)).plan().0
        #expect(configured.heads == .standard && configured.fullHeadsBytes == nil)
        #expect(!configured.allHeadsFit && configured.noneCount == 20 - Int(maxSize / known))

        let roomy = try CacheBudget(cache: cache, settings: BudgetSettings(maxSize: 20 * known, minFree: 0)).plan().0
        #expect(roomy.heads == .standard && roomy.fullHeadsBytes == nil && roomy.allHeadsFit)
    }

    @Test("seeded: the plan's heads are the heads its choice weighed; they fit unless the shortest does not", arguments: [0, 1])
    func planAndChoiceAgree(variant: Int) throws {
        let s = seed("HeadPolicyTests.planAndChoiceAgree") &+ UInt64(variant)
        var random = SeededRandom(seed: s)
        let ladder = HeadPolicy.standard.ladder
        for round in 0 ..< 6 {
            let dir = try TemporaryDirectory()
            defer { dir.cleanup() }
            let cache = try Cache.open(root: dir.url)
            for i in 0 ..< Int.random(in: 1 ... 40, using: &random) {
                let path = "t\(i)." + ["mp3", "flac", "ogg", "wav", "ape"].randomElement(using: &random)!
                let size = Int64.random(in: 1 ... 40_000_000, using: &random)
                try cache.upsert(remote: ["a", "b"].randomElement(using: &random)!,
                                 file: RemoteFile(path: path, size: size, modified: Date(timeIntervalSince1970: 1_700_000_000 + Double(i))))
                guard Bool.random(using: &random) else { continue }
                let remote = try #require(try cache.entries().first { $0.path == path }?.remote)
                let writer = try cache.openWriter(remote: remote, path: path)
                let known = Int64.random(in: 0 ... min(size, 4 << 20), using: &random)
                try writer.setStartSet(ByteRanges(0 ..< known), tags: nil, duration: Bool.random(using: &random) ? Double.random(in: 1 ... 900, using: &random) : nil,
                                       policy: Bool.random(using: &random) ? nil : ladder.randomElement(using: &random)!.key)
                writer.close()
                if Int.random(in: 0 ..< 8, using: &random) == 0 { try cache.pin(remote: remote, path: path) }
            }
            let maxSize = Int64.random(in: 0 ... 60 << 20, using: &random)
            let budget = CacheBudget(cache: cache, settings: BudgetSettings(maxSize: maxSize, minFree: 0))
            let (plan, tracks) = try budget.plan()
            let index = try #require(ladder.firstIndex(of: plan.heads))
            let weighed = HeadEstimates(rows: try cache.planningRows(), extra: [], configured: .standard).headsBytes(under: plan.heads)
            #expect(plan.headsBytes == weighed, "seed \(s) round \(round)")
            #expect(plan.allHeadsFit || index == ladder.count - 1 || plan.pinnedOverBudget, "seed \(s) round \(round): \(index)")
            #expect((plan.fullHeadsBytes != nil) == (index > 0), "seed \(s) round \(round)")
            #expect(tracks.allSatisfy { $0.startBytes <= $0.size }, "seed \(s) round \(round)")
            // Planning under the policy chosen gives the same plan.
            let (again, _) = try budget.plan(heads: plan.heads)
            #expect(again.targets == plan.targets && again.headsBytes == plan.headsBytes, "seed \(s) round \(round)")
        }
    }

    /// Re-deriving never guesses: a head whose structure is not all held (an ID3v2 tag longer than its bytes) is
    /// forgotten, to be read whole when fetched, not given the fallback the analysis ends in; a complete file the
    /// analysis does not recognise keeps its fallback under the new policy.
    @Test func aHeadWhoseStructureIsNotHeldIsForgottenNotGuessed() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        // "ID3" v2.3 declaring a 100,000-byte tag, then nothing an analyser recognises.
        let size = 200_000
        var bytes = [UInt8](repeating: 0, count: size)
        bytes.replaceSubrange(0 ..< 10, with: [0x49, 0x44, 0x33, 3, 0, 0, 0, 0x06, 0x0D, 0x20])
        for (path, held) in [("partial.mp3", 1000), ("complete.mp3", size)] {
            try cache.upsert(remote: "r", file: RemoteFile(path: path, size: Int64(size), modified: Date(timeIntervalSince1970: 1_700_000_000)))
            let writer = try cache.openWriter(remote: "r", path: path)
            try writer.setStartSet(ByteRanges(0 ..< 1000), tags: nil, duration: nil, policy: "old")
            try bytes[0 ..< held].withUnsafeBytes { try writer.write($0, at: 0) }
            try writer.checkpoint()
            writer.close()
        }
        let logger = Logger(level: .error) { _, _ in }
        #expect(try StartSets.rederive(remote: "r", cache: cache, heads: SyncOptions(headBytes: 64 << 10).heads, logger: logger) == (derived: 1, forgotten: 1))
        #expect(try cache.entry(remote: "r", path: "partial.mp3")?.startSet == nil)
        let complete = try #require(try cache.entry(remote: "r", path: "complete.mp3"))
        #expect(complete.startSet != nil && complete.startSet != ByteRanges(0 ..< 1000))
        #expect(try cache.startSetsOfOtherPolicies(remote: "r", policy: SyncOptions(headBytes: 64 << 10).heads.key,
                                                   legacy: StartSets.legacyPolicyKey).isEmpty)
    }
}
