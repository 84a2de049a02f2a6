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

/// A provider whose listing is a script: `pages` of files, each page yielded after `before` runs (a pause, a wait
/// for the index). Downloads are never asked for (the tests only survey).
private final class ScriptedListing: Provider {
    let remoteName = "scripted"
    let capabilities = ProviderCapabilities(hashKinds: [], hasChangeFeed: false)
    let pages: [(before: @Sendable () async throws -> Void, files: [RemoteFile])]

    init(_ pages: [(before: @Sendable () async throws -> Void, files: [RemoteFile])]) { self.pages = pages }

    func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        let pages = self.pages
        return ListingPage.stream { yield in
            for page in pages {
                try await page.before()
                yield(ListingPage(kind: .full, upserts: page.files))
            }
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
        var pages: [(before: @Sendable () async throws -> Void, files: [RemoteFile])] = []
        for folder in 0 ..< 130 { pages.append((before: {}, files: files("f\(folder)", 10))) }
        // Listed again with another size: the first entry stays.
        var again = files("f0", 1)[0]
        again.size = 5
        pages.append((before: {}, files: [again]))
        let count = 130 * 10
        #expect(count > Sync.recordingGroup * 2 && count % Sync.recordingGroup != 0)

        let result = try await survey(ScriptedListing(pages), cache: cache)
        #expect(result.present.count == count)
        #expect(result.plan.fetch.count == count)
        #expect(Set(result.plan.fetch.map(\.file.path)).count == count)
        #expect(try cache.knownPaths(remote: "scripted").count == count)
        #expect(try cache.entry(remote: "scripted", path: "f0/0.mp3")?.file.size == 1000)
    }

    /// A slow listing (a cloud answering one folder a second) does not hold its first files back until the end: a
    /// group closes once `recordingDelay` has passed, so `ls` and `serve` see them while the listing goes on.
    @Test func aSlowListingsFilesReachTheIndexBeforeItEnds() async throws {
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        let first = Set(files("early", 3).map(\.path))
        let seen = Flag()
        let pause = Sync.recordingDelay + .milliseconds(100)
        let pages: [(before: @Sendable () async throws -> Void, files: [RemoteFile])] = [
            (before: {}, files: files("early", 3)),
            (before: { try await Task.sleep(for: pause) }, files: files("middle", 3)),
            (before: {
                // The first page is in the index while the listing is still running (it never ends otherwise).
                let deadline = ContinuousClock.now + .seconds(30)
                while ContinuousClock.now < deadline {
                    if try first.isSubset(of: cache.knownPaths(remote: "scripted")) { seen.set(); return }
                    try await Task.sleep(for: .milliseconds(10))
                }
            }, files: files("late", 3)),
        ]
        let result = try await survey(ScriptedListing(pages), cache: cache)
        #expect(seen.isSet, "the first page was recorded only when the listing ended")
        #expect(result.present.count == 9)
        #expect(try cache.knownPaths(remote: "scripted").count == 9)
    }
}
