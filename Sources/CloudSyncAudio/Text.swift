/// Decoding of tag text: every value ends as a bounded, trimmed Swift string; bad bytes are replaced, never fatal.
enum Text {
    /// `text` without trailing NULs and spaces, cut to at most ``TrackInfo/maximumTextBytes`` bytes of UTF-8 at a
    /// character boundary; nil when nothing is left.
    static func clean(_ text: String) -> String? {
        // NUL and space are single bytes in UTF-8 that never occur inside a longer sequence: trimmed byte by byte.
        let utf8 = text.utf8
        var end = utf8.endIndex
        while end > utf8.startIndex {
            let last = utf8.index(before: end)
            guard utf8[last] == 0 || utf8[last] == 0x20 else { break }
            end = last
        }
        guard end > utf8.startIndex else { return nil }
        var result = end == utf8.endIndex ? text : String(decoding: utf8[..<end], as: UTF8.self)
        if result.utf8.count > TrackInfo.maximumTextBytes {
            var cut = ""
            var used = 0
            for character in result {
                let length = character.utf8.count
                guard used + length <= TrackInfo.maximumTextBytes else { break }
                cut.append(character)
                used += length
            }
            result = cut
        }
        return result.isEmpty ? nil : result
    }

    /// UTF-8 with invalid sequences replaced by U+FFFD.
    static func utf8<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        clean(String(decoding: bytes, as: UTF8.self))
    }

    /// ISO-8859-1: each byte is the code point of the same value.
    static func latin1<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        var scalars = String.UnicodeScalarView()
        for byte in bytes { scalars.append(Unicode.Scalar(byte)) }
        return clean(String(scalars))
    }

    /// For fields without a declared encoding (ID3v1, RIFF INFO, AIFF text chunks): UTF-8 when the bytes are
    /// valid UTF-8, else ISO-8859-1. A fixed-width field (`width`) that is full may end in a UTF-8 sequence cut
    /// short by the writer (ffmpeg cuts ID3v1 fields at 30 bytes); the cut sequence is then dropped.
    static func utf8OrLatin1<C: Collection>(_ bytes: C, width: Int? = nil) -> String? where C.Element == UInt8 {
        let array = Array(bytes)
        if let text = String(validating: array, as: UTF8.self) { return clean(text) }
        if let width, array.count == width {
            // The last lead byte and what follows it must be the start of a longer sequence.
            if let lead = array.indices.suffix(3).last(where: { array[$0] >= 0xC0 }),
               array[(lead + 1)...].allSatisfy({ $0 & 0xC0 == 0x80 }),
               array.count - lead < (array[lead] >= 0xF0 ? 4 : array[lead] >= 0xE0 ? 3 : 2),
               let text = String(validating: array[..<lead], as: UTF8.self) {
                return clean(text)
            }
        }
        return latin1(array)
    }

    /// UTF-16 code units from bytes, big-endian or little-endian, a trailing odd byte ignored.
    static func utf16<C: Collection>(_ bytes: C, bigEndian: Bool) -> String? where C.Element == UInt8 {
        let array = Array(bytes)
        var units: [UInt16] = []
        units.reserveCapacity(array.count / 2)
        var i = 0
        while i + 1 < array.count {
            let a = UInt16(array[i]), b = UInt16(array[i + 1])
            units.append(bigEndian ? a << 8 | b : b << 8 | a)
            i += 2
        }
        return clean(String(decoding: units, as: UTF16.self))
    }

    /// The bytes up to (not including) the first NUL.
    static func untilNUL(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        bytes.firstIndex(of: 0).map { bytes[bytes.startIndex..<$0] } ?? bytes
    }

    /// ASCII letters lowered; used to compare tag keys.
    static func lowercasedASCII(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }
}
