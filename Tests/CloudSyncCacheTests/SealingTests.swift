@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Testing
import TestSupport

/// Encryption at rest (#26): the block layout's arithmetic, the AEAD and key derivation, and the cache's
/// writers, readers, verify, shrink and conversion over sealed files.
@Suite struct SealingTests {
    // MARK: Layout (pure)

    static let sizes: [(Int64, Int64, Int64)] = [
        (0, 0, 32),
        (1, 1, 32 + 1 + 16),
        (65_535, 1, 32 + 65_535 + 16),
        (65_536, 1, 32 + 65_536 + 16),
        (65_537, 2, 32 + 65_537 + 32),
        (10 << 20, 160, 32 + (10 << 20) + 160 * 16),
    ]

    @Test(arguments: sizes)
    func layoutSizes(plain: Int64, blocks: Int64, disk: Int64) throws {
        let layout = try #require(SealedLayout(plainSize: plain))
        #expect(layout.blockCount == blocks)
        #expect(layout.diskSize == disk)
        if blocks > 0 {
            #expect(layout.plainRange(ofBlock: blocks - 1).upperBound == plain)
            #expect(layout.diskOffset(ofBlock: blocks - 1) + Int64(layout.plainRange(ofBlock: blocks - 1).count) + 16 == disk)
        }
    }

    @Test func layoutRefusesImpossibleSizes() {
        #expect(SealedLayout(plainSize: -1) == nil)
        #expect(SealedLayout(plainSize: Int64(1) << 56) == nil)
        #expect(SealedLayout(plainSize: 10, blockSize: 1000) == nil)
        #expect(SealedLayout(plainSize: Int64(1) << 56 - 1) != nil)
    }

    /// `blocks(covering:)`, `aligned` and `wholeBlocks` against a byte-by-byte model on small blocks.
    @Test func layoutArithmeticMatchesAModel() throws {
        let s = seed("layoutArithmeticMatchesAModel")
        var random = SeededRandom(seed: s)
        for _ in 0 ..< 300 {
            let size = Int64.random(in: 0 ... 40_000, using: &random)
            let layout = try #require(SealedLayout(plainSize: size, blockSize: 4096))
            let a = Int64.random(in: 0 ... size, using: &random), b = Int64.random(in: 0 ... size, using: &random)
            let range = min(a, b) ..< max(a, b)
            let blockOf = { (offset: Int64) in offset / 4096 }
            let covering = range.isEmpty ? 0 ..< 0 : blockOf(range.lowerBound) ..< blockOf(range.upperBound - 1) + 1
            #expect(layout.blocks(covering: range) == covering, "seed \(s): \(range) in \(size)")
            let aligned = layout.aligned(range)
            #expect(aligned.lowerBound <= range.lowerBound && aligned.upperBound >= range.upperBound)
            #expect(range.isEmpty || (aligned.lowerBound % 4096 == 0 && (aligned.upperBound % 4096 == 0 || aligned.upperBound == size)))
            var set = ByteRanges()
            for _ in 0 ..< 3 {
                let x = Int64.random(in: 0 ... size, using: &random), y = Int64.random(in: 0 ... size, using: &random)
                set.insert(contentsOf: min(x, y) ..< max(x, y))
            }
            let whole = layout.wholeBlocks(in: set)
            for index in 0 ..< layout.blockCount {
                let block = layout.plainRange(ofBlock: index)
                #expect(whole.containsAll(block) == set.containsAll(block), "seed \(s): block \(index) of \(size)")
                #expect(whole.intersection(ByteRanges(block)).isEmpty || whole.containsAll(block))
            }
        }
    }

    // MARK: Crypto

    /// RFC 5869 test case 1 (SHA-256): the first 32 bytes of its OKM.
    @Test func hkdfMatchesRFC5869() {
        let okm = Sealer.hkdf(key: [UInt8](repeating: 0x0b, count: 22), salt: Array(0x00 ... 0x0c), info: Array(0xf0 ... 0xf9))
        #expect(okm.map { String(format: "%02x", $0) }.joined() == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf")
    }

