import Foundation

/// Finds plaintext of source files in other files (the encryption tests: "no 4 KiB window of any source track
/// occurs in any file under cache.dir"). The sources' `window`-byte windows starting every `stride` bytes are
/// hashed (a rolling polynomial hash); every window of a scanned file, at every offset, is looked up, and a
/// hit is confirmed byte for byte. So any run of at least `window + stride - 1` source bytes is found wherever
/// it lies. Windows of one repeated byte are left out: a sparse file's holes read as zeros, which is no leak.
public struct PlaintextWindows {
    public let window: Int
    public let stride: Int
    private let starts: [UInt64: [(source: Int, offset: Int)]]
    /// One bit per value of a hash's top `filterBits` bits, set for the sources' windows: a window is looked up
    /// in `starts` (a hashed lookup) only when its bit is set, which almost no window of a cache file's is.
    private let filter: [UInt64]
    private static let filterBits: UInt64 = 24
    private let sources: [Data]
    private static let base: UInt64 = 1_099_511_628_211

    public init(sources: [Data], window: Int = 4096, stride: Int = 512) {
        self.window = window
        self.stride = stride
        self.sources = sources
        var starts: [UInt64: [(source: Int, offset: Int)]] = [:]
        var filter = [UInt64](repeating: 0, count: 1 << (Self.filterBits - 6))
        for (index, data) in sources.enumerated() {
            data.withUnsafeBytes { raw in
                var cursor = Cursor(window: window)
                let bytes = raw.bindMemory(to: UInt8.self)
                while let offset = Self.nextWindow(bytes, &cursor, filter: nil) {
                    guard offset % stride == 0 else { continue }
                    starts[cursor.hash, default: []].append((index, offset))
                    let bit = cursor.hash >> (64 - Self.filterBits)
                    filter[Int(bit >> 6)] |= 1 << (bit & 63)
                }
            }
        }
        self.starts = starts
        self.filter = filter
    }

    /// The offset in `data` of the first window that is a source's, or nil.
    public func firstLeak(in data: Data) -> (offset: Int, source: Int, sourceOffset: Int)? {
        data.withUnsafeBytes { raw in
            filter.withUnsafeBufferPointer { filter in
                var cursor = Cursor(window: window)
                let bytes = raw.bindMemory(to: UInt8.self)
                while let offset = Self.nextWindow(bytes, &cursor, filter: filter) {
                    let here = UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + window])
                    for c in starts[cursor.hash, default: []] {
                        let matches = sources[c.source].withUnsafeBytes { source in
                            memcmp(here.baseAddress!, source.baseAddress! + c.offset, window) == 0
                        }
                        if matches { return (offset, c.source, c.offset) }
                    }
                }
                return nil
            }
        }
    }

    /// Where a scan is: the next byte to roll in, the hash of the window before it, the run of equal bytes.
    private struct Cursor {
        let window: Int
        let top: UInt64
        var next = 0
        var hash: UInt64 = 0
        var run = 0

        init(window: Int) {
            self.window = window
            var top: UInt64 = 1
            for _ in 1 ..< window { top = top &* PlaintextWindows.base }
            self.top = top
        }
    }

    /// The offset of the next window that is not one repeated byte and (given a `filter`) whose hash has its bit
    /// set there, rolling on from `cursor` (whose `hash` is then that window's). One loop over raw bytes, no
    /// closure or lookup per byte, optimized even in a debug build (`@_optimize(speed)`): a scan reads every file
    /// of a cache at every offset; a closure and a dictionary lookup per byte took ~50 s of one debug test.
    @_optimize(speed)
    private static func nextWindow(_ bytes: UnsafeBufferPointer<UInt8>, _ cursor: inout Cursor,
                                   filter: UnsafeBufferPointer<UInt64>?) -> Int? {
        let window = cursor.window, top = cursor.top
        var hash = cursor.hash, run = cursor.run, i = cursor.next
        defer { cursor.hash = hash; cursor.run = run; cursor.next = i }
        while i < bytes.count {
            if i >= window { hash = hash &- UInt64(bytes[i - window]) &* top }
            hash = hash &* base &+ UInt64(bytes[i])
            run = i > 0 && bytes[i] == bytes[i - 1] ? run + 1 : 1
            i += 1
            guard i >= window, run < window else { continue }
            guard let filter else { return i - window }
            let bit = hash >> (64 - filterBits)
            if filter[Int(bit >> 6)] & (1 << (bit & 63)) != 0 { return i - window }
        }
        return nil
    }

    /// Every regular file under `directory` (recursively) holding a source window: its path and offset.
    public func leaks(under directory: URL) throws -> [(path: String, offset: Int)] {
        var out: [(String, Int)] = []
        guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            let data = try Data(contentsOf: url)
            if let leak = firstLeak(in: data) { out.append((url.path, leak.offset)) }
        }
        return out
    }
}
