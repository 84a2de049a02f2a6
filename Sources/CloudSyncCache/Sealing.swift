#if canImport(Glibc)
import Glibc
#endif
import CCrypto
import CloudSyncCore
import Foundation

/// The secret of an encrypted cache: 32 random bytes (``CacheKey/random()``), kept outside the cache directory
/// (`$XDG_STATE_HOME/cloudsync/cache.key`, or what `cache.key_command` prints). Never logged: its description
/// is a placeholder.
public struct CacheKey: Sendable, Equatable, CustomStringConvertible {
    public static let byteCount = 32
    let bytes: [UInt8]

    /// Nil unless `bytes` holds exactly 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// 32 bytes from OpenSSL's CSPRNG.
    public static func random() -> CacheKey {
        var bytes = [UInt8](repeating: 0, count: byteCount)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(byteCount)) } == 1
        precondition(ok, "OpenSSL's random generator failed")
        return CacheKey(bytes: bytes)!
    }

    /// Reads a key written as 64 hex digits or as the base64 of 32 bytes (surrounding white space ignored).
    public init?(text: String) {
        let t = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if t.utf8.count == 64, let bytes = Self.hex(t) {
            self.bytes = bytes
        } else if let data = Data(base64Encoded: t), data.count == Self.byteCount {
            bytes = [UInt8](data)
        } else {
            return nil
        }
    }

    /// The key as 64 lowercase hex digits (what `cache.key` holds).
    public var hexText: String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// A value that tells whether a later key is this one, without revealing it: HMAC-SHA256 of a fixed label.
    /// The index keeps it, so a wrong key is refused at once instead of failing on every block.
    public var checkValue: String {
        Sealer.hmac(key: bytes, data: Array("cloudsync cache key check v1".utf8)).map { String(format: "%02x", $0) }.joined()
    }

    public var description: String { "CacheKey(<secret>)" }

    private static func hex(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count / 2)
        var high: UInt8?
        for c in text.utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return high == nil ? out : nil
    }
}

/// Where the bytes of an encrypted entry file are (pure arithmetic, no I/O). The file is a 32-byte header
/// (``SealedHeader``) and then the plaintext in blocks of `blockSize` bytes (the last one shorter), each stored as
/// its ChaCha20-Poly1305 ciphertext followed by its 16-byte tag, in order and without gaps:
///
/// ```
/// [header 32][block 0: blockSize + 16][block 1: blockSize + 16] … [last: rest + 16]
/// ```
///
/// Any plaintext range maps to the blocks that cover it, which are read and opened whole. Sizes are checked
/// (`plainSize` below 2^56, as for every entry), so no offset here can overflow.
public struct SealedLayout: Sendable, Equatable {
    public static let headerSize: Int64 = 32
    public static let tagSize: Int64 = 16
    /// The block size of files this cloudsync writes: 64 KiB of plaintext.
    public static let defaultBlockSize: Int64 = 64 << 10

    public let plainSize: Int64
    public let blockSize: Int64

    /// Nil for a size no entry may have (negative, 2^56 or more) or a block size that is not a power of two
    /// between 4 KiB and 16 MiB.
    public init?(plainSize: Int64, blockSize: Int64 = SealedLayout.defaultBlockSize) {
        guard plainSize >= 0, plainSize < Int64(1) << 56,
              blockSize >= 4096, blockSize <= 16 << 20, blockSize & (blockSize - 1) == 0 else { return nil }
        self.plainSize = plainSize
        self.blockSize = blockSize
    }

    public var blockCount: Int64 { plainSize == 0 ? 0 : (plainSize - 1) / blockSize + 1 }

    /// The size of the file on disk.
    public var diskSize: Int64 { Self.headerSize + plainSize + blockCount * Self.tagSize }

    /// The plaintext bytes of block `index`.
    public func plainRange(ofBlock index: Int64) -> Range<Int64> {
        let start = index * blockSize
        return start ..< min(plainSize, start + blockSize)
    }

    /// Where block `index` starts on disk (its ciphertext, then its tag).
    public func diskOffset(ofBlock index: Int64) -> Int64 { Self.headerSize + index * (blockSize + Self.tagSize) }

