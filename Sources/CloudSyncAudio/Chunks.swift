import CloudSyncCore

/// RIFF/WAVE (with RF64/BW64's `ds64` sizes) and AIFF/AIFF-C share a shape: a header, then chunks of an id, a
/// size and a body padded to even length, one of which holds the audio. Readers (ffmpeg among them) read the
/// chunk headers after the audio too (LIST/INFO, `id3 `, `ID3 `), so the start set keeps every chunk header
/// and every chunk body other than the audio and padding.
enum Chunks {
    /// The most chunks walked.
    static let maximumChunks = 1024

    enum Endian { case little, big }

    struct Chunk {
        let id: String
        let offset: Int64
        /// The body as the size field says (the audio chunk may be corrected by the caller).
        let body: Range<Int64>
    }

    /// Chunk ids that are padding: their bodies are never kept after the audio.
    static let padding: Set<String> = ["JUNK", "junk", "PAD ", "pad ", "FLLR", "padd", "free"]

    /// What one format does with each chunk while the walk goes on.
    struct Walker {
        let endian: Endian
        /// The first chunk header.
        let first: Int64
        /// Bodies read whole (only those of these ids are needed to finish the analysis).
        let wanted: Set<String>
        /// The audio chunk's id ("data", "SSND").
        let audioID: String
        /// The audio chunk's real extent from its header and size field (RF64's `ds64`, a 0 or oversized
        /// "streaming" size taken as "to the end of the file").
        let audioBody: (Chunk, Int64) -> Range<Int64>
    }

    struct Result {
        var audio: Chunk?
        var bodies: [String: [UInt8]] = [:]
        var keep = ByteRanges()
    }

    enum Outcome {
        case walked(Result)
        case need(ByteRanges)
        case invalid
    }

    /// Walks every chunk to the end of the file, reading the wanted bodies (the first chunk of each id), asking at
    /// once for every wanted body and every chunk header it cannot read but can locate.
    static func walk(_ analysis: inout Analysis, _ walker: Walker, ds64: (inout Result, ByteView) -> Void = { _, _ in })
        -> Outcome {
        let size = analysis.size
        var offset = walker.first
        var result = Result()
        var need = ByteRanges()
        for _ in 0..<maximumChunks {
            guard offset <= size - 8 else { break }
            guard let header = analysis.window.view(at: offset, count: 8), let id = header.fourCC(0),
                  let size32 = walker.endian == .little ? header.u32le(4) : header.u32be(4) else {
                need.formUnion(analysis.span(offset, 8))
                if result.audio == nil { need.formUnion(analysis.lookahead(offset)) }
                break
            }
            result.keep.insert(contentsOf: offset..<(offset + 8))
            guard let declaredEnd = (offset + 8).adding(Int64(size32)) else { return .invalid }
            let declared = (offset + 8)..<declaredEnd
            var chunk = Chunk(id: id, offset: offset, body: declared)
            if id == walker.audioID && result.audio == nil {
                chunk = Chunk(id: id, offset: offset, body: walker.audioBody(chunk, size))
                result.audio = chunk
            } else {
                guard declared.upperBound <= size else {
                    // Bytes after the audio that are no chunk (a truncated tag, junk): the audio still plays.
                    if result.audio != nil { break }
                    return .invalid
                }
                if result.audio != nil, !padding.contains(id) { result.keep.insert(contentsOf: declared) }
                if walker.wanted.contains(id), result.bodies[id] == nil {
                    if let body = analysis.window.bytes(declared) {
                        // Only LIST/INFO holds tags; another LIST (adtl, …) does not stand in for it.
                        if id != "LIST" || ByteView(body).matches(0, "INFO") { result.bodies[id] = body }
                        if id == "ds64" { ds64(&result, ByteView(body)) }
                    } else {
                        need.insert(contentsOf: declared)
                        if result.audio == nil { need.formUnion(analysis.lookahead(declared.upperBound)) }
                    }
                }
            }
            let end = chunk.body.upperBound
            offset = end + (end - chunk.body.lowerBound) % 2
            if offset > size { break }
        }
        return need.isEmpty ? .walked(result) : .need(need)
    }
}

