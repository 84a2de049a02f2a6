import TestSupport
import CloudSyncCore
import Foundation
import Testing
@testable import CloudSyncHTTP

/// Byte i of a generated file is (i·31 + i>>8) mod 256 (the same generator produced the rclone values).
func generated(_ size: Int) -> Data {
    Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 8)) })
}

/// rclone's URL-safe base64 → standard base64.
func standardBase64(_ urlSafe: String) -> String {
    urlSafe.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
}

struct DigestTests {
    // RFC 1321 §A.5, RFC 3174 / FIPS 180 examples, NIST SHA-256 examples.
    @Test(arguments: [
        (HashKind.md5, "", "d41d8cd98f00b204e9800998ecf8427e"),
        (.md5, "abc", "900150983cd24fb0d6963f7d28e17f72"),
        (.md5, "message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        (.md5, "12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
        (.sha1, "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (.sha1, "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (.sha1, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
        (.sha256, "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (.sha256, "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (.sha256, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func standardVectors(kind: HashKind, input: String, expected: String) {
        #expect(contentHash(of: Data(input.utf8), kind: kind) == expected)
    }

    @Test func millionAs() {
        let data = Data(repeating: 0x61, count: 1_000_000)
        #expect(contentHash(of: data, kind: .sha1) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
        #expect(contentHash(of: data, kind: .sha256) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func evpOfGeneratedFileMatchesCoreutils() {
        let data = generated(12345)
        #expect(contentHash(of: data, kind: .md5) == "48ecae060a1f16045ea88c61ec589f81")
        #expect(contentHash(of: data, kind: .sha1) == "028c0384dfb40e081efe25dfd072c1c9845c5d02")
        #expect(contentHash(of: data, kind: .sha256) == "85417f40c443aff3049e992fb572ff724b12005a7b328ccbdd8620146e4f303f")
    }

    // Expected values from `rclone hashsum dropbox` and `rclone hashsum quickxor --base64` (v1.60, Debian 12)
    // over files made by `generated(size)`.
    static let rcloneVectors: [(Int, String, String)] = [
        (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "AAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        (1, "1406e05881e299367766d313e26c05564ec91bf721d31726bd6e46e60689539a", "AAAAAAAAAAAAAAAAAQAAAAAAAAA="),
        (1759, "181f38faa2042f48f8e18010e059eca14e9c58d91e58523ce49d0b0abd916a35", "GZyr8MR1uex_rgebS0rCV-_CcN8="),
        (1760, "bb87cd20c8073075eae4f9b5d0661f75a12ded67d5c7944a1bfe283565c4fa16", "GZyr8MR1uex_rgebdErCV-_CkN8="),
        (1761, "70c5a25e7a4d1d7ed637108f07c624cf52e2d9162c58ef5822d550f44d637f5b", "P5yr8MR1uex_rgebdUrCV-_CkN8="),
        (12345, "6865f557676db7eb497e7ae1406eeb5f650daff6710a93afd3fe7094e99e988d", "zlBkrR-BmJfZmuTEffNk4mreYlM="),
        (4_194_303, "67ff506b3906081da446520329a02141563cc74bf62108ad0cdac644de35b99f", "A7wggK1ckC-Mh3sWRWETeJj5590="),
        (4_194_304, "183f9bcba69d7ad647445f98f69c4adf63ac815175f1d7502c0f24bf5ca68c13", "A7wggK1ckDOMh3sWup5seJj5590="),
        (4_194_305, "ea6cb7a5d28f10093584bb263726701c3c92edc484d993731f7338fed83808c2", "A7wggK1ckDOMh3sWu55seJj5590="),
        (5_000_000, "2936d8c4cd9145722ab65386344646048e853c07c968eeb168e5eb61e6e7099b", "lJ85WvmvyoP0NEV72WSKpYVvGpM="),
        (10_485_760, "567d2f491bdf61ffc347d0b50ff286a4ca39b97843006141cdc4362641310956", "AAAAAAAAAAAAAAAAAACgAAAAAAA="),
    ]

    @Test(arguments: rcloneVectors)
    func dropboxAndQuickXorMatchRclone(size: Int, dropbox: String, quickXor: String) {
        let data = generated(size)
        #expect(contentHash(of: data, kind: .dropbox) == dropbox)
        #expect(contentHash(of: data, kind: .quickXor) == standardBase64(quickXor))
    }

    @Test func providerDocumentVectors() {
        #expect(contentHash(of: Data("A".utf8), kind: .dropbox) == "1cd6ef71e6e0ff46ad2609d403dc3fee244417089aa4461245a4e4fe23a55e42")
        #expect(contentHash(of: Data(repeating: 0x41, count: 4_194_304), kind: .dropbox) == "d4d63bac5b866c71620185392a8a6218ac1092454a2d16f820363b69852befa3")
        #expect(contentHash(of: Data(), kind: .quickXor) == "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        #expect(contentHash(of: Data("A".utf8), kind: .quickXor) == "QQAAAAAAAAAAAAAAAQAAAAAAAAA=")
        #expect(contentHash(of: Data(repeating: 0x41, count: 4_194_304), kind: .quickXor) == "QAISkIAEJCBAAQpQgAJUoAAFKEA=")
    }

    /// Feeding in uneven pieces (seeded) gives the same result as one call, for every kind.
    @Test(arguments: HashKind.allCases)
    func incrementalEqualsOneShot(kind: HashKind) {
        let data = generated(4_194_304 * 2 + 4321)
        var rng = SeededRandom(seed: 0xC10D)
        var hasher = makeHasher(for: kind)
        var offset = 0
        while offset < data.count {
            let n = min(data.count - offset, Int(rng.next() % 700_000))
            data[offset..<(offset + n)].withUnsafeBytes { hasher.update($0) }
            offset += n
        }
        #expect(hasher.finalize() == contentHash(of: data, kind: kind), "seed 0xC10D")
    }

    /// finalize() leaves the state untouched, and copies of a hasher are independent.
    @Test(arguments: HashKind.allCases)
    func finalizeIsNonDestructiveAndCopiesAreIndependent(kind: HashKind) {
        var a = makeHasher(for: kind)
        a.update(Data("hello ".utf8))
        _ = a.finalize()
        var b = a
        b.update(Data("world".utf8))
        a.update(Data("there".utf8))
        #expect(b.finalize() == contentHash(of: Data("hello world".utf8), kind: kind))
        #expect(a.finalize() == contentHash(of: Data("hello there".utf8), kind: kind))
    }
}

