import CloudSyncCache
import CloudSyncCore
@testable import CloudSyncEngine
import Foundation
import Testing
import TestSupport

/// The analysis reads an entry through `WriterBytes`, which reads ahead from the partial file and serves later
/// reads from memory: it must give exactly the bytes asked for when all are present, and nil otherwise.
@Suite struct WriterBytesTests {
    @Test("reads through the read-ahead block equal the file's bytes, or nil where a byte is missing",
          arguments: [(UInt64(1), false), (2, false), (3, true), (4, true)])
    func readsMatchTheFile(seed: UInt64, encrypted: Bool) throws {
        var random = SeededRandom(seed: seed)
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"),
                                   encryption: encrypted ? .on(CacheKey.random()) : .off)
        let size = Int64(Int.random(in: 150_000 ... 400_000, using: &random))
        let data = random.bytes(Int(size))
        let file = RemoteFile(path: "a.mp3", size: size, modified: Date(timeIntervalSince1970: 1_700_000_000),
                              revision: "v1", hashes: [], mimeType: nil)
        try cache.upsert(remote: "mem", files: [file])
        let writer = try cache.openWriter(remote: "mem", path: "a.mp3")
        defer { writer.close() }
        // A few present runs (an encrypted entry keeps whole 64 KiB blocks, so runs start on block bounds there).
        var present = ByteRanges()
        for _ in 0 ..< 4 {
            let block: Int64 = 64 << 10
            var lower = Int64.random(in: 0 ..< size, using: &random)
            if encrypted { lower -= lower % block }
            let upper = encrypted ? min(size, lower + block * Int64.random(in: 1 ... 2, using: &random))
                                  : min(size, lower + Int64.random(in: 1 ... 90_000, using: &random))
            try data[Int(lower) ..< Int(upper)].withUnsafeBytes { try writer.write($0, at: lower) }
            present.insert(contentsOf: lower ..< upper)
        }
        present = writer.presentRanges()
        let bytes = WriterBytes(writer: writer)
        var served = 0
        for _ in 0 ..< 400 {
            // Mostly small reads near the last one (as parsers do), sometimes a jump or a big read.
            let lower = Int64.random(in: 0 ..< size, using: &random)
            let count = Int64.random(in: 0 ... (Bool.random(using: &random) ? 64 : 100_000), using: &random)
            let range = lower ..< min(size, lower + count)
            let got = bytes.bytes(in: range)
            if present.containsAll(range) {
                #expect(got.map { Data($0) } == data[Int(range.lowerBound) ..< Int(range.upperBound)], "\(range)")
                served += 1
            } else {
                #expect(got == nil, "\(range) is not all present: \(present)")
            }
        }
        #expect(served > 0)
    }
}