/// RIFF/WAVE, RF64 and BW64: `fmt ` (format, channels, rate, byte rate, block align), `data` (the audio; a size
/// of 0 or one past the end means "to the end of the file"), LIST/INFO (INAM IART IPRD ICRD IGNR ITRK/IPRT) and
/// an `id3 `/`ID3 ` chunk holding an ID3v2 tag, which wins over INFO field by field.
enum RIFF {
    static func walk(_ analysis: inout Analysis) -> Walk {
        var ds64DataSize: Int64?
        let walker = Chunks.Walker(
            endian: .little, first: 12, wanted: ["fmt ", "LIST", "id3 ", "ID3 ", "ds64"], audioID: "data",
            audioBody: { chunk, size in
                let start = chunk.body.lowerBound
                var length = chunk.body.upperBound - start
                if length == Int64(UInt32.max), let large = ds64DataSize { length = large }
                if length == 0 || length > size - start { length = size - start }
                return start..<(start + length)
            })
        let outcome = Chunks.walk(&analysis, walker) { _, view in
            ds64DataSize = view.u64le(8).flatMap { Int64(exactly: $0) }
        }
        let result: Chunks.Result
        switch outcome {
        case .need(let ranges): return .need(ranges)
        case .invalid: return .notUnderstood(.wav)
        case .walked(let walked): result = walked
        }
        guard let audio = result.audio, let fmt = result.bodies["fmt "].map(ByteView.init), fmt.count >= 16,
              let channels = fmt.u16le(2), let rate = fmt.u32le(4), let averageRate = fmt.u32le(8),
              let blockAlign = fmt.u16le(12)
        else { return .notUnderstood(.wav) }
        let byteRate = averageRate > 0 ? Double(averageRate) : Double(rate) * Double(blockAlign)
        let dataBytes = audio.body.upperBound - audio.body.lowerBound
        let duration = byteRate > 0 ? Double(dataBytes) / byteRate : nil
        var tags = Tags()
        if let id3 = result.bodies["id3 "] ?? result.bodies["ID3 "] { tags = embeddedID3v2(id3) }
        if let list = result.bodies["LIST"] { tags.fill(from: info(ByteView(list))) }
        let stream = tags.info(durationSeconds: duration, sampleRate: Int(rate), channels: Int(channels),
                               byteRate: byteRate)
        return .layout(Layout(format: .wav, audioStart: audio.body.lowerBound, byteRate: byteRate > 0 ? byteRate : nil,
                              keep: result.keep, info: stream))
    }

    /// The fields of a LIST/INFO chunk body ("INFO", then sub-chunks of text).
    static func info(_ v: ByteView) -> Tags {
        var tags = Tags()
        guard v.matches(0, "INFO") else { return tags }
        var i = 4
        for _ in 0..<256 {
            guard let id = v.fourCC(i), let length = v.u32le(i + 4), Int64(length) <= Int64(v.count - i - 8) else { break }
            let value = v.slice(i + 8, Int(length)).flatMap { Text.utf8OrLatin1(Text.untilNUL($0)) }
            switch id {
            case "INAM": tags.title = tags.title ?? value
            case "IART": tags.artist = tags.artist ?? value
            case "IPRD": tags.album = tags.album ?? value
            case "ICRD": tags.date = tags.date ?? value
            case "IGNR": tags.genre = tags.genre ?? value
            case "ITRK", "IPRT": tags.setTrack(value)
            default: break
            }
            i += 8 + Int(length) + Int(length % 2)
        }
        return tags
    }
}

/// The fields of an ID3v2 tag held in memory (a WAV or AIFF chunk body).
func embeddedID3v2(_ body: [UInt8]) -> Tags {
    let view = ByteView(body)
    guard let header = ID3v2.header(view, 0, offset: 0), header.end <= Int64(body.count) else { return Tags() }
    var window = ByteWindow(MemoryBytes(body))
    return ID3v2.parse(&window, header)
}

/// Bytes in memory, all present: lets the tag parsers read a chunk body as if it were a file.
struct MemoryBytes: AudioBytes {
    let data: [UInt8]
    init(_ data: [UInt8]) { self.data = data }
    var size: Int64 { Int64(data.count) }
    var present: ByteRanges { ByteRanges(checked: 0, size) }
    func bytes(in range: Range<Int64>) -> [UInt8]? {
        guard range.lowerBound >= 0, range.upperBound <= size else { return nil }
        return Array(data[Int(range.lowerBound)..<Int(range.upperBound)])
    }
}

