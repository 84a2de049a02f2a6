import CloudSyncCore

/// What a file's first bytes, name and MIME type say about its format.
enum FormatHint {
    /// The format suggested by the name's extension (case-insensitive) or, failing that, the MIME type; nil when
    /// neither names a format this target parses.
    static func from(name: String, mimeType: String?) -> AudioFormat? {
        if let ext = AudioFilter.fileExtension(of: name), let format = byExtension[Text.lowercasedASCII(String(ext))] {
            return format
        }
        if let mime = mimeType {
            let essence = Text.lowercasedASCII(String(mime.split(separator: ";").first ?? ""))
                .trimming(" ")
            return byMIMEType[essence]
        }
        return nil
    }

    static let byExtension: [String: AudioFormat] = [
        "mp3": .mp3, "aac": .aac, "adts": .aac, "flac": .flac, "m4a": .mp4, "m4b": .mp4, "m4p": .mp4, "mp4": .mp4,
        "alac": .mp4, "mov": .mp4, "3gp": .mp4, "ogg": .ogg, "oga": .ogg, "opus": .ogg, "wav": .wav, "wave": .wav,
        "bwf": .wav, "aif": .aiff, "aiff": .aiff, "aifc": .aiff,
    ]

    static let byMIMEType: [String: AudioFormat] = [
        "audio/mpeg": .mp3, "audio/mp3": .mp3, "audio/mpeg3": .mp3, "audio/x-mpeg": .mp3, "audio/x-mp3": .mp3,
        "audio/aac": .aac, "audio/aacp": .aac, "audio/x-aac": .aac, "audio/flac": .flac, "audio/x-flac": .flac,
        "audio/mp4": .mp4, "audio/m4a": .mp4, "audio/x-m4a": .mp4, "audio/x-m4b": .mp4, "video/mp4": .mp4,
        "audio/ogg": .ogg, "audio/opus": .ogg, "audio/vorbis": .ogg, "application/ogg": .ogg, "audio/x-ogg": .ogg,
        "audio/wav": .wav, "audio/x-wav": .wav, "audio/wave": .wav, "audio/vnd.wave": .wav,
        "audio/aiff": .aiff, "audio/x-aiff": .aiff,
    ]

    /// The format the first bytes prove (ID3v2 aside, which the analyzer handles first), or nil.
    static func magic(_ head: ByteView) -> AudioFormat? {
        if head.matches(0, "fLaC") { return .flac }
        if head.matches(0, "OggS") { return .ogg }
        if (head.matches(0, "RIFF") || head.matches(0, "RF64") || head.matches(0, "BW64")) && head.matches(8, "WAVE") {
            return .wav
        }
        if head.matches(0, "FORM") && (head.matches(8, "AIFF") || head.matches(8, "AIFC")) { return .aiff }
        if head.matches(4, "ftyp") { return .mp4 }
        if head.matches(0, "ID3") { return .mp3 }
        if ADTS.header(head, 0) != nil { return .aac }
        if MPEGAudio.header(head, 0) != nil { return .mp3 }
        return nil
    }

    /// A typical stream byte rate per format, for estimates before any byte is known.
    static func typicalByteRate(_ format: AudioFormat) -> Double? {
        switch format {
        case .mp3, .aac, .mp4: return 256_000 / 8
        case .ogg: return 192_000 / 8
        case .flac: return 900_000 / 8
        case .wav, .aiff: return 1_411_200 / 8
        case .unknown: return nil
        }
    }

    /// Typical leading metadata (tags and a modest cover), for estimates.
    static let typicalMetadataBytes: Int64 = 64 << 10
}

extension String {
    /// Without leading and trailing `character`s.
    fileprivate func trimming(_ character: Character) -> String {
        String(drop { $0 == character }.reversed().drop { $0 == character }.reversed())
    }
}
