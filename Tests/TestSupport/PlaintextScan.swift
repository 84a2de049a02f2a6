import Foundation

/// Finds plaintext of source files in other files (the encryption tests: "no 4 KiB window of any source track
/// occurs in any file under cache.dir"). The sources' `window`-byte windows starting every `stride` bytes are
/// hashed (a rolling polynomial hash); every window of a scanned file, at every offset, is looked up, and a
/// hit is confirmed byte for byte. So any run of at least `window + stride - 1` source bytes is found wherever
/// it lies. Windows of one repeated byte are left out: a sparse file's holes read as zeros, which is no leak.
public struct PlaintextWindows {
    public let window: Int
    public let stride: Int
    private var starts: [UInt64: [(source: Int, offset: Int)]] = [:]
    private let sources: [Data]
    private static let base: UInt64 = 1_099_511_628_211

    public init(sources: [Data], window: Int = 4096, stride: Int = 512) {
        self.window = window
        self.stride = stride
        self.sources = sources
        for (index, data) in sources.enumerated() {
            Self.roll(data, window: window) { offset, hash, constant in
                if offset % stride == 0 && !constant { starts[hash, default: []].append((index, offset)) }
                return false
            }
        }
    }

    /// The offset in `data` of the first window that is a source's, or nil.
    public func firstLeak(in data: Data) -> (offset: Int, source: Int, sourceOffset: Int)? {
        var found: (Int, Int, Int)?
        Self.roll(data, window: window) { offset, hash, constant in
            guard !constant, let candidates = starts[hash] else { return false }
            for c in candidates where data[data.startIndex + offset ..< data.startIndex + offset + window]
                == sources[c.source][sources[c.source].startIndex + c.offset ..< sources[c.source].startIndex + c.offset + window] {
                found = (offset, c.source, c.offset)
                return true
            }
            return false
        }
        return found
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

    /// Calls `body(offset, hash, allOneByte)` for every window of `data`, in order, until it returns true.
    private static func roll(_ data: Data, window: Int, _ body: (Int, UInt64, Bool) -> Bool) {
        guard data.count >= window else { return }
        var top: UInt64 = 1
        for _ in 1 ..< window { top = top &* base }
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            var hash: UInt64 = 0
            var run = 0
            for i in 0 ..< bytes.count {
                if i >= window { hash = hash &- UInt64(bytes[i - window]) &* top }
                hash = hash &* base &+ UInt64(bytes[i])
                run = i > 0 && bytes[i] == bytes[i - 1] ? run + 1 : 1
                if i >= window - 1, body(i - window + 1, hash, run >= window) { return }
            }
        }
    }
}