/// AIFF and AIFF-C: COMM (channels, sample frames, sample size, 80-bit sample rate, AIFF-C compression), SSND
/// (its offset field places the first audio byte), NAME (title), AUTH (taken as the artist) and an `ID3 ` chunk
/// holding an ID3v2 tag, which wins field by field. The byte rate is known for uncompressed kinds (NONE, twos,
/// sowt, raw, in24, in32, fl32, fl64) and µ-law/A-law; for other AIFF-C codecs only the minimum audio bytes are
/// kept and the duration is absent.
enum AIFF {
    static func walk(_ analysis: inout Analysis) -> Walk {
        let walker = Chunks.Walker(
            endian: .big, first: 12, wanted: ["COMM", "NAME", "AUTH", "ID3 ", "id3 "], audioID: "SSND",
            audioBody: { chunk, size in
                let start = chunk.body.lowerBound
                let end = min(chunk.body.upperBound, size)
                return start..<max(start, end)
            })
        let result: Chunks.Result
        switch Chunks.walk(&analysis, walker) {
        case .need(let ranges): return .need(ranges)
        case .invalid: return .notUnderstood(.aiff)
        case .walked(let walked): result = walked
        }
        guard let ssnd = result.audio, let comm = result.bodies["COMM"].map(ByteView.init),
              let channels = comm.u16be(0), let frames = comm.u32be(2), let sampleSize = comm.u16be(6),
              let rate = extended80(comm, 8)
        else { return .notUnderstood(.aiff) }
        guard ssnd.body.upperBound - ssnd.body.lowerBound >= 8 else { return .notUnderstood(.aiff) }
        guard let header = analysis.window.view(at: ssnd.body.lowerBound, count: 8) else {
            return .need(analysis.lookahead(ssnd.body.lowerBound))
        }
        guard let offset = header.u32be(0), Int64(offset) <= ssnd.body.upperBound - ssnd.body.lowerBound - 8 else {
            return .notUnderstood(.aiff)
        }
        let audioStart = ssnd.body.lowerBound + 8 + Int64(offset)
        let compression = comm.fourCC(18) ?? "NONE"
        var bytesPerSample: Int?
        switch compression {
        case "NONE", "twos", "sowt", "raw ", "lpcm": bytesPerSample = (Int(sampleSize) + 7) / 8
        case "in24": bytesPerSample = 3
        case "in32", "fl32", "FL32": bytesPerSample = 4
        case "fl64", "FL64": bytesPerSample = 8
        case "ulaw", "ULAW", "alaw", "ALAW": bytesPerSample = 1
        default: bytesPerSample = nil
        }
        let byteRate = bytesPerSample.flatMap { b -> Double? in
            b > 0 && channels > 0 ? rate * Double(channels) * Double(b) : nil
        }
        let duration = bytesPerSample != nil && frames > 0 ? Double(frames) / rate : nil
        var tags = Tags()
        if let id3 = result.bodies["ID3 "] ?? result.bodies["id3 "] { tags = embeddedID3v2(id3) }
        var chunks = Tags()
        chunks.title = result.bodies["NAME"].flatMap { Text.utf8OrLatin1(Text.untilNUL($0[...])) }
        chunks.artist = result.bodies["AUTH"].flatMap { Text.utf8OrLatin1(Text.untilNUL($0[...])) }
        tags.fill(from: chunks)
        let info = tags.info(durationSeconds: duration, sampleRate: Int(rate.rounded()), channels: Int(channels),
                             byteRate: byteRate)
        return .layout(Layout(format: .aiff, audioStart: audioStart, byteRate: byteRate, keep: result.keep, info: info))
    }

    /// An IEEE 754 80-bit extended float (sign, 15-bit exponent, 64-bit mantissa with its integer bit) as a
    /// sample rate, or nil unless it is within 1 Hz…10 MHz.
    static func extended80(_ v: ByteView, _ i: Int) -> Double? {
        guard let signExponent = v.u16be(i), let mantissa = v.u64be(i + 2), signExponent & 0x8000 == 0,
              mantissa != 0 else { return nil }
        let exponent = Int(signExponent & 0x7FFF) - 16383 - 63
        guard exponent > -200, exponent < 200 else { return nil }
        let value = Double(sign: .plus, exponent: exponent, significand: Double(mantissa))
        guard value.isFinite, value >= 1, value <= 10_000_000 else { return nil }
        return value
    }
}