    /// The indices of the blocks holding any byte of `range` (clamped to the file).
    public func blocks(covering range: Range<Int64>) -> Range<Int64> {
        let lower = max(0, range.lowerBound), upper = min(plainSize, range.upperBound)
        guard lower < upper else { return 0 ..< 0 }
        return lower / blockSize ..< (upper - 1) / blockSize + 1
    }

    /// `range` widened to whole blocks (the file's end counts as a border).
    public func aligned(_ range: Range<Int64>) -> Range<Int64> {
        let blocks = blocks(covering: range)
        guard !blocks.isEmpty else { return range.clamped(to: 0 ..< plainSize) }
        return plainRange(ofBlock: blocks.lowerBound).lowerBound ..< plainRange(ofBlock: blocks.upperBound - 1).upperBound
    }

    /// Every range of `set` widened to whole blocks.
    public func aligned(_ set: ByteRanges) -> ByteRanges {
        var out = ByteRanges()
        for r in set.ranges { out.insert(contentsOf: aligned(r)) }
        return out
    }

    /// The whole blocks inside `set` (a block with any byte outside it is left out).
    public func wholeBlocks(in set: ByteRanges) -> ByteRanges {
        var out = ByteRanges()
        for r in set.ranges {
            let lower = min(plainSize, (r.lowerBound + blockSize - 1) / blockSize * blockSize)
            let upper = r.upperBound >= plainSize ? plainSize : r.upperBound / blockSize * blockSize
            if lower < upper { out.insert(contentsOf: lower ..< upper) }
        }
        return out
    }
}

/// The first 32 bytes of an encrypted entry file: `CSYNCSB1`, the block size as a power of two, 7 zero bytes,
/// and the file's random 16-byte salt, from which (with the cache key and the entry's id and generation) its
/// own key is derived. A new file, and a file restarted from nothing, gets a new salt: no key ever seals two
/// different plaintexts under one nonce.
public struct SealedHeader: Sendable, Equatable {
    static let magic = Array("CSYNCSB1".utf8)
    public let blockShift: UInt8
    public let salt: [UInt8]

    public static func fresh(blockSize: Int64 = SealedLayout.defaultBlockSize) -> SealedHeader {
        var salt = [UInt8](repeating: 0, count: 16)
        let ok = salt.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, 16) } == 1
        precondition(ok, "OpenSSL's random generator failed")
        return SealedHeader(blockShift: UInt8(blockSize.trailingZeroBitCount), salt: salt)
    }

    init(blockShift: UInt8, salt: [UInt8]) {
        self.blockShift = blockShift
        self.salt = salt
    }

    /// Nil unless `bytes` is a header this cloudsync can read.
    public init?(bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        guard b.count == Int(SealedLayout.headerSize), Array(b[0 ..< 8]) == Self.magic,
              (12...24).contains(b[8]), b[9 ..< 16].allSatisfy({ $0 == 0 }) else { return nil }
        blockShift = b[8]
        salt = Array(b[16 ..< 32])
    }

    public var bytes: [UInt8] { Self.magic + [blockShift] + [UInt8](repeating: 0, count: 7) + salt }
    public var blockSize: Int64 { Int64(1) << Int64(blockShift) }
}

/// Seals and opens the blocks of one entry file with ChaCha20-Poly1305 (RFC 8439, OpenSSL's EVP interface).
/// The file's key is HKDF-SHA256 (RFC 5869) of the cache key, salted with the file's header salt, for the
/// entry's id and generation; the nonce of block `i` is `i` as 8 little-endian bytes and 4 zero bytes. Every
/// block is sealed once per key: a block is written only when all of its plaintext is there, never rewritten
/// with other bytes (a restarted file gets a new salt, hence a new key). Thread-safe.
public struct Sealer: Sendable {
    public let layout: SealedLayout
    public let header: SealedHeader
    private let fileKey: [UInt8]

    public init?(cacheKey: CacheKey, header: SealedHeader, id: Int64, generation: Int64, plainSize: Int64) {
        guard let layout = SealedLayout(plainSize: plainSize, blockSize: header.blockSize) else { return nil }
        self.layout = layout
        self.header = header
        var info = Array("cloudsync cache file v1".utf8)
        for v in [id, generation, plainSize] { withUnsafeBytes(of: v.littleEndian) { info += $0 } }
        fileKey = Self.hkdf(key: cacheKey.bytes, salt: header.salt, info: info)
    }

