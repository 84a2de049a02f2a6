@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Testing
import TestSupport

/// Each start set is recorded with the policy it was computed under, so a pull under another one finds it
/// (`startSetsOfOtherPolicies`) and derives it again or forgets it (`forgetStartSets`).
@Suite struct StartPolicyTests {
    @Test func startSetsOfAnotherPolicyAreFoundAndForgotten() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        for path in ["a.mp3", "b.mp3", "c.mp3", "d.mp3"] { try cache.upsert(remote: "r", file: remoteFile(path, size: 4000)) }
        try cache.upsert(remote: "other", file: remoteFile("a.mp3", size: 4000))
        func record(_ remote: String, _ path: String, policy: String?, complete: Bool = false) async throws {
            let writer = try cache.openWriter(remote: remote, path: path)
            try writer.setStartSet(ByteRanges(0 ..< 500), tags: nil, duration: nil, policy: policy)
            if complete {
                try await writer.fillAndComplete()
            } else {
                try pattern(0 ..< 500).withUnsafeBytes { try writer.write($0, at: 0) }
                try writer.checkpoint()
            }
            writer.close()
        }
        try await record("r", "a.mp3", policy: "new")
        try await record("r", "b.mp3", policy: "old", complete: true)
        try await record("r", "c.mp3", policy: nil)  // recorded before policies were
        try await record("other", "a.mp3", policy: "old")
        _ = try cache.evictEntry(id: try #require(try cache.row(remote: "r", path: "a.mp3")).id)  // no bytes, start set kept

        let stale = try cache.startSetsOfOtherPolicies(remote: "r", policy: "new", legacy: "old")
        #expect(stale.map(\.path) == ["b.mp3", "c.mp3"], "d has no start set, a has this policy, other is another remote")
        #expect(stale.map(\.holdsBytes) == [true, true])
        let legacyIsCurrent = try cache.startSetsOfOtherPolicies(remote: "r", policy: "old", legacy: "old")
        #expect(legacyIsCurrent.map(\.path) == ["a.mp3"], "b has the old policy, c counts as the legacy one")
        #expect(legacyIsCurrent.map(\.holdsBytes) == [false], "a was evicted: nothing to derive it from")

        // An entry another writer holds is left as it is.
        let busy = try cache.openWriter(remote: "r", path: "c.mp3")
        #expect(try cache.forgetStartSets(remote: "r", paths: ["b.mp3", "c.mp3"]) == ["b.mp3"])
        busy.close()
        let b = try #require(try cache.entry(remote: "r", path: "b.mp3"))
        #expect(b.startSet == nil && b.state == .complete, "the track stays; its start set is analysed again when needed")
        #expect(try cache.startSetsOfOtherPolicies(remote: "r", policy: "new", legacy: "old").map(\.path) == ["c.mp3"])
        #expect(try #require(try cache.entry(remote: "r", path: "c.mp3")).headPresent, "c kept its start set and head")
    }
}
