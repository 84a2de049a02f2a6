// Test helper for CloudSyncCacheTests: fills one cache entry with deterministic bytes, in random chunk order,
// checkpointing as it goes, so the parent can kill -9 it at any moment and check what the index claims.
//
// Usage: cache-crash-child <cache-root> <remote> <path> <seed> <checkpoint-bytes> <pause-microseconds-per-chunk>
// With CACHE_CRASH_KEY (64 hex digits) set, the cache is encrypted with that key (cache.encrypt).
// Exit 0 after completing the entry; 3 on usage error; 4 on a cache error (message on stderr).
import CloudSyncCache
import CloudSyncCore
import Foundation

/// The byte every test expects at `offset`.
func patternByte(_ offset: Int64) -> UInt8 {
    let x = UInt64(bitPattern: offset) &* 0x9E37_79B9_7F4A_7C15
    return UInt8(truncatingIfNeeded: (x >> 29) ^ UInt64(bitPattern: offset))
}

let arguments = CommandLine.arguments

// `cache-crash-child --bench-listing ROOT N`: index N tracks, then time the `ls --offline` query (build with
// -c release for meaningful numbers).
if arguments.count == 4, arguments[1] == "--bench-listing", let count = Int(arguments[3]) {
    do {
        let cache = try Cache.open(root: URL(fileURLWithPath: arguments[2]))
        let files = (0..<count).map { i in
            RemoteFile(path: "Artist \(i / 1000)/Album \(i / 100)/\(i) Track.flac", providerID: "id\(i)", size: Int64(i),
                       modified: Date(timeIntervalSince1970: 1_700_000_000), revision: "r",
                       hashes: [ContentHash(kind: .md5, value: "0123456789abcdef0123456789abcdef")], mimeType: "audio/flac")
        }
        let clock = ContinuousClock()
        let upsert = try clock.measure {
            for start in stride(from: 0, to: count, by: 20_000) {
                try cache.upsert(remote: "big", files: Array(files[start..<min(count, start + 20_000)]))
            }
        }
        var listed = 0
        let list = try clock.measure { listed = try cache.entries(remote: "big").count }
        print("upsert \(count): \(upsert); entries(remote:) \(listed): \(list)")
        exit(0)
    } catch {
        print("bench failed: \(error)")
        exit(4)
    }
}
guard arguments.count == 7, let seed = UInt64(arguments[4]), let checkpointBytes = Int64(arguments[5]),
      let pause = UInt32(arguments[6]) else {
    FileHandle.standardError.write(Data("usage: cache-crash-child ROOT REMOTE PATH SEED CHECKPOINT_BYTES PAUSE_US\n".utf8))
    exit(3)
}

struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

do {
    var random = SplitMix(state: seed)
    let key = ProcessInfo.processInfo.environment["CACHE_CRASH_KEY"].flatMap { CacheKey(text: $0) }
    let cache = try Cache.open(root: URL(fileURLWithPath: arguments[1]),
                               limits: CacheLimits(checkpointBytes: checkpointBytes, checkpointInterval: .milliseconds(20)),
                               encryption: key.map { .on($0) } ?? .off)
    let writer = try cache.openWriter(remote: arguments[2], path: arguments[3], wait: true)
    let chunk: Int64 = 16 * 1024
    var work: [Range<Int64>] = []
    for gap in writer.missingRanges().ranges {
        var start = gap.lowerBound
        while start < gap.upperBound {
            let end = min(gap.upperBound, start + Int64.random(in: 1...chunk, using: &random))
            work.append(start..<end)
            start = end
        }
    }
    work.shuffle(using: &random)
    if key != nil {
        // Encrypted: blocks in random order, each block's pieces in order (how streams deliver them), so whole
        // blocks form and get sealed between the kills.
        let blockSize = SealedLayout.defaultBlockSize
        var order: [Int64: UInt64] = [:]
        for r in work where order[r.lowerBound / blockSize] == nil { order[r.lowerBound / blockSize] = random.next() }
        work.sort { (order[$0.lowerBound / blockSize]!, $0.lowerBound) < (order[$1.lowerBound / blockSize]!, $1.lowerBound) }
    }
    for range in work {
        let bytes = (range.lowerBound..<range.upperBound).map(patternByte)
        try bytes.withUnsafeBytes { try writer.write($0, at: range.lowerBound) }
        try writer.checkpointIfDue()
        if pause > 0 { usleep(pause) }
    }
    try await writer.complete(expectedHash: ContentHash(kind: .sha256, value: "pattern")) { _ in
        // The plaintext, through the writer (the file is ciphertext in an encrypted cache).
        let data = try writer.read(0 ..< writer.size)
        for (i, byte) in data.enumerated() where byte != patternByte(Int64(i)) { return "mismatch at \(i)" }
        return "pattern"
    }
    writer.close()
} catch {
    FileHandle.standardError.write(Data("cache-crash-child: \(error)\n".utf8))
    exit(4)
}
