import CloudSyncCache
import CloudSyncCore
import Foundation
import TestSupport

/// The byte every test expects at `offset` (same formula as the cache-crash-child helper).
func patternByte(_ offset: Int64) -> UInt8 {
    let x = UInt64(bitPattern: offset) &* 0x9E37_79B9_7F4A_7C15
    return UInt8(truncatingIfNeeded: (x >> 29) ^ UInt64(bitPattern: offset))
}

func pattern(_ range: Range<Int64>) -> [UInt8] { range.map(patternByte) }

func remoteFile(_ path: String, size: Int64 = 1000, modified: TimeInterval = 1_700_000_000, revision: String = "r1",
                hashes: [ContentHash] = []) -> RemoteFile {
    RemoteFile(path: path, providerID: "id:" + path, size: size, modified: Date(timeIntervalSince1970: modified),
               revision: revision, hashes: hashes, mimeType: "audio/mpeg")
}

extension EntryWriter {
    /// Writes the pattern bytes of `range`.
    func writePattern(_ range: Range<Int64>) throws {
        try pattern(range).withUnsafeBytes { try write($0, at: range.lowerBound) }
    }

    /// Fills every missing byte with the pattern and completes with a pattern check as the "hash".
    func fillAndComplete() async throws {
        for gap in missingRanges().ranges { try writePattern(gap) }
        try await complete(expectedHash: ContentHash(kind: .sha256, value: "pattern"), verify: patternVerifier)
    }
}

/// A `verify` closure for `complete`: "pattern" when the file holds the pattern bytes.
func patternVerifier(_ url: URL) throws -> String? {
    let data = try Data(contentsOf: url)
    for (i, byte) in data.enumerated() where byte != patternByte(Int64(i)) { return "mismatch at \(i)" }
    return "pattern"
}

/// A `hasher` for `Cache.verify`: "pattern" when the entry's plaintext is the pattern bytes.
func patternVerifier(_ bytes: EntryBytes) throws -> String {
    var at: Int64 = 0
    var good = true
    try bytes.forEachChunk { chunk in
        for (i, byte) in chunk.enumerated() where byte != patternByte(at + Int64(i)) { good = false }
        at += Int64(chunk.count)
    }
    return good ? "pattern" : "mismatch"
}

/// The directory holding the built products (the test bundle and `cache-crash-child`).
func productsDirectory() -> URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}
