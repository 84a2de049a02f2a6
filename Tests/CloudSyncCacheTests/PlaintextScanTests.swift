import Foundation
import Testing
import TestSupport

/// The scanner behind "no 4 KiB window of any source occurs under cache.dir": it must find what it looks for, or
/// every encryption test that expects no leak would pass on a scanner that finds nothing.
@Suite struct PlaintextScanTests {
    @Test("a source run of window + stride - 1 bytes is found at any offset of any file; noise is not", arguments: 0 ..< 40)
    func findsEmbeddedRuns(_ trial: Int) {
        var rng = SeededRandom(seed: seed("plaintext-scan-\(trial)"))
        let window = 4096, stride = 512
        let sources = (0 ..< 3).map { _ in rng.bytes(Int.random(in: 5_000 ... 60_000, using: &rng)) }
        let scan = PlaintextWindows(sources: sources, window: window, stride: stride)
        let which = Int.random(in: 0 ..< sources.count, using: &rng)
        let source = sources[which]
        let length = window + stride - 1
        let from = Int.random(in: 0 ... source.count - length, using: &rng)
        let before = rng.bytes(Int.random(in: 0 ... 20_000, using: &rng))
        let file = before + source[source.startIndex + from ..< source.startIndex + from + length] + rng.bytes(Int.random(in: 0 ... 9_000, using: &rng))
        let leak = scan.firstLeak(in: file)
        #expect(leak != nil, "trial \(trial): a run of \(length) bytes of source \(which) at \(from) is not found")
        if let leak {
            // The window found is the source's bytes where the scan says.
            #expect(file[file.startIndex + leak.offset ..< file.startIndex + leak.offset + window]
                == sources[leak.source][sources[leak.source].startIndex + leak.sourceOffset ..< sources[leak.source].startIndex + leak.sourceOffset + window])
            #expect(leak.offset >= before.count && leak.offset + window <= before.count + length)
        }
        #expect(scan.firstLeak(in: rng.bytes(100_000)) == nil, "trial \(trial): noise holds no source window")
        // Shorter than one window: nothing to find.
        let short = before + source[source.startIndex + from ..< source.startIndex + from + window - 1]
        #expect(scan.firstLeak(in: short) == nil)
    }

    @Test("runs of one repeated byte (a sparse file's holes) are not leaks; a copied source under a folder is")
    func holesAndFolders() throws {
        var rng = SeededRandom(seed: seed("plaintext-scan-folders"))
        let zeros = Data(count: 20_000)
        let source = rng.bytes(30_000) + zeros
        let scan = PlaintextWindows(sources: [source])
        #expect(scan.firstLeak(in: Data(count: 50_000)) == nil)
        let dir = try TestSupport.TemporaryDirectory(prefix: "plaintext-scan")
        try FileManager.default.createDirectory(at: dir.file("a/b"), withIntermediateDirectories: true)
        try rng.bytes(70_000).write(to: dir.file("a/noise"))
        try Data(count: 70_000).write(to: dir.file("a/holes"))
        #expect(try scan.leaks(under: dir.url).isEmpty)
        try (rng.bytes(333) + source).write(to: dir.file("a/b/copy"))
        let leaks = try scan.leaks(under: dir.url)
        #expect(leaks.count == 1 && leaks.first?.path.hasSuffix("a/b/copy") == true && leaks.first?.offset == 333, "\(leaks)")
    }
}