    /// Seals block `index` (`plaintext` is all of it) into `output` (`plaintext.count + 16` bytes: ciphertext,
    /// then tag).
    public func seal(block index: Int64, _ plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count == plaintext.count + Int(SealedLayout.tagSize))
        let whole = stream(block: index)
        whole.update(plaintext, into: output.baseAddress!)
        whole.finish(tag: output.baseAddress!.advanced(by: plaintext.count))
    }

    /// Starts sealing block `index` piece by piece (``SealStream``).
    func stream(block index: Int64) -> SealStream {
        let ctx = EVP_CIPHER_CTX_new()!
        var nonce = Self.nonce(index)
        let ok = fileKey.withUnsafeBufferPointer { key in
            EVP_EncryptInit_ex(ctx, chacha20Poly1305, nil, key.baseAddress, &nonce) == 1
        }
        precondition(ok, "OpenSSL's ChaCha20-Poly1305 failed")
        return SealStream(ctx)
    }

    /// Opens block `index` (`sealed`: ciphertext then tag) into `output` (`sealed.count - 16` bytes). False when
    /// the tag does not match: the block was changed (tampering, bit rot) or belongs to another file or key.
    public func open(block index: Int64, _ sealed: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        let plain = sealed.count - Int(SealedLayout.tagSize)
        guard plain >= 0, output.count == plain else { return false }
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        var nonce = Self.nonce(index)
        var ok = fileKey.withUnsafeBufferPointer { key in
            EVP_DecryptInit_ex(ctx, chacha20Poly1305, nil, key.baseAddress, &nonce) == 1
        }
        let input = sealed.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // SET_TAG copies the tag; OpenSSL never writes through this pointer.
        ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(SealedLayout.tagSize),
                                       UnsafeMutableRawPointer(mutating: input + plain)) == 1
        var written: Int32 = 0, tail: Int32 = 0
        var scratch: UInt8 = 0
        ok = ok && withUnsafeMutablePointer(to: &scratch) { scratchByte in
            let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? scratchByte
            if plain > 0, EVP_DecryptUpdate(ctx, out, &written, input, Int32(plain)) != 1 { return false }
            return EVP_DecryptFinal_ex(ctx, plain > 0 ? out + Int(written) : out, &tail) == 1
        }
        return ok && Int(written + tail) == plain
    }

    /// Reads plaintext `range` from the encrypted file `fd`: the covering blocks in one `pread`, each opened
    /// whole (straight into the answer when the range holds all of it). Throws `.damaged` naming the first block
    /// whose tag fails, `.io` when the file is short. Neither buffer is zeroed first (see ``preadAll``).
    public func read(fd: Int32, range: Range<Int64>, display: String, cacheRoot: String) throws(CacheError) -> Data {
        let blocks = layout.blocks(covering: range)
        guard !blocks.isEmpty, !range.isEmpty else { return Data() }
        let diskStart = layout.diskOffset(ofBlock: blocks.lowerBound)
        let lastPlain = layout.plainRange(ofBlock: blocks.upperBound - 1)
        let diskEnd = layout.diskOffset(ofBlock: blocks.upperBound - 1) + Int64(lastPlain.count) + SealedLayout.tagSize
        let src = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(diskEnd - diskStart), alignment: 16)
        defer { src.deallocate() }
        let failure = preadFully(fd: fd, into: src, at: diskStart)
        guard failure == 0 else { throw CacheError.system("read", errno: failure, path: display, cacheRoot: cacheRoot) }
        let count = Int(range.count)
        let out = malloc(count)!
        let dst = UnsafeMutableRawBufferPointer(start: out, count: count)
        var scratch: UnsafeMutableRawBufferPointer?
        defer { scratch?.deallocate() }
        // Every block of the read is checked: one error spans the first failing block to the last (a damaged
        // header salt fails them all, and each read then drops and refetches its blocks at once instead of one
        // at a time; a good block between two bad ones is fetched again too).
        var failed: ClosedRange<Int64>?
        for index in blocks {
            let blockPlain = layout.plainRange(ofBlock: index)
            let from = Int(layout.diskOffset(ofBlock: index) - diskStart)
            let sealedBlock = UnsafeRawBufferPointer(rebasing: src[from ..< from + blockPlain.count + Int(SealedLayout.tagSize)])
            let wanted = blockPlain.clamped(to: range)
            let at = Int(wanted.lowerBound - range.lowerBound)
            let opened: Bool
            if wanted == blockPlain {
                opened = open(block: index, sealedBlock, into: UnsafeMutableRawBufferPointer(rebasing: dst[at ..< at + wanted.count]))
            } else {
                // The range starts or ends inside this block: opened whole aside, the wanted part copied.
                let whole = scratch ?? .allocate(byteCount: Int(layout.blockSize), alignment: 16)
                scratch = whole
                opened = open(block: index, sealedBlock, into: UnsafeMutableRawBufferPointer(rebasing: whole[0 ..< blockPlain.count]))
                let inBlock = Int(wanted.lowerBound - blockPlain.lowerBound)
                if opened { (out + at).copyMemory(from: whole.baseAddress! + inBlock, byteCount: wanted.count) }
            }
            if !opened { failed = failed.map { $0.lowerBound ... index } ?? index ... index }
        }
        if let failed {
            free(out)
            let r = layout.plainRange(ofBlock: failed.lowerBound).lowerBound ..< layout.plainRange(ofBlock: failed.upperBound).upperBound
            let which = failed.count == 1 ? "block \(failed.lowerBound)" : "blocks \(failed.lowerBound)-\(failed.upperBound)"
            var error = CacheError(.damaged, "\(which) (bytes \(r.lowerBound)-\(r.upperBound - 1)) of \(display) failed "
                + "the authentication check: the file was changed or damaged on disk. Its bytes are not served; they "
                + "are fetched again.", path: display)
            error.damagedBytes = r
            throw error
        }
        return Data(bytesNoCopy: out, count: count, deallocator: .free)
    }

    static func nonce(_ index: Int64) -> [UInt8] {
        var n = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: UInt64(bitPattern: index).littleEndian) { for (i, b) in $0.enumerated() { n[i] = b } }
        return n
    }

    static func hmac(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let result = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, k.baseAddress, k.count, d.baseAddress, d.count,
                              o.baseAddress, 32, &length)
                }
            }
        }
        precondition(result != nil && length == 32, "OpenSSL's HMAC-SHA256 failed")
        return out
    }

    /// HKDF-SHA256 (RFC 5869) for a 32-byte output: extract, then one expand step.
    static func hkdf(key: [UInt8], salt: [UInt8], info: [UInt8]) -> [UInt8] {
        let prk = hmac(key: salt, data: key)
        return hmac(key: prk, data: info + [1])
    }
}

