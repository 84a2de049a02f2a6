import CCrypto
import CloudSyncCore
import Foundation

/// An incremental content hash. Feed bytes in file order with `update`; `finalize` may be called at any
/// time and does not disturb the state. Output is exactly as providers print it: lowercase hex, or
/// standard base64 (`+/`, padded) for quickXorHash.
public protocol ContentHasher: Sendable {
    mutating func update(_ bytes: UnsafeRawBufferPointer)
    func finalize() -> String
}

extension ContentHasher {
    public mutating func update(_ data: Data) { data.withUnsafeBytes { update($0) } }
}

/// A fresh hasher for `kind`.
public func makeHasher(for kind: HashKind) -> any ContentHasher {
    switch kind {
    case .md5: EVPHasher(.md5)
    case .sha1: EVPHasher(.sha1)
    case .sha256: EVPHasher(.sha256)
    case .dropbox: DropboxContentHasher()
    case .quickXor: QuickXorHasher()
    }
}

/// The hash of `data` printed as the provider prints it.
public func contentHash(of data: Data, kind: HashKind) -> String {
    var h = makeHasher(for: kind)
    h.update(data)
    return h.finalize()
}

/// Owns one `EVP_MD_CTX` (freed in deinit). Not thread-safe on its own: `EVPHasher` copies on write.
final class EVPContext: @unchecked Sendable {
    let ctx: OpaquePointer

    init(algorithm: EVPHasher.Algorithm) {
        // EVP_MD_CTX_new returns NULL only when malloc fails; there is nothing sensible to do then.
        guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        self.ctx = ctx
        let md: OpaquePointer? = switch algorithm {
        case .md5: EVP_md5()
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        }
        precondition(EVP_DigestInit_ex(ctx, md, nil) == 1, "EVP_DigestInit_ex failed for \(algorithm)")
    }

    init(copying other: EVPContext) {
        guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        self.ctx = ctx
        precondition(EVP_MD_CTX_copy_ex(ctx, other.ctx) == 1, "EVP_MD_CTX_copy_ex failed")
    }

    deinit { EVP_MD_CTX_free(ctx) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        precondition(EVP_DigestUpdate(ctx, base, bytes.count) == 1, "EVP_DigestUpdate failed")
    }

    /// Finalizes a copy, leaving this context usable.
    func digest() -> [UInt8] {
        let copy = EVPContext(copying: self)
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        precondition(EVP_DigestFinal_ex(copy.ctx, &out, &length) == 1, "EVP_DigestFinal_ex failed")
        return Array(out.prefix(Int(length)))
    }
}

/// MD5, SHA-1 or SHA-256 through OpenSSL libcrypto's EVP interface; lowercase hex.
public struct EVPHasher: ContentHasher {
    /// The version of the OpenSSL libcrypto loaded at run time, e.g. `OpenSSL 3.0.15 3 Sep 2024`
    /// (`OpenSSL_version(3)`).
    public static var openSSLVersion: String {
        OpenSSL_version(OPENSSL_VERSION).map { String(cString: $0) } ?? "unknown"
    }

    public enum Algorithm: Sendable { case md5, sha1, sha256 }

    private var context: EVPContext

    public init(_ algorithm: Algorithm) { context = EVPContext(algorithm: algorithm) }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        if !isKnownUniquelyReferenced(&context) { context = EVPContext(copying: context) }
        context.update(bytes)
    }

    public func finalize() -> String { hex(digest()) }

    /// The raw digest bytes.
    public func digest() -> [UInt8] { context.digest() }
}

/// Dropbox `content_hash`: SHA-256 of each 4 MiB block, SHA-256 over the concatenated binary digests, hex.
/// An empty input has no blocks: its hash is SHA-256 of nothing.
public struct DropboxContentHasher: ContentHasher {
    public static let blockSize = 4 * 1024 * 1024

    private var overall = EVPHasher(.sha256)
    private var block = EVPHasher(.sha256)
    private var inBlock = 0

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var rest = bytes[...]
        while !rest.isEmpty {
            let n = min(rest.count, Self.blockSize - inBlock)
            block.update(UnsafeRawBufferPointer(rebasing: rest.prefix(n)))
            inBlock += n
            rest = rest.dropFirst(n)
            if inBlock == Self.blockSize { closeBlock() }
        }
    }

    private mutating func closeBlock() {
        let d = block.digest()
        d.withUnsafeBytes { overall.update($0) }
        block = EVPHasher(.sha256)
        inBlock = 0
    }

    public func finalize() -> String {
        var copy = self
        if copy.inBlock > 0 { copy.closeBlock() }
        return copy.overall.finalize()
    }
}

/// OneDrive quickXorHash (see ../shared/providers.md §3.3): a 160-bit circular register where input byte
/// i is XORed in at bit (i·11) mod 160, then the length as 64-bit little-endian XORed into bytes 12…19;
/// standard base64 of the 20 bytes.
public struct QuickXorHasher: ContentHasher {
    static let widthBits = 160
    static let shift = 11
    /// 1760 bytes: after that many input bytes the bit offsets repeat.
    static let bufferSize = widthBits * shift

    /// Byte j of the input (mod 1760) is XORed into `buffer[j]`; folded into the register at the end.
    private var buffer = [UInt8](repeating: 0, count: QuickXorHasher.bufferSize)
    private var position = 0
    private var length: UInt64 = 0

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var pos = position
        buffer.withUnsafeMutableBufferPointer { buf in
            for byte in bytes {
                buf[pos] ^= byte
                pos += 1
                if pos == Self.bufferSize { pos = 0 }
            }
        }
        position = pos
    }

    public func finalize() -> String { Data(digest()).base64EncodedString() }

    /// The 20 raw bytes.
    public func digest() -> [UInt8] {
        // 21 bytes so a byte straddling bit 160 can spill, then fold byte 20 back into byte 0.
        var h = [UInt8](repeating: 0, count: Self.widthBits / 8 + 1)
        for j in 0..<Self.bufferSize {
            let bit = (j * Self.shift) % Self.widthBits
            let byteIndex = bit / 8
            let bitInByte = bit % 8
            let v = UInt16(buffer[j]) << bitInByte
            h[byteIndex] ^= UInt8(truncatingIfNeeded: v)
            h[byteIndex + 1] ^= UInt8(truncatingIfNeeded: v >> 8)
        }
        h[0] ^= h[20]
        var out = Array(h.prefix(20))
        for k in 0..<8 { out[12 + k] ^= UInt8(truncatingIfNeeded: length >> (8 * UInt64(k))) }
        return out
    }
}

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0xf)])
    }
    return String(decoding: out, as: UTF8.self)
}
