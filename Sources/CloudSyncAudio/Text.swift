/// Decoding of tag text: every value ends as a bounded, trimmed Swift string; bad bytes are replaced, never fatal.
enum Text {
    /// `text` without trailing NULs and spaces, cut to at most ``TrackInfo/maximumTextBytes`` bytes of UTF-8 at a
    /// character boundary; nil when nothing is left.
    static func clean(_ text: String) -> String? {
        var scalars = Substring(text).unicodeScalars
        while let last = scalars.last, last == "\u{0}" || last == " " { scalars.removeLast() }
        guard !scalars.isEmpty else { return nil }
        var result = String(String.UnicodeScalarView(scalars))
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
    /// valid UTF-8 (allowing one sequence cut short at the end, as fixed-width fields truncate), else ISO-8859-1.
    static func utf8OrLatin1<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        let array = Array(bytes)
        for drop in 0...min(3, array.count) {
            let candidate = array[0..<(array.count - drop)]
            if let text = String(validating: candidate, as: UTF8.self) {
                // Dropping bytes is only a repair of a cut sequence: the dropped bytes must start one.
                if drop == 0 || array[array.count - drop] >= 0xC0 { return clean(text) }
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
