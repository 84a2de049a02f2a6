/// Genre names for numeric references: ID3v1's genre byte, ID3v2's "(13)" and "13", MP4's `gnre` (index + 1).
enum Genres {
    /// The ID3v1 list (0–79) with the Winamp extensions (80–191), spelled as ffmpeg and most taggers spell them.
    static let names: [String] = [
        "Blues", "Classic Rock", "Country", "Dance", "Disco", "Funk", "Grunge", "Hip-Hop", "Jazz", "Metal",
        "New Age", "Oldies", "Other", "Pop", "R&B", "Rap", "Reggae", "Rock", "Techno", "Industrial", "Alternative",
        "Ska", "Death Metal", "Pranks", "Soundtrack", "Euro-Techno", "Ambient", "Trip-Hop", "Vocal", "Jazz+Funk",
        "Fusion", "Trance", "Classical", "Instrumental", "Acid", "House", "Game", "Sound Clip", "Gospel", "Noise",
        "AlternRock", "Bass", "Soul", "Punk", "Space", "Meditative", "Instrumental Pop", "Instrumental Rock",
        "Ethnic", "Gothic", "Darkwave", "Techno-Industrial", "Electronic", "Pop-Folk", "Eurodance", "Dream",
        "Southern Rock", "Comedy", "Cult", "Gangsta", "Top 40", "Christian Rap", "Pop/Funk", "Jungle",
        "Native American", "Cabaret", "New Wave", "Psychadelic", "Rave", "Showtunes", "Trailer", "Lo-Fi", "Tribal",
        "Acid Punk", "Acid Jazz", "Polka", "Retro", "Musical", "Rock & Roll", "Hard Rock", "Folk", "Folk-Rock",
        "National Folk", "Swing", "Fast Fusion", "Bebob", "Latin", "Revival", "Celtic", "Bluegrass", "Avantgarde",
        "Gothic Rock", "Progressive Rock", "Psychedelic Rock", "Symphonic Rock", "Slow Rock", "Big Band", "Chorus",
        "Easy Listening", "Acoustic", "Humour", "Speech", "Chanson", "Opera", "Chamber Music", "Sonata", "Symphony",
        "Booty Bass", "Primus", "Porn Groove", "Satire", "Slow Jam", "Club", "Tango", "Samba", "Folklore", "Ballad",
        "Power Ballad", "Rhythmic Soul", "Freestyle", "Duet", "Punk Rock", "Drum Solo", "A capella", "Euro-House",
        "Dance Hall", "Goa", "Drum & Bass", "Club-House", "Hardcore", "Terror", "Indie", "BritPop", "Negerpunk",
        "Polsk Punk", "Beat", "Christian Gangsta", "Heavy Metal", "Black Metal", "Crossover",
        "Contemporary Christian", "Christian Rock", "Merengue", "Salsa", "Thrash Metal", "Anime", "JPop", "SynthPop",
        "Abstract", "Art Rock", "Baroque", "Bhangra", "Big Beat", "Breakbeat", "Chillout", "Downtempo", "Dub", "EBM",
        "Eclectic", "Electro", "Electroclash", "Emo", "Experimental", "Garage", "Global", "IDM", "Illbient",
        "Industro-Goth", "Jam Band", "Krautrock", "Leftfield", "Lounge", "Math Rock", "New Romantic", "Nu-Breakz",
        "Post-Punk", "Post-Rock", "Psytrance", "Shoegaze", "Space Rock", "Trop Rock", "World Music", "Neoclassical",
        "Audiobook", "Audio Theatre", "Neue Deutsche Welle", "Podcast", "Indie Rock", "G-Funk", "Dubstep",
        "Garage Rock", "Psybient",
    ]

    /// The name of genre `index`, or nil when the index is not in the list (255 means "none" in ID3v1).
    static func name(_ index: Int) -> String? {
        names.indices.contains(index) ? names[index] : nil
    }

    /// An ID3v2 TCON value resolved: "(13)" → "Pop", "13" → "Pop", "(13)Indie pop" → "Indie pop" (the
    /// refinement wins), "(RX)" → "Remix", "(CR)" → "Cover"; other text is returned as it is.
    static func resolveID3v2(_ value: String) -> String? {
        let bytes = Array(value.utf8)
        if !bytes.isEmpty, bytes.count <= 3, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
           let n = Int(value) {
            return name(n) ?? value
        }
        guard bytes.first == UInt8(ascii: "("), let close = bytes.firstIndex(of: UInt8(ascii: ")")) else { return value }
        let reference = String(decoding: bytes[1..<close], as: UTF8.self)
        let refinement = Text.utf8(bytes[(close + 1)...])
        if let refinement, !refinement.hasPrefix("(") { return refinement }
        switch reference {
        case "RX": return "Remix"
        case "CR": return "Cover"
        default:
            guard let n = Int(reference), let genre = name(n) else { return refinement ?? value }
            return genre
        }
    }
}
