// Byte builders for hand-made files: tags and headers written from their specifications by the test, so a parser
// is checked against an independent writer (and hostile variants are one edit away).
@testable import CloudSyncAudio
import Foundation

enum Build {
    static func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func le32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }
    static func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
    static func be64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(v >> (56 - 8 * UInt64($0)) & 0xFF) } }
    static func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// A 28-bit ID3v2 syncsafe integer.
    static func syncsafe(_ n: Int) -> [UInt8] { [UInt8(n >> 21 & 0x7F), UInt8(n >> 14 & 0x7F), UInt8(n >> 7 & 0x7F), UInt8(n & 0x7F)] }

    /// `count` MPEG-1 Layer III frames (128 kbps, 44.1 kHz, joint stereo, 417 bytes each) with silent payloads.
    static func mp3Frames(_ count: Int) -> [UInt8] {
        var frame = [UInt8](repeating: 0, count: 417)
        frame[0] = 0xFF; frame[1] = 0xFB; frame[2] = 0x90; frame[3] = 0x64
        return Array([[UInt8]](repeating: frame, count: count).joined())
    }

    /// ID3v2 text with an encoding byte: 0 Latin-1, 1 UTF-16 with a little-endian BOM, 2 UTF-16BE, 3 UTF-8.
    static func text(_ s: String, encoding: UInt8) -> [UInt8] {
        switch encoding {
        case 0: return [0] + s.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
        case 1: return [1, 0xFF, 0xFE] + s.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } + [0, 0]
        case 2: return [2] + s.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        default: return [3] + ascii(s)
        }
    }

    /// An ID3v2 frame: 2.2 (3-byte id and size), 2.3 (4-byte id, plain size, flags), 2.4 (syncsafe size).
    static func frame(_ major: UInt8, _ id: String, _ body: [UInt8], flags: [UInt8] = [0, 0]) -> [UInt8] {
        switch major {
        case 2: return ascii(id) + Array(be32(body.count).dropFirst()) + body
        case 3: return ascii(id) + be32(body.count) + flags + body
        default: return ascii(id) + syncsafe(body.count) + flags + body
        }
    }

    /// An ID3v2 tag of `frames` and `padding` zero bytes.
    static func id3v2(_ major: UInt8, flags: UInt8 = 0, _ frames: [[UInt8]], padding: Int = 0, prefix: [UInt8] = []) -> [UInt8] {
        let body = prefix + Array(frames.joined()) + [UInt8](repeating: 0, count: padding)
        return ascii("ID3") + [major, 0, flags] + syncsafe(body.count) + body
    }

    /// ID3v2 unsynchronisation: a 0x00 after every 0xFF.
    static func unsynchronise(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for b in bytes {
            out.append(b)
            if b == 0xFF { out.append(0) }
        }
        return out
    }

    /// An ID3v1.1 tag.
    static func id3v1(title: String = "", artist: String = "", album: String = "", year: String = "", track: UInt8 = 0,
                      genre: UInt8 = 255) -> [UInt8] {
        func field(_ s: String, _ n: Int) -> [UInt8] { Array((ascii(s) + [UInt8](repeating: 0, count: n)).prefix(n)) }
        return ascii("TAG") + field(title, 30) + field(artist, 30) + field(album, 30) + field(year, 4)
            + [UInt8](repeating: 0, count: 28) + [0, track, genre]
    }

    /// An APEv2 tag (items, footer, and a header when asked). Items are (key, value, flags).
    static func ape(_ items: [(String, [UInt8], Int)], header: Bool = true) -> [UInt8] {
        var body: [UInt8] = []
        for (key, value, flags) in items { body += le32(value.count) + le32(flags) + ascii(key) + [0] + value }
        let size = body.count + 32
        func block(isHeader: Bool) -> [UInt8] {
            let flags = (header ? 0x8000_0000 : 0) | (isHeader ? 0x2000_0000 : 0)
            return ascii("APETAGEX") + le32(2000) + le32(size) + le32(items.count) + le32(flags) + [UInt8](repeating: 0, count: 8)
        }
        return (header ? block(isHeader: true) : []) + body + block(isHeader: false)
    }

    /// A Lyrics3v2 tag with one field.
    static func lyrics3v2(_ text: String) -> [UInt8] {
        let field = ascii("LYR") + ascii(String(format: "%05d", text.utf8.count)) + ascii(text)
        let tag = ascii("LYRICSBEGIN") + field
        return tag + ascii(String(format: "%06d", tag.count)) + ascii("LYRICS200")
    }

    /// An MP4 atom.
    static func atom(_ type: String, _ body: [UInt8]) -> [UInt8] { be32(body.count + 8) + ascii(type) + body }

    /// An Ogg page (CRC computed).
    static func oggPage(serial: UInt32 = 1, sequence: UInt32, flags: UInt8 = 0, granule: Int64 = -1, packets: [[UInt8]],
                        continues: Bool = false) -> [UInt8] {
        var lacing: [UInt8] = []
        for (k, p) in packets.enumerated() {
            var n = p.count
            while n >= 255 { lacing.append(255); n -= 255 }
            if !(continues && k == packets.count - 1) { lacing.append(UInt8(n)) }
        }
        var page = ascii("OggS") + [0, flags] + (0..<8).map { UInt8(UInt64(bitPattern: granule) >> (8 * UInt64($0)) & 0xFF) }
        page += le32(Int(serial)) + le32(Int(sequence)) + [0, 0, 0, 0] + [UInt8(lacing.count)] + lacing
        page += Array(packets.joined())
        let crc = Ogg.crc(page[...])
        page.replaceSubrange(22..<26, with: le32(Int(crc)))
        return page
    }
}