/// The cipher, fetched from the default provider once: the `EVP_chacha20_poly1305()` handle is looked up again
/// on every `EVP_*Init_ex` (OpenSSL 3), a cost paid per 64 KiB block otherwise. Immutable once made.
private nonisolated(unsafe) let chacha20Poly1305: OpaquePointer = EVP_CIPHER_fetch(nil, "ChaCha20-Poly1305", nil)
    ?? EVP_chacha20_poly1305()

/// One block sealed as its bytes arrive, in order: ChaCha20-Poly1305 is a stream cipher, so the pieces give
/// exactly the ciphertext and tag that ``Sealer/seal(block:_:into:)`` gives for the whole block. Used under its
/// writer's lock only.
final class SealStream {
    private let ctx: OpaquePointer

    fileprivate init(_ ctx: OpaquePointer) { self.ctx = ctx }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    /// Encrypts the next `plain.count` bytes of the block into `out`.
    func update(_ plain: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) {
        guard plain.count > 0 else { return }
        var written: Int32 = 0
        let ok = EVP_EncryptUpdate(ctx, out.assumingMemoryBound(to: UInt8.self), &written,
                                   plain.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(plain.count)) == 1
        precondition(ok && Int(written) == plain.count, "OpenSSL's ChaCha20-Poly1305 failed")
    }

    /// Ends the block: its 16-byte tag goes to `tag`.
    func finish(tag: UnsafeMutableRawPointer) {
        var tail: Int32 = 0
        var none: UInt8 = 0
        var ok = EVP_EncryptFinal_ex(ctx, &none, &tail) == 1 && tail == 0
        ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(SealedLayout.tagSize), tag) == 1
        precondition(ok, "OpenSSL's ChaCha20-Poly1305 failed")
    }
}