    @Test func sealedBlocksOpenOnlyWithTheirKeyFileAndIndex() throws {
        let key = CacheKey.random()
        let header = SealedHeader.fresh()
        let sealer = try #require(Sealer(cacheKey: key, header: header, id: 7, generation: 3, plainSize: 100_000))
        let plain = [UInt8]((0 ..< 65_536).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        var sealed = [UInt8](repeating: 0, count: plain.count + 16)
        plain.withUnsafeBytes { p in sealed.withUnsafeMutableBytes { sealer.seal(block: 0, p, into: $0) } }
        #expect(sealed[0 ..< 4096].elementsEqual(plain[0 ..< 4096]) == false)
        func opens(_ s: Sealer, block: Int64, _ bytes: [UInt8]) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: bytes.count - 16)
            let ok = bytes.withUnsafeBytes { b in out.withUnsafeMutableBytes { s.open(block: block, b, into: $0) } }
            return ok ? out : nil
        }
        #expect(opens(sealer, block: 0, sealed) == plain)
        #expect(opens(sealer, block: 1, sealed) == nil, "another block's nonce")
        for other in [Sealer(cacheKey: CacheKey.random(), header: header, id: 7, generation: 3, plainSize: 100_000),
                      Sealer(cacheKey: key, header: SealedHeader.fresh(), id: 7, generation: 3, plainSize: 100_000),
                      Sealer(cacheKey: key, header: header, id: 8, generation: 3, plainSize: 100_000),
                      Sealer(cacheKey: key, header: header, id: 7, generation: 4, plainSize: 100_000)] {
            #expect(opens(try #require(other), block: 0, sealed) == nil, "another key, file, entry or generation")
        }
        var flipped = sealed
        for position in [0, 40_000, 65_535, 65_536, 65_551] {
            flipped = sealed
            flipped[position] ^= 0x04
            #expect(opens(sealer, block: 0, flipped) == nil, "a bit flipped at \(position)")
        }
        // The empty last block of a 0-byte remainder does not exist, but a 1-byte block does.
        let tiny = try #require(Sealer(cacheKey: key, header: header, id: 1, generation: 1, plainSize: 1))
        var one = [UInt8](repeating: 0, count: 17)
        [UInt8(42)].withUnsafeBytes { p in one.withUnsafeMutableBytes { tiny.seal(block: 0, p, into: $0) } }
        #expect(opens(tiny, block: 0, one) == [42])
    }

    @Test func keysParseFromHexAndBase64Only() {
        let key = CacheKey.random()
        #expect(CacheKey(text: key.hexText) == key)
        #expect(CacheKey(text: "  " + key.hexText.uppercased() + "\n") == key)
        #expect(CacheKey(text: Data(key.bytes).base64EncodedString()) == key)
        #expect(CacheKey(text: "correct horse battery staple") == nil)
        #expect(CacheKey(text: String(key.hexText.dropLast())) == nil)
        #expect(CacheKey(text: String(repeating: "g", count: 64)) == nil)
        #expect("\(key)".contains(key.hexText) == false, "a key never prints")
        #expect(key.checkValue != CacheKey.random().checkValue)
        #expect(SealedHeader(bytes: SealedHeader.fresh().bytes) != nil)
        #expect(SealedHeader(bytes: [UInt8](repeating: 0, count: 32)) == nil)
    }

    // MARK: The cache over sealed files

    private func sealedCache(_ dir: TemporaryDirectory, key: CacheKey = CacheKey.random()) throws -> Cache {
        try Cache.open(root: dir.url, limits: CacheLimits(checkpointBytes: 1 << 40, checkpointInterval: .seconds(3600)),
                       encryption: .on(key))
    }

    /// A block sealed piece by piece as its bytes arrive (what the writer does) is byte for byte the block sealed
    /// at once: the same ciphertext and tag, for random cuts of full and short blocks.
    @Test func blocksSealedPieceByPieceEqualBlocksSealedAtOnce() throws {
        let s = seed("blocksSealedPieceByPieceEqualBlocksSealedAtOnce")
        var random = SeededRandom(seed: s)
        let sealer = try #require(Sealer(cacheKey: CacheKey.random(), header: SealedHeader.fresh(), id: 3, generation: 1,
                                         plainSize: 1_000_000))
        for round in 0 ..< 40 {
            let count = round % 4 == 0 ? Int.random(in: 1 ... 65_536, using: &random) : 65_536
            let plain = (0 ..< count).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
            let index = Int64.random(in: 0 ... 14, using: &random)
            var once = [UInt8](repeating: 0, count: count + 16)
            plain.withUnsafeBytes { p in once.withUnsafeMutableBytes { sealer.seal(block: index, p, into: $0) } }
            var pieces = [UInt8](repeating: 0, count: count + 16)
            let stream = sealer.stream(block: index)
            var at = 0
            while at < count {
                let n = min(count - at, Int.random(in: 0 ... 20_000, using: &random))
                plain.withUnsafeBytes { p in
                    pieces.withUnsafeMutableBytes { stream.update(UnsafeRawBufferPointer(rebasing: p[at ..< at + n]), into: $0.baseAddress! + at) }
                }
                at += n
            }
            pieces.withUnsafeMutableBytes { stream.finish(tag: $0.baseAddress! + count) }
            #expect(pieces == once, "seed \(s), round \(round): \(count) bytes of block \(index)")
        }
    }

    /// Pieces that overlap each other and repeat, in random order (a cut connection fetched again, a segment
    /// that overlaps another): every byte is sealed once, and what is read back is the plaintext.
    @Test func overlappingAndRepeatedPiecesSealEachByteOnce() async throws {
        let s = seed("overlappingAndRepeatedPiecesSealEachByteOnce")
        var random = SeededRandom(seed: s)
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try sealedCache(dir)
        let size = Int64.random(in: 150_000 ... 400_000, using: &random)
        try cache.upsert(remote: "r", file: remoteFile("b.ogg", size: size))
        let writer = try cache.openWriter(remote: "r", path: "b.ogg")
        while !writer.missingRanges().isEmpty {
            // Starts before 0 are clamped, so the first bytes are as likely to be covered as any others.
            let start = Int64.random(in: -70_000 ..< size, using: &random)
            let piece = max(0, start) ..< min(size, max(1, start + Int64.random(in: 1 ... 70_000, using: &random)))
            try writer.writePattern(piece)
        }
        #expect(try writer.read(0 ..< size) == Data(pattern(0 ..< size)), "seed \(s)")
        try writer.checkpoint()
        writer.close()
        let reader = try cache.openReader(remote: "r", path: "b.ogg")
        #expect(try reader.read(0 ..< size) == Data(pattern(0 ..< size)), "seed \(s)")
    }

    /// Random pieces in random order through the writer: only whole blocks reach the disk (and the index), the
    /// rest waits in memory and still counts as fetched; what is read back is the plaintext; no plaintext window
    /// is in any file.
    @Test func sealedWriterStoresWholeBlocksOnly() async throws {
        let s = seed("sealedWriterStoresWholeBlocksOnly")
        var random = SeededRandom(seed: s)
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try sealedCache(dir)
        let size = Int64.random(in: 200_000 ... 600_000, using: &random)
        try cache.upsert(remote: "r", file: remoteFile("a.flac", size: size))
        let writer = try cache.openWriter(remote: "r", path: "a.flac")
        #expect(writer.isSealed)
        let layout = try #require(SealedLayout(plainSize: size))
        var pieces: [Range<Int64>] = []
        var at: Int64 = 0
        while at < size {
            let n = Int64.random(in: 1 ... 90_000, using: &random)
            pieces.append(at ..< min(size, at + n))
            at += n
        }
        pieces.shuffle(using: &random)
        let half = pieces.count / 2
        var written = ByteRanges()
        for piece in pieces[..<half] {
            try writer.writePattern(piece)
            written.insert(contentsOf: piece)
        }
        try writer.checkpoint()
        #expect(writer.presentRanges() == layout.wholeBlocks(in: written), "seed \(s)")
        #expect(writer.missingRanges() == written.gaps(within: 0 ..< size), "seed \(s): buffered bytes are not fetched again")
        let reader = try cache.openReader(remote: "r", path: "a.flac")
        #expect(try reader.presentRanges() == layout.wholeBlocks(in: written))
        for range in try reader.presentRanges().ranges {
            #expect(try reader.read(range) == Data(pattern(range)))
        }
        #expect(try FileManager.default.attributesOfItem(atPath: writer.partialURL.path)[.size] as? Int64 == layout.diskSize)
        for piece in pieces[half...] { try writer.writePattern(piece) }
        #expect(writer.missingRanges().isEmpty)
        let all = try writer.read(0 ..< size)
        #expect(all == Data(pattern(0 ..< size)), "seed \(s)")
        try writer.verify(expectedHash: ContentHash(kind: .sha256, value: "x")) { _ in "x" }
        try await writer.promote()
        writer.close()
        let entry = try #require(try cache.entry(remote: "r", path: "a.flac"))
        #expect(entry.state == .complete && entry.sealed)
        let onDisk = try Data(contentsOf: entry.localURL)
        #expect(onDisk.count == Int(layout.diskSize))
        let scan = PlaintextWindows(sources: [Data(pattern(0 ..< size))])
        #expect(scan.firstLeak(in: onDisk) == nil, "seed \(s): plaintext in the sealed track")
        let again = try cache.openReader(remote: "r", path: "a.flac")
        #expect(try again.read(65_530 ..< 131_080) == Data(pattern(65_530 ..< 131_080)))
        #expect(try again.read(size - 3 ..< size) == Data(pattern(size - 3 ..< size)))
    }

    /// A sealed head is stored as whole blocks, so its start set is recorded as those blocks (what the budget
    /// counts); one recorded unaligned (by an older build) is aligned when a sealing cache next opens.
    @Test func startSetsAreTheWholeBlocksTheirHeadTakes() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let key = CacheKey.random()
        let size: Int64 = 1_000_000
        let exact = ByteRanges([0 ..< 70_000, size - 128 ..< size])
        let blocks = ByteRanges([0 ..< 131_072, 983_040 ..< size])
        do {
            let cache = try sealedCache(dir, key: key)
            try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: size))
            let writer = try cache.openWriter(remote: "r", path: "a.mp3")
            try writer.setStartSet(exact, tags: nil, duration: nil)
            writer.close()
            #expect(try cache.row(remote: "r", path: "a.mp3")?.startSet == blocks)
            // As an older build left it.
            try cache.withDatabase { db throws(CacheError) in
                _ = try db.run("UPDATE files SET start_set = ?, start_bytes = ?", [.blob(exact.encoded), .int(exact.byteCount)])
                _ = try db.run("DELETE FROM settings WHERE name = ?", [.text(Cache.alignedStartSetsSetting)])
            }
        }
        let reopened = try sealedCache(dir, key: key)
        #expect(try reopened.row(remote: "r", path: "a.mp3")?.startSet == blocks)
        let planned = try reopened.planningRows().first?.startBytes
        #expect(planned == blocks.byteCount)
    }

    /// Closing with half a block in memory loses that block only; reopening keeps the sealed blocks; a reset
    /// makes a new salt (a new key) so other bytes are never sealed under the old nonces.
    @Test func reopenKeepsBlocksAndResetChangesTheKey() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let key = CacheKey.random()
        do {
            let cache = try sealedCache(dir, key: key)
            try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: 300_000))
            let writer = try cache.openWriter(remote: "r", path: "a.mp3")
            try writer.writePattern(0 ..< 100_000)
            writer.close()
        }
        let cache = try sealedCache(dir, key: key)
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        #expect(writer.presentRanges() == ByteRanges(0 ..< 65_536))
        let header = try Data(contentsOf: writer.partialURL)[0 ..< 32]
        try writer.writePattern(65_536 ..< 131_072)
        try writer.checkpoint()
        #expect(try Data(contentsOf: writer.partialURL)[0 ..< 32] == header, "the same file keeps its salt")
        try writer.reset()
        #expect(writer.presentRanges().isEmpty)
        #expect(try Data(contentsOf: writer.partialURL)[0 ..< 32] != header, "a reset file gets a new salt")
        try writer.writePattern(0 ..< 65_536)
        #expect(try writer.read(0 ..< 65_536) == Data(pattern(0 ..< 65_536)))
        writer.close()
    }

    /// A flipped bit is never served: the reader throws `.damaged`, the block is dropped (fetched again), verify
    /// reports what it finds.
    @Test func damagedBlocksAreNeverServedAndAreDropped() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try sealedCache(dir)
        let size: Int64 = 200_000
        for name in ["a.mp3", "b.mp3", "c.mp3"] {
            try cache.upsert(remote: "r", file: remoteFile(name, size: size))
            let writer = try cache.openWriter(remote: "r", path: name)
            try await writer.fillAndCompleteSealed()
            writer.close()
        }
        func flip(_ name: String, at offset: Int) throws {
            let url = try #require(try cache.entry(remote: "r", path: name)).localURL
            var data = try Data(contentsOf: url)
            data[offset] ^= 0x01
            try data.write(to: url)
        }
        // Block 1 of a.mp3 (disk offsets 32 + 65552 …).
        try flip("a.mp3", at: 32 + 65_552 + 100)
        let reader = try cache.openReader(remote: "r", path: "a.mp3")
        #expect(try reader.read(0 ..< 65_536) == Data(pattern(0 ..< 65_536)))
        let error = #expect(throws: CacheError.self) { try reader.read(60_000 ..< 70_000) }
        #expect(error?.code == .damaged)
        let a = try #require(try cache.entry(remote: "r", path: "a.mp3"))
        #expect(a.state == .partial && a.presentBytes == size - 65_536, "only the damaged block was dropped")
        #expect(FileManager.default.fileExists(atPath: a.localURL.path) == false, "the track became a partial file")
        let fresh = try cache.openReader(remote: "r", path: "a.mp3")
        #expect(try fresh.read(140_000 ..< 150_000) == Data(pattern(140_000 ..< 150_000)))
        // verify finds the next one, in a complete track and in a partial one.
        try flip("b.mp3", at: 32 + 10)
        let partialURL = try #require(try cache.partialURL(remote: "r", path: "a.mp3"))
        var partial = try Data(contentsOf: partialURL)
        partial[32 + 2 * 65_552 + 5] ^= 0x80
        try partial.write(to: partialURL)
        let report = try cache.verify { _, bytes in
            try bytes.forEachChunk { _ in }
            return "x"
        }
        #expect(Set(report.damaged) == ["r:a.mp3", "r:b.mp3"], "\(report)")
        #expect(try cache.entry(remote: "r", path: "b.mp3")?.presentBytes == size - 65_536)
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.presentBytes == size - 2 * 65_536)
        #expect(try cache.entry(remote: "r", path: "c.mp3")?.state == .complete)
        let clean = try cache.verify { _, bytes in
            try bytes.forEachChunk { _ in }
            return "x"
        }
        #expect(clean.damaged.isEmpty)
    }

    /// The cache's mode: a wrong key, a missing key and a configuration that disagrees are refused with the
    /// command that fixes it; an empty cache simply switches.
    @Test func modeMismatchesAndWrongKeysAreRefused() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let key = CacheKey.random()
        do {
            let cache = try Cache.open(root: dir.url)
            try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: 1000))
            _ = try Cache.open(root: dir.url, encryption: .on(key))  // no bytes yet: switches
            let plain = try Cache.open(root: dir.url)  // and back
            let writer = try plain.openWriter(remote: "r", path: "a.mp3")
            try await writer.fillAndComplete()
            writer.close()
        }
        let refused = #expect(throws: CacheError.self) { try Cache.open(root: dir.url, encryption: .on(key)) }
        #expect(refused?.code == .encryptionMismatch && refused?.message.contains("cloudsync cache encrypt") == true)
        let converting = try Cache.open(root: dir.url, encryption: .on(key), checkingMode: false)
        let report = try converting.convert(sealing: true)
        #expect(report.finished && report.converted == 1)
        let sealed = try Cache.open(root: dir.url, encryption: .on(key))
        #expect(try sealed.entry(remote: "r", path: "a.mp3")?.sealed == true)
        #expect(try sealed.openReader(remote: "r", path: "a.mp3").read(0 ..< 1000) == Data(pattern(0 ..< 1000)))
        let wrong = #expect(throws: CacheError.self) { try Cache.open(root: dir.url, encryption: .on(CacheKey.random())) }
        #expect(wrong?.code == .wrongKey && wrong?.exitCode == .auth)
        let plain = #expect(throws: CacheError.self) { try Cache.open(root: dir.url) }
        #expect(plain?.code == .encryptionMismatch && plain?.exitCode == .config)
        #expect(plain?.message.contains("cloudsync cache decrypt") == true)
    }

    /// A conversion that meets a busy entry stops short of finishing: strict opens then name the command, and
    /// running it again finishes. Both ways; the bytes stay the same.
    @Test func conversionResumesAndRoundTrips() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let key = CacheKey.random()
        let plain = try Cache.open(root: dir.url)
        for (name, size) in [("a.mp3", Int64(300_000)), ("b.mp3", Int64(70_000)), ("c.mp3", Int64(1))] {
            try plain.upsert(remote: "r", file: remoteFile(name, size: size))
            let writer = try plain.openWriter(remote: "r", path: name)
            try await writer.fillAndComplete()
            writer.close()
        }
        try plain.upsert(remote: "r", file: remoteFile("d.mp3", size: 200_000))
        let partial = try plain.openWriter(remote: "r", path: "d.mp3")
        try partial.writePattern(0 ..< 150_000)
        try partial.checkpoint()
        partial.close()
        let busy = try plain.openWriter(remote: "r", path: "b.mp3")  // holds b's lock
        let converting = try Cache.open(root: dir.url, encryption: .on(key), checkingMode: false)
        let first = try converting.convert(sealing: true)
        #expect(!first.finished && first.skippedBusy == ["r:b.mp3"])
        #expect(first.droppedBytes == 150_000 - 131_072, "the incomplete block of d.mp3")
        let stopped = #expect(throws: CacheError.self) { try Cache.open(root: dir.url, encryption: .on(key)) }
        #expect(stopped?.message.contains("cloudsync cache encrypt") == true)
        busy.close()
        let second = try converting.convert(sealing: true)
        #expect(second.finished && second.converted == 1)
        let sealed = try Cache.open(root: dir.url, encryption: .on(key))
        let sources = [Data(pattern(0 ..< 300_000))]
        let scan = PlaintextWindows(sources: sources)
        #expect(try scan.leaks(under: dir.url).isEmpty)
        #expect(try sealed.openReader(remote: "r", path: "a.mp3").read(0 ..< 300_000) == sources[0])
        #expect(try sealed.entry(remote: "r", path: "d.mp3")?.presentBytes == 131_072)
        // And back.
        let back = try Cache.open(root: dir.url, encryption: CacheEncryption(key: key, sealsNewFiles: false), checkingMode: false)
        #expect(try back.convert(sealing: false).finished)
        let again = try Cache.open(root: dir.url)
        let a = try #require(try again.entry(remote: "r", path: "a.mp3"))
        #expect(try Data(contentsOf: a.localURL) == sources[0])
        #expect(try again.openReader(remote: "r", path: "c.mp3").read(0 ..< 1) == Data(pattern(0 ..< 1)))
    }

    /// Shrinking an encrypted track to its head keeps the whole blocks of the start set, re-sealed.
    @Test func shrinkToHeadKeepsSealedBlocks() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try sealedCache(dir)
        let size: Int64 = 500_000
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: size))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try await writer.fillAndCompleteSealed()
        try writer.setStartSet(ByteRanges(0 ..< 100_000), tags: nil, duration: nil)
        writer.close()
        let id = try #require(try cache.planningRows().first).id
        guard case .done = try cache.shrinkToHead(id: id) else { Issue.record("not shrunk"); return }
        let entry = try #require(try cache.entry(remote: "r", path: "a.mp3"))
        #expect(entry.state == .partial && entry.presentBytes == 131_072 && entry.headPresent)
        let reader = try cache.openReader(remote: "r", path: "a.mp3")
        #expect(try reader.read(0 ..< 131_072) == Data(pattern(0 ..< 131_072)))
        #expect(try PlaintextWindows(sources: [Data(pattern(0 ..< size))]).leaks(under: dir.url).isEmpty)
    }
}

extension EntryWriter {
    /// Fills every missing byte with the pattern and completes (the "hash" is not checked: the file on disk
    /// is ciphertext).
    func fillAndCompleteSealed() async throws {
        for gap in missingRanges().ranges { try writePattern(gap) }
        try verify(expectedHash: nil) { _ in nil }
        try await promote()
    }
}
