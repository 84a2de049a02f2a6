import CloudSyncCache
import CloudSyncCore
@testable import CloudSyncEngine
import CloudSyncHTTP
import Foundation
import Synchronization
import Testing
import TestSupport

// A full listing is planned and recorded in groups (`Sync.recordingGroup` files, or what came within
// `Sync.recordingDelay`), one index transaction per group instead of one per page.

/// A provider whose listing is a script: `script` yields the pages (and may pause or look at the index between
/// them). Downloads are never asked for (the tests only survey).
private final class ScriptedListing: Provider {
    let remoteName = "scripted"
    let capabilities = ProviderCapabilities(hashKinds: [], hasChangeFeed: false)
    let script: @Sendable (_ yield: @Sendable ([RemoteFile]) -> Void) async throws -> Void

    init(_ script: @escaping @Sendable (_ yield: @Sendable ([RemoteFile]) -> Void) async throws -> Void) { self.script = script }

    func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        let script = self.script
        return ListingPage.stream { yield in
            try await script { yield(ListingPage(kind: .full, upserts: $0)) }
        }
    }

    func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        throw TestFailure("the survey tests download nothing (\(file.path))")
    }
}

private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

private func files(_ folder: String, _ count: Int) -> [RemoteFile] {
    (0 ..< count).map {
        RemoteFile(path: "\(folder)/\($0).mp3", size: 1000, modified: Date(timeIntervalSince1970: 1_700_000_000), revision: "r1",
                   hashes: [], mimeType: nil)
    }
}

private func survey(_ provider: ScriptedListing, cache: Cache) async throws -> Sync.Survey {
    let sync = Sync(remote: "scripted", providerName: "scripted", provider: provider, transport: UnusedTransport(),
                    pacer: Pacer(policy: .init(retries: 0)), cache: cache, options: SyncOptions(), logger: .silent, events: { _ in })
    return try await sync.survey(recording: true)
}

@Suite("a full listing is recorded in groups")
struct ListingRecordingTests {
    /// Many small pages (WebDAV folders) and a last group smaller than `recordingGroup`: every file is recorded and
    /// planned once, whatever group it fell in; a path listed twice keeps its first entry.
    @Test func everyPageIsRecordedAndPlanned() async throws {
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        // Listed again with another size (the last page): the first entry stays.
        var again = files("f0", 1)[0]
        again.size = 5
        let provider = ScriptedListing { [again] yield in
            for folder in 0 ..< 130 { yield(files("f\(folder)", 10)) }
            yield([again])
        }
        let count = 130 * 10
        #expect(count > Sync.recordingGroup * 2 && count % Sync.recordingGroup != 0)

        let result = try await survey(provider, cache: cache)
        #expect(result.present.count == count)
        #expect(result.plan.fetch.count == count)
        #expect(Set(result.plan.fetch.map(\.file.path)).count == count)
        #expect(try cache.knownPaths(remote: "scripted").count == count)
        #expect(try cache.entry(remote: "scripted", path: "f0/0.mp3")?.file.size == 1000)
    }

    /// A slow listing (a cloud answering one folder a second) does not hold its first files back until the end: a
    /// group closes once `recordingDelay` has passed since its first file, so `ls` and `serve` see them while the
    /// listing goes on. After the first folder, the listing sends a folder without audio every `recordingDelay` +
    /// 0.1 s until the first folder's files are in the index (they must be within 120 s: a loaded run of the whole target
    /// starves this test of threads for over a minute), then one more folder.
    @Test func aSlowListingsFilesReachTheIndexBeforeItEnds() async throws {
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        let first = Set(files("early", 3).map(\.path))
        let seen = Flag()
        let pause = Sync.recordingDelay + .milliseconds(100)
        let provider = ScriptedListing { yield in
            yield(files("early", 3))
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline {
                try await Task.sleep(for: pause)
                if try first.isSubset(of: cache.knownPaths(remote: "scripted")) {
                    seen.set()
                    break
                }
                yield([])
            }
            yield(files("late", 3))
        }
        let result = try await survey(provider, cache: cache)
        #expect(seen.isSet, "the first page was recorded only when the listing ended")
        #expect(result.present.count == 6)
        #expect(try cache.knownPaths(remote: "scripted").count == 6)
    }
}
